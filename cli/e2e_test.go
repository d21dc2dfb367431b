package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// suite is the package's end-to-end tests, which drive the built binary as
// a user would. Each *_e2e_test.go file adds its tests beside the others of
// the same command (suite.Add); TestE2E runs them all through the one
// driver, internal/e2e, whose doc says how to add one. Fleet commands are
// signed in with the credentials of the member their role fits
// (withCreds).
var suite = &e2e.Suite{Package: "github.com/ralphloop/ralph", Args: withCreds}

func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }

// TestE2E runs the end-to-end tests: go test -run 'E2E/Quickstart$' ./cli/
// runs one.
func TestE2E(t *testing.T) { suite.Run(t) }

var _ = suite.Add(e2e.Test{Name: "Commands", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog.rtfs")
	writeFile(t, prog, "; a comment\n(defn half [n]\n  (/ n 2))\n\n(half\n  (/ 10 0))\n")

	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantOut    string
		wantErrPfx string
		wantErr    string
		wantCode   int
	}{
		{name: "eval expr", args: []string{"eval", "-e", "(+ 1 2)"}, wantOut: "3\n"},
		{name: "syntax error", args: []string{"eval", "-e", "(+ 1"}, wantErrPfx: "<expr>:1:1: ", wantCode: 2},
		{name: "runtime error", args: []string{"eval", "-e", "(/ 1 0)"}, wantErrPfx: "<expr>:1:1: ", wantCode: 1},
		{name: "runtime error in file", args: []string{"eval", prog}, wantErrPfx: prog + ":6:3: ", wantCode: 1},
		{name: "stdin", args: []string{"eval", "-"}, stdin: "(def x 20)\n(+ x 22)\n", wantOut: "42\n"},
		{name: "stdin error is named", args: []string{"eval", "-"}, stdin: "\n\n  (/ 1 0)", wantErrPfx: "<stdin>:3:3: ", wantCode: 1},
		{name: "fmt", args: []string{"fmt", "-"}, stdin: "{:b 1, :a 2}", wantOut: "{:a 2 :b 1}\n"},
		{name: "fmt file", args: []string{"fmt", prog}, wantOut: "(defn half [n] (/ n 2))\n(half (/ 10 0))\n"},
		{name: "deep nesting on stdin", args: []string{"eval", "-"}, stdin: strings.Repeat("(", 1<<20), wantErrPfx: "<stdin>:1:", wantErr: "nesting", wantCode: 2},
		{name: "missing file", args: []string{"eval", filepath.Join(dir, "nope.rtfs")}, wantErrPfx: "ralph: open ", wantErr: "no such file or directory", wantCode: 2},
		{name: "unknown command", args: []string{"frobnicate", "--now"}, wantErrPfx: "ralph: unknown command \"frobnicate\"", wantCode: 2},
		{name: "unknown flag", args: []string{"eval", "--nope"}, wantErrPfx: "ralph: unknown flag: --nope", wantCode: 2},
	}
	for _, tc := range tests {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			out, errOut, code := e.Ralph(tc.args...).Stdin(tc.stdin).Run()
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tc.wantCode, errOut)
			}
			if !strings.HasPrefix(out, tc.wantOut) || (tc.wantOut == "" && out != "") {
				t.Errorf("stdout = %q, want %q", out, tc.wantOut)
			}
			if tc.wantCode == 0 && errOut != "" {
				t.Errorf("stderr = %q, want nothing", errOut)
			}
			if !strings.HasPrefix(errOut, tc.wantErrPfx) || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr = %q, want prefix %q containing %q", errOut, tc.wantErrPfx, tc.wantErr)
			}
		})
	}
}})

// A release build can stamp its version.
var _ = suite.Add(e2e.Test{Name: "VersionLdflags", Run: func(t *testing.T, e *e2e.E) {
	bin := e.Build("-ldflags", "-X github.com/ralphloop/ralph/cli.version=v9.8.7")
	out, errOut, code := e.Command(bin, "version").Run()
	if code != 0 || !strings.HasPrefix(out, "ralph v9.8.7 (go") {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want \"ralph v9.8.7 (go…)\"", code, out, errOut)
	}
}})

// version prints "dev", or the module version the go command stamped from
// the checkout (a pseudo-version in a clean clone), then the toolchain.
var _ = suite.Add(e2e.Test{Name: "Version", Run: func(t *testing.T, e *e2e.E) {
	out, errOut, code := e.Ralph("version").Run()
	if code != 0 || errOut != "" {
		t.Fatalf("ralph version: exit %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`^ralph (dev|v[0-9][^ ]*) \(go[0-9.]+ [a-z0-9]+/[a-z0-9]+\)\n$`).MatchString(out) {
		t.Errorf("ralph version = %q, want \"ralph dev|vX.Y.Z (goN linux/amd64)\"", out)
	}
}})
