package loop

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/internal/testenv"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// newRunner builds a runner over an in-memory store from a ralph.toml text.
func newRunner(t testing.TB, toml string, provider arbiter.Provider) (*Runner, *fixture) {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), filepath.Join(t.TempDir(), "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	if provider == nil {
		provider = arbiter.StaticProvider{Source: cfg.Plan.RTFS}
	}
	r, err := NewRunner(RunnerOptions{Config: cfg, Store: fx.store, Orchestrator: fx.orch, Provider: provider,
		Conditions: conds, Intent: arbiter.Intent{Goal: cfg.Intent.Goal, Params: rtfs.MapValue(rtfs.NewMap())}})
	if err != nil {
		t.Fatal(err)
	}
	return r, fx
}

func runTypes(t testing.TB, fx *fixture, runID string, typ ledger.ActionType) []ledger.Action {
	t.Helper()
	acts, err := fx.store.ByRun(runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.Action
	for _, a := range acts {
		if a.Type == typ {
			out = append(out, a)
		}
	}
	return out
}

// resumer builds a runner that resumes runID on r's store with r's options;
// edit, when set, changes them first.
func resumer(t *testing.T, r *Runner, fx *fixture, runID string, edit func(*RunnerOptions)) *Runner {
	t.Helper()
	o := RunnerOptions{Config: r.o.Config, Store: fx.store, Orchestrator: fx.orch, Provider: r.o.Provider,
		Conditions: r.o.Conditions, Intent: r.o.Intent, RunID: runID, Resume: true}
	if edit != nil {
		edit(&o)
	}
	r2, err := NewRunner(o)
	if err != nil {
		t.Fatal(err)
	}
	return r2
}

func TestRunnerStopsAtMaxIterations(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message (str "it " (:iteration ctx))}))'
[[stop]]
name = "three"
kind = "max_iterations"
max = 3
`, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Iterations != 3 || out.ExitCode != ExitLimit || out.TriggeredBy != "three" || out.State != StateStopped {
		t.Fatalf("outcome %+v", out)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.IterationStarted)); n != 3 {
		t.Errorf("%d IterationStarted, want exactly 3", n)
	}
	final := runTypes(t, fx, out.RunID, ledger.RunStopped)
	if len(final) != 1 || final[0].Metadata["condition"].Str() != "three" || final[0].Metadata["reason"].Str() == "" {
		t.Errorf("final action %+v", final)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.StopConditionsEvaluated)); n != 3 {
		t.Errorf("%d StopConditionsEvaluated", n)
	}
	runs, err := ListRuns(fx.store)
	if err != nil || len(runs) != 1 || runs[0].State != StateStopped || runs[0].Iterations != 3 {
		t.Errorf("runs %+v %v", runs, err)
	}
}

// A run that a limit stops while a success condition fails says so in
// its outcome: the condition and its why, from the last evaluation. A run
// that ends in success lists nothing, though another success condition
// may not hold.
func TestRunnerOutcomeSaysWhatStillFails(t *testing.T) {
	t.Parallel()
	const failing = `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
name = "cap"
kind = "max_iterations"
max = 2
[[stop]]
name = "tests"
kind = "command"
cmd = ['sh', '-c', 'printf -- "--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(2, 3) = -1, want 5\nFAIL\n"; exit 1']
`
	r, _ := newRunner(t, failing, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []stop.Unmet{{Condition: "tests", Why: "FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5"}}
	if out.TriggeredBy != "cap" || len(out.StillFailing) != 1 || out.StillFailing[0] != want[0] {
		t.Errorf("outcome %s, still failing %+v; want cap and %+v", out.TriggeredBy, out.StillFailing, want)
	}

	r, _ = newRunner(t, failing+`
[[stop]]
name = "done"
kind = "command"
cmd = ["true"]
`, nil)
	out, err = r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "done" || out.StillFailing != nil {
		t.Errorf("a run done by success: outcome %s, still failing %+v; want done and none", out.TriggeredBy, out.StillFailing)
	}
}

func TestRunnerPredicateCompletes(t *testing.T) {
	t.Parallel()
	cfg := `
