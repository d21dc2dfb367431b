package loop

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// sleepyRunner builds a runner whose plan runs `sleep 30` through shell.exec
// in iteration 1 (and nothing slow after), with sleep on the allowlist, plus
// the [[stop]] tables in stops. Success-class predicates are watched after
// every action, as the CLI wires them.
func sleepyRunner(t *testing.T, stops string) (*Runner, *fixture) {
	t.Helper()
	src := `
[plan]
rtfs = '''(do (step "Nap" (if (= (:iteration ctx) 1) (call :shell.exec {:cmd "sleep" :args ["30"]}) :awake)))'''
` + stops
	cfg, err := config.Parse([]byte(src), filepath.Join(t.TempDir(), "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, governance.Constitution{ShellAllow: []string{"sleep"}}, nil, nil)
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	var preds []CompletionPredicate
	for _, c := range conds {
		if p := c.Predicate(); p != nil && c.Class == stop.ClassSuccess {
			preds = append(preds, CompletionPredicate{Name: c.Name, Pred: p})
		}
	}
	r, err := NewRunner(RunnerOptions{Config: cfg, Store: fx.store, Orchestrator: fx.orch,
		Provider: arbiter.StaticProvider{Source: cfg.Plan.RTFS}, Conditions: conds, Predicates: preds,
		Intent: arbiter.Intent{Goal: "nap", Params: rtfs.MapValue(rtfs.NewMap())}})
	if err != nil {
		t.Fatal(err)
	}
	return r, fx
}

// whenNapping calls fn once the step that runs sleep has started.
func whenNapping(ctx context.Context, fx *fixture, fn func()) {
	go func() {
		for a := range fx.store.Subscribe(ctx, 1) {
			if a.Type == ledger.PlanStepStarted && a.FunctionName == "Nap" {
				time.AfterFunc(50*time.Millisecond, fn) // let sleep start; a cancel before it starts is recorded the same
				return
			}
		}
	}()
}

// TestEveryFailureModeClosesTheRun goes through each way a run used to end
// without its closing action, or with a cancellation recorded as a
// timeout, and finds every run closed and every cut-short call recorded as
// cancelled by whoever asked.
func TestEveryFailureModeClosesTheRun(t *testing.T) {
	t.Parallel()
	const maxTwo = "\n[[stop]]\nkind = \"max_iterations\"\nmax = 2\n"
	cases := []struct {
		name     string
		stops    string
		act      func(r *Runner, cancel context.CancelCauseFunc)
		end      ledger.ActionType
		by       string // cancelled_by of the sleeping call; "" when nothing was cut short
		iter1    string // status of iteration 1
		wantText string // in the closing action's reason or the evaluation's error
	}{
		{name: "skip", stops: maxTwo, act: func(r *Runner, _ context.CancelCauseFunc) { r.SkipIteration() },
			end: ledger.RunStopped, by: CancelSkip, iter1: "skipped", wantText: "reached max_iterations 2"},
		{name: "abort", stops: maxTwo, act: func(r *Runner, _ context.CancelCauseFunc) { r.Abort() },
			end: ledger.RunAborted, by: CancelAbort, iter1: "cancelled", wantText: "aborted by the user"},
		{name: "signal", stops: maxTwo, act: func(_ *Runner, cancel context.CancelCauseFunc) {
			cancel(errors.New("interrupt signal received"))
		}, end: ledger.RunAborted, by: CancelSignal, iter1: "cancelled", wantText: "interrupted by the user"},
		{name: "superseded", stops: maxTwo, act: func(_ *Runner, cancel context.CancelCauseFunc) {
			cancel(&Cancelled{By: CancelSuperseded, Reason: "attempt 2 of task US-1 merged first"})
		}, end: ledger.RunAborted, by: CancelSuperseded, iter1: "cancelled", wantText: "attempt 2 of task US-1 merged first"},
		{name: "max_duration", stops: maxTwo + "[[stop]]\nkind = \"max_duration\"\nduration = \"700ms\"\n",
			end: ledger.RunStopped, by: CancelMaxDuration, iter1: "cancelled", wantText: "max_duration 700ms reached"},
		{name: "predicate type error", stops: maxTwo + `
[[stop]]
name = "three"
kind = "predicate"
rtfs = '(>= (audit.count "Nap" :succeeded) "three")'
`, act: func(r *Runner, _ context.CancelCauseFunc) { r.SkipIteration() }, end: ledger.RunFailed, by: CancelSkip,
			iter1: "skipped", wantText: `ralph.toml:9: [[stop]] "three": rtfs:1:1: >= expects a number, got string "three"`},
		{name: "command cannot start", stops: maxTwo + `
[[stop]]
name = "check"
kind = "command"
cmd = ["/nonexistent/check.sh"]
`, act: func(r *Runner, _ context.CancelCauseFunc) { r.SkipIteration() }, end: ledger.RunFailed, by: CancelSkip,
			iter1: "skipped", wantText: `ralph.toml:9: [[stop]] "check": fork/exec /nonexistent/check.sh`},
		{name: "error_class not_met goes on", stops: maxTwo + `
[[stop]]
name = "three"
kind = "predicate"
error_class = "not_met"
rtfs = '(>= (audit.count "Nap" :succeeded) "three")'
`, act: func(r *Runner, _ context.CancelCauseFunc) { r.SkipIteration() }, end: ledger.RunStopped, by: CancelSkip,
			iter1: "skipped", wantText: "reached max_iterations 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, fx := sleepyRunner(t, tc.stops)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.act != nil {
				whenNapping(ctx, fx, func() { tc.act(r, cancel) })
			}
			out, err := r.Run(ctx)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			acts, err := fx.store.ByRun(out.RunID)
			if err != nil {
				t.Fatal(err)
			}
			var ends []ledger.Action
			var evalErrs []string
			for _, a := range acts {
				if IsRunEnd(a.Type) {
					ends = append(ends, a)
				}
				if a.Type == ledger.StopConditionsEvaluated {
					ev, err := stop.EvaluationFromAction(&a)
					if err != nil {
						t.Fatal(err)
					}
					for _, res := range ev.Results {
						if res.Err != "" {
							evalErrs = append(evalErrs, res.Err)
						}
					}
				}
				if strings.Contains(a.ErrorMessage, "timed out") {
					t.Errorf("seq %d %s says it timed out: %s", a.Seq, a.Type, a.ErrorMessage)
				}
			}
			if len(ends) != 1 || ends[0].Type != tc.end || ends[0].Seq != acts[len(acts)-1].Seq {
				t.Fatalf("closing actions %v, want one %s, last", types(ends), tc.end)
			}
			if !strings.Contains(ends[0].Metadata["reason"].Str()+"\n"+strings.Join(evalErrs, "\n"), tc.wantText) {
				t.Errorf("reason %q and evaluation errors %q do not say %q", ends[0].Metadata["reason"].Str(), evalErrs, tc.wantText)
			}
			calls := runTypes(t, fx, out.RunID, ledger.CapabilityCall)
			if len(calls) == 0 {
				t.Fatal("no CapabilityCall recorded")
			}
			nap := calls[0]
			if nap.Success || nap.Metadata["stopped"].Str() != "cancelled" || nap.Metadata["cancelled_by"].Str() != tc.by {
				t.Errorf("the sleep call: success %t stopped %q by %q (%s), want cancelled by %q", nap.Success,
					nap.Metadata["stopped"].Str(), nap.Metadata["cancelled_by"].Str(), nap.ErrorMessage, tc.by)
			}
			if !strings.Contains(nap.ErrorMessage, "cancelled (") {
				t.Errorf("the sleep call's error %q does not say it was cancelled", nap.ErrorMessage)
			}
			iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
			if st := iters[0].Metadata["status"].Str(); st != tc.iter1 || iters[0].Metadata["cancelled_by"].Str() != tc.by {
				t.Errorf("iteration 1 status %q cancelled_by %q, want %q by %q", st, iters[0].Metadata["cancelled_by"].Str(), tc.iter1, tc.by)
			}
			runs, err := ListRuns(fx.store)
			if err != nil || len(runs) != 1 || runs[0].State == StateRunning || runs[0].State != out.State {
				t.Errorf("runs %+v %v, want the run closed as %s", runs, err, out.State)
			}
		})
	}
}

