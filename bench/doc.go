// Package bench compares ralph's RTFS evaluator with peer libraries. It is a
// separate module so that the peers (expr-lang/expr) stay out of ralph's
// go.mod; it has no code of its own, only benchmarks.
package bench