[plan]
rtfs = '(step "Count" (call :kv.put {:key "n" :value (:iteration ctx)}))'
[[stop]]
kind = "max_iterations"
max = 10
`
	r, fx := newRunner(t, cfg, nil)
	p, err := stop.ParsePredicate(`(>= (audit.count "kv.put" :succeeded) 2)`, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	r.o.Predicates = []CompletionPredicate{{Name: "counted", Pred: p}}
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != ExitSuccess || out.Iterations != 2 || out.TriggeredBy != "counted" {
		t.Fatalf("outcome %+v", out)
	}
	done := runTypes(t, fx, out.RunID, ledger.RunCompleted)
	if len(done) != 1 || done[0].Metadata[stop.MetaTriggerActionID].Str() == "" {
		t.Fatalf("RunCompleted %+v", done)
	}
	trig, err := fx.store.Get(done[0].Metadata[stop.MetaTriggerActionID].Str())
	if err != nil || trig.FunctionName != "kv.put" {
		t.Errorf("trigger %+v %v", trig, err)
	}
}

func TestRunnerFailureClassAndConsecutiveFailures(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, `
[plan]
rtfs = '(step "Boom" (call :test.fail 1))'
[[stop]]
name = "limit"
kind = "max_iterations"
max = 10
[[stop]]
name = "broken"
kind = "consecutive_failures"
count = 2
`, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != ExitFailure || out.Iterations != 2 || out.TriggeredBy != "broken" || out.State != StateFailed {
		t.Fatalf("outcome %+v", out)
	}
}

func TestRunnerBudgetStopsBeforeOvershoot(t *testing.T) {
	t.Parallel()
	// Each iteration costs $0.01 (the test capability) — a budget of $0.025
	// allows two, and the third would overshoot, so it never starts.
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Spend" (call :test.ok 1))'
[[stop]]
name = "budget"
kind = "max_cost"
usd = 0.025
[[stop]]
kind = "max_iterations"
max = 10
`, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Iterations != 2 || out.ExitCode != ExitLimit || out.TriggeredBy != "budget" || out.CostUSD > 0.025 {
		t.Fatalf("outcome %+v", out)
	}
	if !strings.Contains(out.Reason, "expected to cost") {
		t.Errorf("reason %q", out.Reason)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.IterationStarted)); n != 2 {
		t.Errorf("%d iterations started", n)
	}
}

func TestRunnerAbortRecordsRunAborted(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
kind = "never"
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for a := range fx.store.Subscribe(ctx, 1) {
			if a.Type == ledger.IterationCompleted && a.Metadata["iteration"].AsInt() == 2 {
				cancel()
				return
			}
		}
	}()
	out, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != ExitAborted || out.State != StateAborted || len(runTypes(t, fx, out.RunID, ledger.RunAborted)) != 1 {
		t.Fatalf("outcome %+v", out)
	}
}

func TestRunnerFailureBeatsCompletionPredicate(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, `
[plan]
rtfs = '(do (step "Count" (call :test.ok 1)) (step "Boom" (call :test.fail 1)))'
[[stop]]
name = "errors"
kind = "on_error"
pattern = "boom"
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	p, err := stop.ParsePredicate(`(audit.succeeded? "Count")`, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	r.o.Predicates = []CompletionPredicate{{Name: "counted", Pred: p}}
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != ExitFailure || out.TriggeredBy != "errors" {
		t.Fatalf("outcome %+v: a failure in the same iteration must beat the completion predicate", out)
	}
}

func TestResumeAtTheLimitStartsNoIteration(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
name = "two"
kind = "max_iterations"
max = 2
`, nil)
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 2 {
		t.Fatalf("first run: %+v %v", out, err)
	}
	// As if the process died after iteration 2 but before recording the stop.
	markInterrupted(t, fx, out.RunID)
	out2, err := resumer(t, r, fx, out.RunID, nil).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.IterationStarted)); out2.ExitCode != ExitLimit || n != 2 {
		t.Fatalf("resume: %+v; %d iterations started, want 2", out2, n)
	}
}

