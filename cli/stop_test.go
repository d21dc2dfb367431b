package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/stop"
)

func runStopCmd(t *testing.T, cmd *cobra.Command, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if c, err := cmd.ExecuteContextC(context.Background()); err != nil {
		code = report(&errOut, c, err)
	}
	return out.String(), errOut.String(), code
}

// recordedRun writes a small run with two stop evaluations to a store on
// disk and returns the store dir.
func recordedRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := ledger.Open(ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, a := range []ledger.Action{
		{RunID: "run-1", Type: ledger.RunStarted, FunctionName: "run", Success: true},
		{RunID: "run-1", Type: ledger.IterationStarted},
		{RunID: "run-1", Type: ledger.CapabilityCall, FunctionName: "shell.exec", ErrorMessage: "exit 1",
			Metadata: map[string]rtfs.Value{"exit": rtfs.String("1")}},
		{RunID: "run-1", Type: ledger.CapabilityCall, FunctionName: "shell.exec", Success: true,
			Metadata: map[string]rtfs.Value{"exit": rtfs.String("0")}, Result: rtfs.String("<promise>DONE</promise>")},
	} {
		if _, err := st.Append(ctx, &a); err != nil {
			t.Fatal(err)
		}
	}
	conds, err := stop.FromConfig([]config.Stop{
		{Name: "iters", Kind: "max_iterations", Max: 2},
		{Name: "promise", Kind: "output_pattern", Pattern: "<promise>DONE</promise>"},
	}, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	e := stop.NewEvaluator(conds, stop.Options{Ledger: st})
	acts, _ := st.ByRun("run-1")
	for i := 1; i <= 2; i++ {
		in := stop.Input{RunID: "run-1", Iteration: i}
		if i == 2 {
			in.LastActions = acts[2:]
		}
		if _, err := e.Evaluate(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPredicateCommand(t *testing.T) {
	t.Parallel()
	store := recordedRun(t)
	out, errOut, code := runStopCmd(t, newPredicateCmd(), "run-1", `(audit.metadata? "shell.exec" "exit" "0")`, "--store", store)
	if code != 0 || !strings.HasPrefix(out, "true\n") || !strings.Contains(out, `(audit.metadata? "shell.exec" "exit" "0") → true  seq 4`) ||
		!strings.Contains(out, "first held after") {
		t.Errorf("holds: code %d\n%s%s", code, out, errOut)
	}
	out, _, code = runStopCmd(t, newPredicateCmd(), "run-1", `{"not": {"action_failed": {"function_name": "shell.exec"}}}`, "--store", store)
	if code != 1 || !strings.HasPrefix(out, "false\n") || !strings.Contains(out, "seq 3") {
		t.Errorf("does not hold: code %d\n%s", code, out)
	}
	out, _, code = runStopCmd(t, newPredicateCmd(), "run-1", `{"action_succeeded": {"function_name": "shell.exec"}}`, "--store", store, "--json")
	var rep serve.PredicateReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Holds || rep.FirstSeq != 4 {
		t.Errorf("json: code %d %s", code, out)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"run-1", `{"action_done": {}}`}},
		{[]string{"run-1", `(audit.succeeded? "x"`}},
		{[]string{"no-such-run", `(audit.succeeded? "x")`}},
		{[]string{"run-1"}},
	} {
		if _, errOut, code := runStopCmd(t, newPredicateCmd(), append(tc.args, "--store", store)...); code != 2 || errOut == "" {
			t.Errorf("%q: code %d, stderr %q", tc.args, code, errOut)
		}
	}
}

func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	store := recordedRun(t)
	out, errOut, code := runStopCmd(t, newHistoryCmd(), "run-1", "--store", store, "-v")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	for _, want := range []string{"iteration 1", "continue", "iteration 2", "STOP (success) by promise", "✓ promise", "1/2", "seq 4 shell.exec"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runStopCmd(t, newHistoryCmd(), "run-1", "--store", store, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var ev stop.Evaluation
	if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &ev) != nil || ev.TriggeredBy != "promise" || len(ev.Results) != 2 {
		t.Errorf("json: code %d\n%s", code, out)
	}
	if _, errOut, code := runStopCmd(t, newHistoryCmd(), "nope", "--store", store); code != 2 || !strings.Contains(errOut, "no run nope in this store") {
		t.Errorf("unknown run: %d %s", code, errOut)
	}
}
