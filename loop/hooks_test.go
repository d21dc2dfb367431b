package loop

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
)

const hookPlan = `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
name = "two"
kind = "max_iterations"
max = 2
`

// A hook gets the event on stdin and in RALPH_* variables, runs in the
// workdir, and each run is a HookRan action with its exit and output; a
// failing hook under warn changes nothing else.
func TestHookWarnRecordsEachRun(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, hookPlan+`
[[hook]]
name = "log"
at = "after_iteration"
cmd = ["sh", "-c", "cat >> events.jsonl; echo \"it=$RALPH_ITERATION status=$RALPH_STATUS at=$RALPH_HOOK_AT\"; exit 3"]
[[hook]]
at = "on_stop"
cmd = ["sh", "-c", "echo \"$RALPH_CLASS by $RALPH_CONDITION\""]
`, nil)
	out, err := r.Run(context.Background())
	if err != nil || out.ExitCode != ExitLimit || out.Iterations != 2 {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	ran := runTypes(t, fx, out.RunID, ledger.HookRan)
	if len(ran) != 3 {
		t.Fatalf("%d HookRan, want 2 after_iteration + 1 on_stop", len(ran))
	}
	for i, a := range ran[:2] {
		want := "it=" + string(rune('1'+i)) + " status=ok at=after_iteration"
		if a.Success || a.Metadata["exit"].Str() != "3" || !strings.Contains(a.Metadata["output"].Str(), want) ||
			a.ErrorMessage != "hook log exited with status 3" || a.Metadata["on_failure"].Str() != "warn" {
			t.Errorf("HookRan %d: %+v %v", i, a.Metadata, a.ErrorMessage)
		}
	}
	if stop := ran[2]; !stop.Success || stop.FunctionName != "on_stop-2" || strings.TrimSpace(stop.Metadata["output"].Str()) != "limit by two" {
		t.Errorf("on_stop HookRan: %+v", stop.Metadata)
	}
	// The closing action comes after the on_stop hook.
	acts, _ := fx.store.ByRun(out.RunID)
	if last := acts[len(acts)-1]; last.Type != ledger.RunStopped {
		t.Errorf("last action %s, want RunStopped", last.Type)
	}
	data, err := os.ReadFile(filepath.Join(r.o.Config.Loop.Workdir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var ev HookEvent
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &ev) != nil {
		t.Fatalf("stdin events %q", data)
	}
	if ev.At != "after_iteration" || ev.Hook != "log" || ev.RunID != out.RunID || ev.Iteration != 2 || ev.Status != "ok" || ev.Workdir != r.o.Config.Loop.Workdir {
		t.Errorf("event %+v", ev)
	}
}

// on_failure = "fail_iteration" at before_iteration fails the iteration
// without asking for a plan; on_error hooks then run with the error.
func TestHookFailIteration(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, hookPlan+`
[[hook]]
at = "before_iteration"
cmd = ["sh", "-c", "echo not ready >&2; exit 1"]
on_failure = "fail_iteration"
[[hook]]
at = "on_error"
cmd = ["sh", "-c", "echo \"$RALPH_STATUS: $RALPH_ERROR\""]
`, nil)
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 2 {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.PlanGenerated)); n != 0 {
		t.Errorf("%d plans asked for, want none", n)
	}
	for _, it := range runTypes(t, fx, out.RunID, ledger.IterationCompleted) {
		if it.Success || it.Metadata["status"].Str() != "failed" || it.ErrorMessage != "hook before_iteration-1 exited with status 1" {
			t.Errorf("iteration %+v %q", it.Metadata, it.ErrorMessage)
		}
	}
	ran := runTypes(t, fx, out.RunID, ledger.HookRan)
	if len(ran) != 4 || strings.TrimSpace(ran[0].Metadata["output"].Str()) != "not ready" ||
		strings.TrimSpace(ran[1].Metadata["output"].Str()) != "failed: hook before_iteration-1 exited with status 1" {
		t.Fatalf("HookRan %d: %+v", len(ran), ran)
	}
}

// on_failure = "fail_iteration" at after_iteration turns an ok iteration
// into a failed one, which consecutive_failures counts.
func TestHookFailIterationAfter(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
name = "fails"
kind = "consecutive_failures"
count = 2
[[stop]]
kind = "max_iterations"
max = 5
[[hook]]
at = "after_iteration"
cmd = ["false"]
on_failure = "fail_iteration"
`, nil)
	out, err := r.Run(context.Background())
	if err != nil || out.TriggeredBy != "fails" || out.Iterations != 2 || out.ExitCode != ExitFailure {
		t.Fatalf("outcome %+v, %v", out, err)
	}
}

// on_failure = "pause" pauses the run after the hook; Resume goes on.
func TestHookPause(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, hookPlan+`
[[hook]]
at = "after_iteration"
cmd = ["sh", "-c", "test $RALPH_ITERATION -ne 1"]
on_failure = "pause"
timeout = "5s"
`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := r.Events().Subscribe(ctx, 1)
	res := make(chan *Outcome, 1)
	go func() {
		out, err := r.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		res <- out
	}()
	for e := range events {
		if e.Kind == EventState && e.State == StatePaused {
			break
		}
	}
	if n := len(runTypes(t, fx, r.RunID(), ledger.IterationStarted)); n != 1 {
		t.Errorf("%d iterations started while paused, want 1", n)
	}
	r.Resume()
	out := <-res
	if out == nil || out.Iterations != 2 || out.ExitCode != ExitLimit {
		t.Fatalf("outcome %+v", out)
	}
}

// A hook command that is not found is refused before the run starts, in
// one sentence naming the config's line.
func TestHookNotFound(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t, hookPlan+"\n[[hook]]\nat = \"on_stop\"\ncmd = [\"ralph-no-such-hook\"]\n")
	err := CheckHooks(cfg)
	if err == nil || !strings.HasSuffix(err.Error(), `ralph.toml:9: [[hook]] on_stop-1: command "ralph-no-such-hook" is not found; install it, fix the name or write its path (relative paths start at the workdir)`) {
		t.Fatalf("got %v", err)
	}
}

func parseConfig(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(src), filepath.Join(t.TempDir(), "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A before_stop_check hook runs before the conditions are checked: what it
// does is what they see, in the same iteration.
func TestHookBeforeStopCheck(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
name = "done"
kind = "file_exists"
path = "DONE"
[[stop]]
kind = "max_iterations"
max = 5
[[hook]]
at = "before_stop_check"
cmd = ["sh", "-c", "if [ $RALPH_ITERATION -eq 2 ]; then touch DONE; fi"]
`, nil)
	out, err := r.Run(context.Background())
	if err != nil || out.TriggeredBy != "done" || out.Iterations != 2 || out.ExitCode != ExitSuccess {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	ran := runTypes(t, fx, out.RunID, ledger.HookRan)
	evals := runTypes(t, fx, out.RunID, ledger.StopConditionsEvaluated)
	if len(ran) != 2 || len(evals) != 2 || ran[1].Seq > evals[1].Seq || ran[1].Metadata["at"].Str() != "before_stop_check" {
		t.Fatalf("HookRan %+v, evaluations %d", ran, len(evals))
	}
}