func TestResumeContinuesTheScript(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "answers.jsonl")
	if err := os.WriteFile(script, []byte(`"(step \"A\" (call :ccos.echo {:message \"one\"}))"
"(step \"B\" (call :ccos.echo {:message \"two\"}))"
"(step \"C\" (call :ccos.echo {:message \"three\"}))"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	newScript := func() arbiter.Provider {
		p, err := arbiter.NewScriptProvider(script)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	r, fx := newRunner(t, "[plan]\nrtfs = '1'\n[[stop]]\nname = \"one\"\nkind = \"max_iterations\"\nmax = 1\n", newScript())
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 1 {
		t.Fatalf("first run: %+v %v", out, err)
	}
	markInterrupted(t, fx, out.RunID)
	cfg := *r.o.Config
	cfg.Stop = []config.Stop{{Name: "two", Kind: "max_iterations", Max: 2}}
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	r2 := resumer(t, r, fx, out.RunID, func(o *RunnerOptions) { o.Config, o.Provider, o.Conditions = &cfg, newScript(), conds })
	if _, err := r2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, a := range runTypes(t, fx, out.RunID, ledger.PlanStepStarted) {
		steps = append(steps, a.FunctionName)
	}
	if strings.Join(steps, ",") != "A,B" {
		t.Errorf("steps %v, want A then B: the resumed run must take the script's next answer", steps)
	}
}

// A completion signal the dead process left in the iteration it did not
// finish does not end the resumed run: that iteration runs again.
func TestResumeIgnoresLeftoverCompletionSignals(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
name = "three"
kind = "max_iterations"
max = 3
`, nil)
	ctx := context.Background()
	r.o.Config.Stop[0].Max = 1 // the first process completes one iteration …
	r.o.Conditions, _ = stop.FromConfig(r.o.Config.Stop, r.o.Config.File)
	out, err := r.Run(ctx)
	if err != nil || out.Iterations != 1 {
		t.Fatalf("first run: %+v %v", out, err)
	}
	r.o.Config.Stop[0].Max = 3
	// … then starts iteration 2, where "Done" succeeds, and dies.
	appendRun(t, fx, out.RunID,
		&ledger.Action{Type: ledger.IterationStarted, FunctionName: "iteration 2", Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(2)}},
		&ledger.Action{Type: ledger.PlanStepCompleted, FunctionName: "Done", Success: true},
	)
	p, err := stop.ParsePredicate(`(audit.succeeded? "Done")`, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	conds, _ := stop.FromConfig(r.o.Config.Stop, r.o.Config.File)
	r2 := resumer(t, r, fx, out.RunID, func(o *RunnerOptions) {
		o.Conditions, o.Predicates = conds, []CompletionPredicate{{Name: "done", Pred: p}}
	})
	out2, err := r2.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out2.ExitCode != ExitLimit || out2.TriggeredBy != "three" || out2.Iterations != 3 {
		t.Fatalf("resumed run %+v: the dead process's leftover signal must not complete it", out2)
	}
}

