// Package bench holds benchmarks kept out of ralph's own module: the RTFS
// evaluator against peer libraries (expr-lang/expr, which stays out of
// ralph's go.mod), and ralph web's figures against the built binary and
// Debian's Chromium (web_test.go). It has no code of its own, only
// benchmarks.
package bench
