package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/cli"
	"github.com/ralphloop/ralph/ledger"
)

// run drives cli.Run in-process as a user would drive the binary.
func run(t *testing.T, ctx context.Context, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	stderr = errOut.String()
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Errorf("ralph %q printed a stack trace or panic:\n%s", args, stderr)
	}
	return out.String(), stderr, code
}

func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	multi := filepath.Join(dir, "multi.rtfs")
	writeFile(t, multi, "(def x 1)\n\n(+ x\n   (/ x 0))\n")
	unresolved := filepath.Join(dir, "unresolved.rtfs")
	writeFile(t, unresolved, "(def x 1)\n  (no-such-fn x)\n")
	unclosed := filepath.Join(dir, "unclosed.rtfs")
	writeFile(t, unclosed, "(+ 1 2)\n[1 2\n")
	missing := filepath.Join(dir, "missing.rtfs")

	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantOut    string // exact stdout
		wantErr    string // substring of stderr; "" means stderr must be empty
		wantErrPfx string // prefix of stderr
		wantCode   int
	}{
		{name: "eval expr", args: []string{"eval", "-e", "(+ 1 2)"}, wantOut: "3\n"},
		{name: "eval long flag", args: []string{"eval", "--expr", "(* 6 7)"}, wantOut: "42\n"},
		{name: "eval empty program is nil", args: []string{"eval", "-e", ""}, wantOut: "nil\n"},
		{name: "eval canonical output", args: []string{"eval", "-e", `{:b "x\ny", :a 2.0}`}, wantOut: "{:a 2.0 :b \"x\\ny\"}\n"},
		{name: "eval value of last form", args: []string{"eval", "-e", "(def x 2) (defn sq [n] (* n n)) (sq x)"}, wantOut: "4\n"},
		{name: "eval stdin", args: []string{"eval", "-"}, stdin: "(- 10 4)", wantOut: "6\n"},
		{name: "eval file", args: []string{"eval", unclosed}, wantErrPfx: unclosed + ":2:1: ", wantCode: 2},
		{name: "read error", args: []string{"eval", "-e", "(+ 1"}, wantErrPfx: "<expr>:1:1: ", wantCode: 2},
		{name: "read error on stdin", args: []string{"eval", "-"}, stdin: "\n  [1 2", wantErrPfx: "<stdin>:2:3: ", wantCode: 2},
		{name: "compile error", args: []string{"eval", unresolved}, wantErrPfx: unresolved + ":2:4: ", wantErr: "no-such-fn", wantCode: 2},
		{name: "plan forms rejected", args: []string{"eval", "-e", "(call :fs.read 1)"}, wantErrPfx: "<expr>:1:1: ", wantCode: 2},
		{name: "runtime error", args: []string{"eval", "-e", "(/ 1 0)"}, wantErrPfx: "<expr>:1:1: ", wantCode: 1},
		{name: "runtime error in file", args: []string{"eval", multi}, wantErrPfx: multi + ":4:4: ", wantCode: 1},
		{name: "fuel limit", args: []string{"eval", "--fuel", "50", "-e", "(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f 100)"}, wantErr: "fuel", wantCode: 1},
		{name: "depth limit", args: []string{"eval", "--max-depth", "10", "-e", "(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f 100)"}, wantErr: "depth", wantCode: 1},
		{name: "limits large enough", args: []string{"eval", "--fuel", "100000", "--max-depth", "200", "-e", "(defn f [n] (if (= n 0) 0 (+ 1 (f (dec n))))) (f 100)"}, wantOut: "100\n"},
		{name: "negative fuel", args: []string{"eval", "--fuel", "-1", "-e", "1"}, wantErr: "--fuel must be", wantCode: 2},
		{name: "negative depth", args: []string{"eval", "--max-depth", "-3", "-e", "1"}, wantErr: "--max-depth must be", wantCode: 2},
		{name: "missing file", args: []string{"eval", missing}, wantErrPfx: "ralph: open " + missing + ": no such file or directory\n", wantCode: 2},
		{name: "expr and file", args: []string{"eval", "-e", "1", multi}, wantErr: "either -e EXPR or FILE, not both", wantCode: 2},
		{name: "no program", args: []string{"eval"}, wantErr: "eval needs a program", wantCode: 2},
		{name: "two files", args: []string{"eval", multi, multi}, wantErr: "one FILE, got 2 arguments", wantCode: 2},
		{name: "unknown flag", args: []string{"eval", "--nope", "-e", "1"}, wantErrPfx: "ralph: unknown flag: --nope\nRun 'ralph eval --help' for usage.\n", wantCode: 2},
		{name: "bad flag value", args: []string{"eval", "--fuel", "lots", "-e", "1"}, wantErrPfx: "ralph: --fuel takes a whole number, not \"lots\"\nRun 'ralph eval --help' for usage.\n", wantCode: 2},
		{name: "bad run flag value", args: []string{"run", "--max-iterations", "x"}, wantErrPfx: "ralph: --max-iterations takes a whole number, not \"x\"\nRun 'ralph run --help' for usage.\n", wantCode: 2},
		{name: "unknown command", args: []string{"frobnicate"}, wantErrPfx: "ralph: unknown command \"frobnicate\"\nRun 'ralph --help' for usage.\n", wantCode: 2},
		{name: "misspelt command", args: []string{"evl", "-e", "1"}, wantErr: `did you mean "eval"?`, wantCode: 2},
		{name: "fmt stdin", args: []string{"fmt", "-"}, stdin: "{:b 1, :a 2}", wantOut: "{:a 2 :b 1}\n"},
		{name: "fmt file", args: []string{"fmt", multi}, wantOut: "(def x 1)\n(+ x (/ x 0))\n"},
		{name: "fmt drops comments and discards", args: []string{"fmt", "-"}, stdin: "; note\n(f #_ ignored  [1,2]) ; done\n", wantOut: "(f [1 2])\n"},
		{name: "fmt read error", args: []string{"fmt", unclosed}, wantErrPfx: unclosed + ":2:1: ", wantCode: 2},
		{name: "fmt does not compile", args: []string{"fmt", "-"}, stdin: "(no-such-fn)", wantOut: "(no-such-fn)\n"},
		{name: "fmt no args", args: []string{"fmt"}, wantErr: "fmt takes one FILE", wantCode: 2},
		{name: "fmt missing file", args: []string{"fmt", missing}, wantErrPfx: "ralph: open ", wantCode: 2},
		{name: "version extra arg", args: []string{"version", "now"}, wantErr: "version takes no arguments", wantCode: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := run(t, context.Background(), tc.stdin, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tc.wantCode, errOut)
			}
			if tc.wantCode == 0 && out != tc.wantOut {
				t.Errorf("stdout = %q, want %q", out, tc.wantOut)
			}
			if tc.wantCode != 0 && out != "" {
				t.Errorf("stdout = %q on failure, want nothing", out)
			}
			if tc.wantErr == "" && tc.wantErrPfx == "" && errOut != "" {
				t.Errorf("stderr = %q, want nothing", errOut)
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.wantErr)
			}
			if !strings.HasPrefix(errOut, tc.wantErrPfx) {
				t.Errorf("stderr = %q, want prefix %q", errOut, tc.wantErrPfx)
			}
			if tc.wantCode != 0 && strings.Count(errOut, "\n") > 2 {
				t.Errorf("stderr has %d lines, want a sentence and at most a hint:\n%s", strings.Count(errOut, "\n"), errOut)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errOut, code := run(t, context.Background(), "", args...)
		if code != 0 || errOut != "" {
			t.Errorf("ralph %q: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.HasPrefix(out, "ralph dev (go") {
			t.Errorf("ralph %q printed %q, want \"ralph dev (go…)\"", args, out)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"--help"}, {"help"}, {"eval", "--help"}} {
		out, errOut, code := run(t, context.Background(), "", args...)
		if code != 0 || errOut != "" {
			t.Errorf("ralph %q: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.Contains(out, "eval") {
			t.Errorf("ralph %q: help does not mention eval:\n%s", args, out)
		}
	}
}

// TestHelpIsCurrent reads every command's help for words that belong to
// the project's history rather than to the user: claims that only part of
// ralph works, or references to design notes the user does not have.
func TestHelpIsCurrent(t *testing.T) {
	t.Parallel()
	cmds := [][]string{nil, {"run"}, {"resume"}, {"init"}, {"plan"}, {"eval"}, {"fmt"}, {"exec"}, {"ir"}, {"ir", "compile"},
		{"ir", "canon"}, {"chain"}, {"chain", "verify"}, {"chain", "show"}, {"chain", "export"}, {"chain", "import"},
		{"runs"}, {"history"}, {"predicate"}, {"view"}, {"version"}}
	stale := []string{"Today ", "not built yet", "not yet", "seed 0", "DESIGN"}
	for _, c := range cmds {
		out, _, code := run(t, context.Background(), "", append(c, "--help")...)
		if code != 0 {
			t.Errorf("ralph %q --help: exit %d", c, code)
		}
		for _, w := range stale {
			if strings.Contains(out, w) {
				t.Errorf("ralph %q --help says %q:\n%s", c, w, out)
			}
		}
	}
}

// An unknown run id points at the command that lists runs.
func TestUnknownRunNamesRuns(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	st, err := ledger.Open(ledger.Options{Dir: store}) // a store, without run nope
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{{"history", "nope"}, {"predicate", "nope", "true"}} {
		_, errOut, code := run(t, context.Background(), "", append(args, "--store", store)...)
		if want := "ralph: no run nope in this store; `ralph runs` lists them\n"; code != 2 || errOut != want {
			t.Errorf("ralph %q: exit %d, stderr %q; want 2 and %q", args, code, errOut, want)
		}
	}
}

// runs --json names its fields the way every other --json output does
// (snake_case, as run --json's summary: run_id, cost_usd …), not with Go's
// field names.
func TestRunsJSONFieldNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, "[intent]\ngoal = \"g\"\n[plan]\nrtfs = '(call :ccos.echo {:message \"x\"})'\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n")
	if _, errOut, code := run(t, context.Background(), "", "run", cfg, "--no-tui"); code != 3 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	out, errOut, code := run(t, context.Background(), "", "runs", "--json", "--store", filepath.Join(dir, ".ralph"))
	if code != 0 {
		t.Fatalf("runs --json: exit %d: %s", code, errOut)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("runs --json printed %q: %v", out, err)
	}
	for _, k := range []string{"id", "state", "goal", "class", "condition", "reason", "started", "updated", "iterations", "cost_usd", "tokens", "ended", "duration_ms"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("runs --json has no %q: %s", k, out)
		}
	}
	if len(rec) != 13 {
		t.Errorf("runs --json has %d fields, want 13: %s", len(rec), out)
	}
}