func types(acts []ledger.Action) []string {
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = a.Type.String()
	}
	return out
}

// A step's own :timeout-ms is a timeout, not a cancellation, and the call
// it cuts short says so.
func TestStepTimeoutStaysATimeout(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{ShellAllow: []string{"sleep"}}, nil, nil)
	res, err := fx.exec(t, `(step "Nap" ^{:timeout-ms 200} (call :shell.exec {:cmd "sleep" :args ["30"]}))`, rtfs.Nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), `step "Nap" timed out after 200ms`) {
		t.Fatalf("plan error %v, want the step's timeout", res.Err)
	}
	acts, err := fx.store.ByPlan(res.PlanID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if a.Type == ledger.CapabilityCall {
			if a.Metadata["stopped"].Str() != "timeout" || a.Metadata["cancelled_by"].Str() != "" ||
				!strings.Contains(a.ErrorMessage, `step "Nap" timed out after 200ms`) {
				t.Errorf("call recorded stopped %q by %q: %s", a.Metadata["stopped"].Str(), a.Metadata["cancelled_by"].Str(), a.ErrorMessage)
			}
			return
		}
	}
	t.Fatal("no CapabilityCall recorded")
}

// A run whose process died with a failing predicate resumes and closes.
func TestResumeOfARunWithAFailingPredicateCloses(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
kind = "max_iterations"
max = 3
[[stop]]
name = "three"
kind = "predicate"
rtfs = '(>= (audit.count "Echo" :succeeded) "three")'
`, nil)
	ctx := context.Background()
	run := NewID()
	if _, err := fx.store.Append(ctx, &ledger.Action{ActionID: NewID(), RunID: run, IntentID: run, Type: ledger.RunStarted,
		FunctionName: "goal", Success: true, Metadata: map[string]rtfs.Value{"config": rtfs.String("")}}); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.KV().Put(ctx, RunKVPrefix+run, rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("state"), rtfs.Keyword(StateRunning)))); err != nil {
		t.Fatal(err)
	}
	out, err := resumer(t, r, fx, run, func(o *RunnerOptions) {
		for _, c := range o.Conditions {
			if p := c.Predicate(); p != nil {
				o.Predicates = append(o.Predicates, CompletionPredicate{Name: c.Name, Pred: p})
			}
		}
	}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.State != StateFailed || out.TriggeredBy != "three" || !strings.Contains(out.Reason, `[[stop]] "three": rtfs:1:1`) {
		t.Fatalf("outcome %+v", out)
	}
	if n := len(runTypes(t, fx, run, ledger.RunFailed)); n != 1 {
		t.Errorf("%d RunFailed", n)
	}
}
