package cli_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ralphBin is the binary built once by TestMain for the end-to-end tests;
// it is empty under -short, which skips them.
var ralphBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ralph-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	// Keys and witnesses of every command the tests run go to this
	// directory, never to the real home.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	ralphBin = filepath.Join(dir, "ralph")
	var flags []string
	if os.Getenv("RALPH_E2E_RACE") == "1" { // make test-race-e2e: the race detector in the shipped binary too
		flags = append(flags, "-race")
	}
	if err := goBuild(ralphBin, flags...); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// skipWithoutBinary skips an end-to-end test under -short, where TestMain
// builds no binary: the one place the end-to-end tests skip.
func skipWithoutBinary(t testing.TB) {
	t.Helper()
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
}

// goBuild builds the ralph command into out.
func goBuild(out string, flags ...string) error {
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, "github.com/ralphloop/ralph")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}
	return nil
}

// runBinary runs bin with args and stdin as a user would, and returns its
// output and exit code.
func runBinary(t *testing.T, bin, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCommand(t, bin, stdin, nil, args...)
}

// runCommand runs bin with args; env, when not nil, is its whole
// environment.
func runCommand(t *testing.T, bin, stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	// A deadline only guards against a hang; no test measures time.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, withCreds(args)...)
	// A process that outlives the deadline gets SIGQUIT first, so that the
	// Go runtime prints where each of its goroutines was: the failure
	// says where it hung.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("ralph %q did not end within %s; its goroutines then:\n%s", args, 2*time.Minute, errOut.String())
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.Exited():
		code = exitErr.ExitCode()
	default:
		t.Fatalf("ralph %q: %v (stderr %q)", args, err, errOut.String())
	}
	if s := errOut.String(); strings.Contains(s, "goroutine ") || strings.Contains(s, "panic") {
		t.Errorf("ralph %q printed a stack trace or panic:\n%s", args, s)
	}
	return out.String(), errOut.String(), code
}

func TestE2E(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runBinary(t, ralphBin, tc.stdin, tc.args...)
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
}

// TestE2EVersionLdflags checks that a release build can stamp its version.
func TestE2EVersionLdflags(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "ralph")
	if err := goBuild(bin, "-ldflags", "-X github.com/ralphloop/ralph/cli.version=v9.8.7"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBinary(t, bin, "", "version")
	if code != 0 || !strings.HasPrefix(out, "ralph v9.8.7 (go") {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want \"ralph v9.8.7 (go…)\"", code, out, errOut)
	}
}

// version prints "dev", or the module version the go command stamped from
// the checkout (a pseudo-version in a clean clone), then the toolchain.
func TestE2EVersion(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	out, errOut, code := runBinary(t, ralphBin, "", "version")
	if code != 0 || errOut != "" {
		t.Fatalf("ralph version: exit %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`^ralph (dev|v[0-9][^ ]*) \(go[0-9.]+ [a-z0-9]+/[a-z0-9]+\)\n$`).MatchString(out) {
		t.Errorf("ralph version = %q, want \"ralph dev|vX.Y.Z (goN linux/amd64)\"", out)
	}
}