// TestEvalCancelled checks that a cancelled context (what Ctrl-C does in
// Main) stops evaluation with exit code 4 and a positioned message.
func TestEvalCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Without cancellation this runs 2^60 calls.
	prog := "(defn f [n] (if (= n 0) 0 (+ (f (dec n)) (f (dec n))))) (f 60)"
	out, errOut, code := run(t, ctx, "", "eval", "--fuel", "9000000000000000000", "-e", prog)
	if code != cli.ExitCancelled {
		t.Errorf("exit code = %d, want %d (stderr %q)", code, cli.ExitCancelled, errOut)
	}
	if out != "" || !strings.HasPrefix(errOut, "<expr>:") || !strings.Contains(errOut, "cancelled") {
		t.Errorf("stdout %q, stderr %q; want nothing and a positioned cancellation", out, errOut)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	code := cli.Run(context.Background(), []string{"eval", "-e", "1"}, strings.NewReader(""), failingWriter{}, &errOut)
	if code != cli.ExitFailure || errOut.String() != "ralph: write output: disk full\n" {
		t.Errorf("exit %d, stderr %q; want 1 and the write error", code, errOut.String())
	}
}

type panickingReader struct{}

func (panickingReader) Read([]byte) (int, error) { panic("reader exploded") }

// TestPanicIsReported checks that a panic anywhere under Run becomes one
// "internal error" line and exit 1, not a stack trace.
func TestPanicIsReported(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), []string{"eval", "-"}, panickingReader{}, &out, &errOut)
	want := "ralph: internal error: reader exploded; please report it with the command that caused it\n"
	if code != cli.ExitFailure || errOut.String() != want {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut.String(), want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEvalRefusesHugeSharedResult(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"eval", "-e", "(reduce (fn [v _] [v v]) 0 (range 64))"}, strings.NewReader(""), &out, &errb)
	if code != cli.ExitFailure || !strings.Contains(errb.String(), "too large to print") || out.Len() != 0 {
		t.Fatalf("code %d stdout %q stderr %q", code, out.String(), errb.String())
	}
}