// appendRun appends hand-built actions to a run, as a dead process would
// have left them.
func appendRun(t *testing.T, fx *fixture, runID string, acts ...*ledger.Action) {
	t.Helper()
	parent := runTypes(t, fx, runID, ledger.RunStarted)[0]
	for _, a := range acts {
		a.ActionID, a.RunID, a.IntentID = NewID(), runID, parent.IntentID
		if a.ParentActionID == "" {
			a.ParentActionID = parent.ActionID
		}
		if _, err := fx.store.Append(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	markInterrupted(t, fx, runID)
}

// Resume counts what the chain says was spent: a completed iteration's
// plan cost once (its PlanGenerated sums its consultations), and the
// consultations of an iteration the crash interrupted before its plan was
// recorded.
func TestResumeCountsTheInterruptedIterationsConsultations(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
name = "limit"
kind = "max_iterations"
max = 1
`, nil)
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 1 {
		t.Fatalf("first run: %+v %v", out, err)
	}
	consult := func(cost float64, p, c int64) *ledger.Action {
		return &ledger.Action{Type: ledger.LlmConsultation, FunctionName: "m", Success: true, Cost: cost,
			Metadata: map[string]rtfs.Value{"prompt_tokens": rtfs.Int(p), "completion_tokens": rtfs.Int(c)}}
	}
	it := func(n int64) map[string]rtfs.Value { return map[string]rtfs.Value{"iteration": rtfs.Int(n)} }
	appendRun(t, fx, out.RunID,
		// iteration 2 completed: two consultations, summed in its PlanGenerated
		&ledger.Action{Type: ledger.IterationStarted, Success: true, Metadata: it(2)},
		consult(0.1, 60, 20), consult(0.15, 50, 20),
		&ledger.Action{Type: ledger.PlanGenerated, FunctionName: "openai", Success: true, Cost: 0.25,
			Arguments: []rtfs.Value{rtfs.String("1")},
			Metadata:  map[string]rtfs.Value{"prompt_tokens": rtfs.Int(110), "completion_tokens": rtfs.Int(40)}},
		&ledger.Action{Type: ledger.IterationCompleted, Success: true, Cost: 0.25, Metadata: it(2),
			Result: rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("tokens"), rtfs.Int(150)))},
		// iteration 3 died while the model was being asked again
		&ledger.Action{Type: ledger.IterationStarted, Success: true, Metadata: it(3)},
		consult(0.5, 8, 2),
	)
	cfg := *r.o.Config
	cfg.Stop = []config.Stop{{Name: "three", Kind: "max_iterations", Max: 3}}
	conds, _ := stop.FromConfig(cfg.Stop, cfg.File)
	out2, err := resumer(t, r, fx, out.RunID, func(o *RunnerOptions) { o.Config, o.Conditions = &cfg, conds }).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Builtins are free, so the spend is 0.25 + 0.5 and 150 + 10 tokens.
	if out2.Iterations != 3 || math.Abs(out2.CostUSD-0.75) > 1e-9 || out2.Tokens != 160 {
		t.Fatalf("resumed run: %d iterations, $%v, %d tokens; want 3, $0.75 (0.25 + the interrupted 0.5), 160 tokens",
			out2.Iterations, out2.CostUSD, out2.Tokens)
	}
}

// tokenModel answers every question with fixed usage.
type tokenModel struct{}

func (tokenModel) Name() string { return "test/tokens" }
func (tokenModel) Complete(context.Context, arbiter.Completion, arbiter.Observer) (arbiter.Reply, error) {
	return arbiter.Reply{Text: "ok", Model: "tokens", Usage: arbiter.Usage{PromptTokens: 100, CompletionTokens: 50, CostUSD: 0.001}}, nil
}

// Tokens a plan spends through llm.ask count toward max_tokens like the
// plan generation's, so the budget stops the run before it overshoots.
func TestRunnerCountsLLMAskTokens(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Ask" (call :llm.ask {:prompt "hi"}))'
[[stop]]
name = "budget"
kind = "max_tokens"
tokens = 400
[[stop]]
kind = "max_iterations"
max = 10
`, nil)
	if err := arbiter.RegisterLLMAsk(fx.orch.o.Registry, tokenModel{}); err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Iterations != 2 || out.Tokens != 300 || out.TriggeredBy != "budget" {
		t.Fatalf("outcome: %d iterations, %d tokens, stopped by %q; want 2 iterations of 150 tokens, stopped by the budget before a third",
			out.Iterations, out.Tokens, out.TriggeredBy)
	}
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if n := iters[0].Result.AsMap().GetKey("tokens").AsInt(); n != 150 {
		t.Errorf("iteration 1 summary: %d tokens, want 150", n)
	}
	// A resumed run sums them from the chain too.
	markInterrupted(t, fx, out.RunID)
	out2, err := resumer(t, r, fx, out.RunID, nil).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out2.Iterations != 2 || out2.Tokens != 300 {
		t.Errorf("resumed: %d iterations, %d tokens; want 2 and 300 (no new iteration fits)", out2.Iterations, out2.Tokens)
	}
}

// A skip that arrives once the plan has completed (its last call returned)
// cannot undo it: the iteration is recorded as ok, not skipped with no
// compensation run.
func TestSkipAfterThePlanCompletedKeepsItOK(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Last" (call :test.skip-late {}))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	err := fx.orch.o.Registry.Register(&capability.Capability{
		Spec: &capability.Spec{ID: "test.skip-late", Version: "1", Input: rtfs.MustParseType(":any"), Risk: capability.RiskLow},
		Handler: func(ctx context.Context, in rtfs.Value) (capability.Result, error) {
			r.SkipIteration()
			return capability.Result{Value: rtfs.True}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	plans := runTypes(t, fx, out.RunID, ledger.PlanCompleted)
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if len(plans) != 1 {
		t.Fatalf("%d PlanCompleted, want 1: the skip came after the plan's last call", len(plans))
	}
	if iters[0].Metadata["status"].Str() != "ok" {
		t.Errorf("the plan completed but the iteration is recorded %v", iters[0].Metadata["status"])
	}
}

// The stop checks run under max_duration too: a slow command check is cut
// off at the deadline instead of carrying the run past it.
func TestMaxDurationCutsSlowStopChecks(t *testing.T) {
	t.Parallel()
	testenv.File(t, "/bin/sleep")
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
name = "slow-check"
kind = "command"
cmd = ["/bin/sleep", "10"]
[[stop]]
name = "budget"
kind = "max_duration"
duration = "1500ms"
`, nil) // room for the iteration itself on a loaded machine: the deadline must fall in the check
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "budget" || out.ExitCode != ExitLimit {
		t.Fatalf("outcome %+v", out)
	}
	evs := runTypes(t, fx, out.RunID, ledger.StopConditionsEvaluated)
	if len(evs) != 1 {
		t.Fatalf("%d evaluations", len(evs))
	}
	ev, err := stop.EvaluationFromAction(&evs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range ev.Results {
		if res.Name == "slow-check" && !strings.Contains(res.Reason, "not evaluated to the end") {
			t.Errorf("the slow check ran to the end past the deadline: %+v", res)
		}
	}
}

// The feedback the next plan request carries has the run's secrets
// replaced: it goes into a prompt, to a server or an agent CLI.
func TestFeedbackIsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "sk-feedback-secret-123"
	r, _ := newRunner(t, `
[plan]
rtfs = '(step "Leak" (call :test.fail {}))'
[[stop]]
kind = "max_iterations"
max = 2
`, nil)
	r.o.Orchestrator.o.Secrets = []string{secret}
	var seen []arbiter.Feedback
	r.o.Provider = providerFunc(func(_ context.Context, req arbiter.PlanRequest) (arbiter.PlanResponse, error) {
		seen = append(seen, req.Feedback)
		return arbiter.PlanResponse{Source: `(step "Leak" (call :test.fail {:key "` + secret + `"}))`, Provider: "test"}, nil
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("%d plan requests", len(seen))
	}
	fb := seen[1]
	if strings.Contains(fb.LastPlan+strings.Join(fb.Failures, " "), secret) || !strings.Contains(fb.LastPlan, "[REDACTED]") {
		t.Errorf("feedback carries the secret: %+v", fb)
	}
}

type providerFunc func(context.Context, arbiter.PlanRequest) (arbiter.PlanResponse, error)

func (f providerFunc) Plan(ctx context.Context, req arbiter.PlanRequest) (arbiter.PlanResponse, error) {
	return f(ctx, req)
}

// A crash after IterationCompleted but before the stop conditions were
// evaluated: the resumed run evaluates that iteration first, so the stop
// it earned is not missed by running another iteration.
func TestResumeEvaluatesAnIterationTheCrashLeftUnevaluated(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "not yet"}))'
[[stop]]
name = "promise"
kind = "output_pattern"
pattern = "<promise>DONE</promise>"
[[stop]]
name = "five"
kind = "max_iterations"
max = 5
`, nil)
	ctx := context.Background()
	run := NewID()
	add := func(a *ledger.Action) string {
		a.ActionID, a.RunID, a.IntentID = NewID(), run, run
		if _, err := fx.store.Append(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a.ActionID
	}
	// What the dead process wrote: iteration 1 completed with the promise
	// in its output, and nothing after it.
	started := add(&ledger.Action{Type: ledger.RunStarted, FunctionName: "goal", Success: true,
		Metadata: map[string]rtfs.Value{"config": rtfs.String("")}})
	iter := add(&ledger.Action{Type: ledger.IterationStarted, ParentActionID: started, FunctionName: "iteration 1", Success: true,
		Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(1)}})
	add(&ledger.Action{Type: ledger.CapabilityCall, ParentActionID: iter, FunctionName: "ccos.echo", Success: true,
		Result: rtfs.String("all green <promise>DONE</promise>")})
	add(&ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iter, FunctionName: "iteration 1", Success: true,
		Result:   rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("status"), rtfs.Keyword("ok"))),
		Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(1), "status": rtfs.String("ok")}})
	if err := fx.store.KV().Put(ctx, RunKVPrefix+run, rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("state"), rtfs.Keyword(StateRunning)))); err != nil {
		t.Fatal(err)
	}
	out, err := resumer(t, r, fx, run, nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "promise" || out.ExitCode != ExitSuccess || out.Iterations != 1 {
		t.Fatalf("resumed run %+v: iteration 1 earned the promise stop", out)
	}
	if n := len(runTypes(t, fx, run, ledger.IterationStarted)); n != 1 {
		t.Errorf("%d iterations started, want only the dead process's one", n)
	}
}

// markInterrupted records runID as still running, as if its process had
// died without closing it.
func markInterrupted(t *testing.T, fx *fixture, runID string) {
	t.Helper()
	key := RunKVPrefix + runID
	rec, _, _ := fx.store.KV().Get(context.Background(), key)
	if err := fx.store.KV().Put(context.Background(), key, rtfs.MapValue(rec.AsMap().Assoc(rtfs.Keyword("state"), rtfs.Keyword(StateRunning)))); err != nil {
		t.Fatal(err)
	}
}

func TestHandBackRecordsNoClosingAction(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
kind = "max_iterations"
max = 4
`, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		for a := range fx.store.Subscribe(ctx, 1) {
			if a.Type == ledger.IterationCompleted && a.Metadata["iteration"].AsInt() == 2 {
				cancel(&Cancelled{By: CancelHandBack})
				return
			}
		}
	}()
	out, err := r.Run(ctx)
	if !errors.Is(err, ErrHandedBack) || out != nil {
		t.Fatalf("Run = %+v, %v; want ErrHandedBack", out, err)
	}
	for _, typ := range []ledger.ActionType{ledger.RunAborted, ledger.RunStopped, ledger.RunFailed, ledger.RunCompleted} {
		if n := len(runTypes(t, fx, r.RunID(), typ)); n != 0 {
			t.Fatalf("%d %s after a hand-back", n, typ)
		}
	}
	out, err = resumer(t, r, fx, r.RunID(), nil).Run(context.Background())
	if err != nil || out.Iterations != 4 || out.State != StateStopped {
		t.Fatalf("resumed: %+v, %v", out, err)
	}
	if n := len(runTypes(t, fx, r.RunID(), ledger.IterationCompleted)); n != 4 {
		t.Errorf("%d IterationCompleted, want 4", n)
	}
}
