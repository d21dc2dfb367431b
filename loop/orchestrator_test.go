package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

type fixture struct {
	store *ledger.Store
	kv    builtin.KV
	orch  *Orchestrator
	calls map[string]int
	mu    sync.Mutex
	// hold, when set, is where test.wait blocks until it is closed (or its
	// context ends); waiting is closed each time a test.wait call starts.
	hold    chan struct{}
	waiting chan struct{}
}

func (fx *fixture) count(id string) int {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	return fx.calls[id]
}

// testCap registers a capability taking any input whose handler is fn.
func (fx *fixture) testCap(reg *capability.Registry, id string, effects []capability.Effect, fn func(ctx context.Context, in rtfs.Value) (rtfs.Value, error)) {
	err := reg.Register(&capability.Capability{
		Spec: &capability.Spec{ID: id, Version: "1", Input: rtfs.MustParseType(":any"), Effects: effects, Risk: capability.RiskMedium},
		Handler: func(ctx context.Context, in rtfs.Value) (capability.Result, error) {
			fx.mu.Lock()
			fx.calls[id]++
			fx.mu.Unlock()
			v, err := fn(ctx, in)
			return capability.Result{Value: v, Cost: 0.01}, err
		},
	})
	if err != nil {
		panic(err)
	}
}

func newFixture(t testing.TB, c governance.Constitution, store *ledger.Store, kv builtin.KV) *fixture {
	t.Helper()
	if store == nil {
		var err error
		if store, err = ledger.Open(ledger.Options{InMemory: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
	}
	if kv == nil {
		kv = store.KV()
	}
	fx := &fixture{store: store, kv: kv, calls: map[string]int{}}
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Workdir: t.TempDir(), ShellAllow: c.ShellAllow, KV: kv}); err != nil {
		t.Fatal(err)
	}
	net := []capability.Effect{{Kind: "network"}}
	bal := func(ctx context.Context, acct string) int64 {
		v, _, _ := kv.Get(ctx, "bank/"+acct)
		return v.AsInt()
	}
	move := func(sign int64) func(ctx context.Context, in rtfs.Value) (rtfs.Value, error) {
		return func(ctx context.Context, in rtfs.Value) (rtfs.Value, error) {
			m := in.AsMap()
			acct := m.GetKey("account").Str()
			nb := bal(ctx, acct) + sign*m.GetKey("amount").AsInt()
			if nb < 0 {
				return rtfs.Nil, fmt.Errorf("insufficient funds in %s", acct)
			}
			_ = kv.Put(ctx, "bank/"+acct, rtfs.Int(nb))
			return rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("balances"), rtfs.MapValue(rtfs.NewMap(rtfs.String(acct), rtfs.Int(nb))))), nil
		}
	}
	fx.testCap(reg, "bank.debit", net, move(-1))
	fx.testCap(reg, "bank.credit", net, move(+1))
	fx.testCap(reg, "user.create", net, func(ctx context.Context, in rtfs.Value) (rtfs.Value, error) {
		email := in.AsMap().GetKey("email")
		_ = kv.Put(ctx, "user/"+email.Str(), in)
		return rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("user-id"), email)), nil
	})
	fx.testCap(reg, "llm.analyze", nil, func(context.Context, rtfs.Value) (rtfs.Value, error) {
		return rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("risk-budget"), rtfs.Int(-1))), nil
	})
	fx.testCap(reg, "notify.slack", net, func(context.Context, rtfs.Value) (rtfs.Value, error) { return rtfs.True, nil })
	fx.testCap(reg, "test.fail", nil, func(context.Context, rtfs.Value) (rtfs.Value, error) { return rtfs.Nil, errors.New("boom") })
	fx.testCap(reg, "test.ok", nil, func(_ context.Context, in rtfs.Value) (rtfs.Value, error) { return in, nil })
	fx.testCap(reg, "test.wait", nil, func(ctx context.Context, in rtfs.Value) (rtfs.Value, error) {
		fx.mu.Lock()
		hold, waiting := fx.hold, fx.waiting
		fx.mu.Unlock()
		if waiting != nil {
			waiting <- struct{}{}
		}
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return rtfs.Nil, ctx.Err()
			}
		}
		return in, nil
	})
	fx.testCap(reg, "test.undo", nil, func(_ context.Context, in rtfs.Value) (rtfs.Value, error) { return in, nil })
	// test.limited stands for an agent: its first call does one tool use and
	// stops at an account limit that lifts after (:reset-ms in) ms; later calls work.
	fx.testCap(reg, "test.limited", nil, func(ctx context.Context, in rtfs.Value) (rtfs.Value, error) {
		rep := capability.ReporterFrom(ctx)
		if err := rep.Child(ctx, capability.Child{Type: "AgentToolUse", Name: "Edit", Args: []rtfs.Value{rtfs.String("a.go")}, Success: true}); err != nil {
			return rtfs.Nil, err
		}
		if fx.count("test.limited") > 1 {
			return rtfs.String("done"), nil
		}
		reset := time.Now().Add(time.Duration(in.AsMap().GetKey("reset-ms").AsInt()) * time.Millisecond)
		kind := "usage-limit"
		if k := in.AsMap().GetKey("kind"); !k.IsNil() { // :kind "overloaded", with :reset-ms 0 for no reset
			kind = k.Str()
		}
		if in.AsMap().GetKey("reset-ms").AsInt() == 0 {
			reset = time.Time{}
		}
		rep.Limited(capability.Limit{Kind: kind, Reset: reset, Message: kind + " reached"})
		return rtfs.Nil, errors.New("stopped at the usage limit")
	})
	// test.denied stands for an agent run without the flags that let it
	// edit: its CLI refused the edit.
	fx.testCap(reg, "test.denied", nil, func(ctx context.Context, in rtfs.Value) (rtfs.Value, error) {
		capability.ReporterFrom(ctx).Denied(capability.Denial{Tool: "Edit", Target: "calc.go", Fix: "add --edit-flag to [agent] args"})
		return rtfs.Nil, errors.New("agent.run: permission denied: Edit calc.go")
	})
	orch, err := NewOrchestrator(OrchestratorOptions{Registry: reg, Governance: governance.New(c, reg, nil), Ledger: store, KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	fx.orch = orch
	return fx
}

func (fx *fixture) exec(t *testing.T, src string, ctx rtfs.Value) (*PlanResult, error) {
	t.Helper()
	return fx.orch.Execute(context.Background(), PlanInput{File: "plan.rtfs", Source: src, RunID: "run-1", IntentID: "intent-1", Ctx: ctx})
}

// trace lists "Type Function" for every action of a plan, in seq order.
func (fx *fixture) trace(t *testing.T, planID string) []string {
	t.Helper()
	acts, err := fx.store.ByPlan(planID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = a.Type.String() + " " + a.FunctionName
	}
	return out
}

func mustCtx(t testing.TB, src string) rtfs.Value {
	t.Helper()
	v, err := rtfs.ReadValue(src)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func has(trace []string, want ...string) bool {
	i := 0
	for _, e := range trace {
		if i < len(want) && e == want[i] {
			i++
		}
	}
	return i == len(want)
}

const bankCtx = `{:src "alice" :dst "bob" :amount 30 :tid "t1" :balances {"alice" 100 "bob" 5}}`

const debitPlan = `
(step.with-compensation
  (step "Debit"
    ^{:pre  (fn [ctx] (<= (:amount ctx) (get-in ctx [:balances (:src ctx)])))
      :post (fn [ctx ctx'] (= (- (get-in ctx [:balances (:src ctx)]) (:amount ctx))
                              (get-in ctx' [:balances (:src ctx)])))
      :idempotency {:key (str "debit:" (:src ctx) ":" (:tid ctx)) :scope :intent}}
    (call :bank.debit {:account (:src ctx) :amount (:amount ctx)}))
  (step "CreditReversal"
    ^{:idempotency {:key (str "reversal:" (:src ctx) ":" (:tid ctx)) :scope :intent}}
    (call :bank.credit {:account (:src ctx) :amount (:amount ctx)})))`

func TestSeedExampleA_ContractsAndCompensation(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	_ = fx.kv.Put(context.Background(), "bank/alice", rtfs.Int(100))
	res, err := fx.exec(t, debitPlan+"\n(step \"Fail\" (call :test.fail {}))", mustCtx(t, bankCtx))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "boom") {
		t.Fatalf("plan error %v, want boom", res.Err)
	}
	tr := fx.trace(t, res.PlanID)
	want := []string{
		"GovernanceDecision admission", "PlanStarted plan.rtfs",
		"PlanStepStarted Debit", "ContractCheck pre", "CapabilityCall bank.debit", "ContractCheck post", "PlanStepCompleted Debit",
		"PlanStepStarted Fail", "CapabilityCall test.fail", "PlanStepFailed Fail",
		"CompensationStarted CreditReversal", "PlanStepStarted CreditReversal", "CapabilityCall bank.credit",
		"PlanStepCompleted CreditReversal", "CompensationCompleted CreditReversal", "PlanAborted plan.rtfs",
	}
	if strings.Join(tr, "\n") != strings.Join(want, "\n") {
		t.Errorf("trace:\n%s\nwant:\n%s", strings.Join(tr, "\n"), strings.Join(want, "\n"))
	}
	if v, _, _ := fx.kv.Get(context.Background(), "bank/alice"); v.AsInt() != 100 {
		t.Errorf("alice's balance %d after compensation, want 100", v.AsInt())
	}
	// The compensation is linked to the primary step's action.
	acts, _ := fx.store.ByPlan(res.PlanID)
	var debitStarted string
	for _, a := range acts {
		if a.Type == ledger.PlanStepStarted && a.FunctionName == "Debit" {
			debitStarted = a.ActionID
		}
		if a.Type == ledger.CompensationStarted && a.ParentActionID != debitStarted {
			t.Errorf("CompensationStarted parent %s, want the Debit step %s", a.ParentActionID, debitStarted)
		}
		if a.Type == ledger.CapabilityCall && a.FunctionName == "bank.debit" {
			for _, k := range []string{ledger.MetaConstitutionalRuleID, ledger.MetaCapabilityAttestationID, ledger.MetaDelegationDecisionID} {
				if a.Metadata[k].Str() == "" {
					t.Errorf("CapabilityCall metadata lacks %s", k)
				}
			}
		}
	}
}

func TestSeedExampleB_PlanInvariant(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, err := fx.exec(t, `
(plan
  ^{:invariant (fn [s s'] (>= (:risk-budget s') 0)) :resources {:max_cost_usd 25.0}}
  :program
  (do
    (step "Analyze" (call :llm.analyze {:docs (:docs ctx)}))
    (step "Notify" (call :notify.slack {:channel "#ops" :msg "done"}))))`, mustCtx(t, `{:docs ["a"] :risk-budget 10}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "invariant failed") {
		t.Fatalf("want an invariant failure (llm.analyze spends the budget), got %v", res.Err)
	}
	var e *rtfs.Error
	if !errors.As(res.Err, &e) || e.Type != "contract/invariant-failed" {
		t.Errorf("error type %v", res.Err)
	}
	if !has(fx.trace(t, res.PlanID), "PlanStepCompleted Notify", "ContractCheck invariant", "ContractViolation invariant", "PlanAborted plan.rtfs") {
		t.Errorf("trace %v", fx.trace(t, res.PlanID))
	}
}

func TestSeedExampleC_FunctionContracts(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	src := `
(defn normalize-email
  ^{:pre  (fn [s] (and (string? s) (<= (count s) 254)))
    :post (fn [s s'] (re-matches #".+@.+\..+" s'))}
  [s] (lower-case (trim s)))
(step "CreateUser"
  (call :user.create {:email (normalize-email (:email ctx))}))`
	res, err := fx.exec(t, src, mustCtx(t, `{:email "  Ana@Example.COM "}`))
	if err != nil || res.Err != nil {
		t.Fatalf("%v %v", err, res.Err)
	}
	if v, ok, _ := fx.kv.Get(context.Background(), "user/ana@example.com"); !ok {
		t.Errorf("user not stored: %s", rtfs.Print(v))
	}
	res, err = fx.exec(t, src, mustCtx(t, `{:email "not-an-email"}`))
	if err != nil {
		t.Fatal(err)
	}
	var e *rtfs.Error
	if !errors.As(res.Err, &e) || e.Type != "contract/postcondition-failed" {
		t.Fatalf("want a postcondition failure, got %v", res.Err)
	}
	if fx.count("user.create") != 1 {
		t.Errorf("user.create ran %d times", fx.count("user.create"))
	}
	if !has(fx.trace(t, res.PlanID), "PlanStepStarted CreateUser", "PlanStepFailed CreateUser") {
		t.Errorf("the failing step was not closed: %v", fx.trace(t, res.PlanID))
	}
}

func TestPreconditionSkipsStep(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, err := fx.exec(t, `(step "Guarded" ^{:pre (fn [c] (pos? (:n c)))} (call :test.ok {:x 1}))`, mustCtx(t, `{:n 0}`))
	if err != nil {
		t.Fatal(err)
	}
	var e *rtfs.Error
	if !errors.As(res.Err, &e) || e.Type != "contract/precondition-failed" || !strings.HasPrefix(res.Err.Error(), "plan.rtfs:1:1:") {
		t.Fatalf("got %v", res.Err)
	}
	if fx.count("test.ok") != 0 {
		t.Error("the step body ran despite its failed precondition")
	}
	want := []string{"PlanStepStarted Guarded", "ContractCheck pre", "ContractViolation pre", "PlanStepFailed Guarded"}
	if !has(fx.trace(t, res.PlanID), want...) {
		t.Errorf("trace %v", fx.trace(t, res.PlanID))
	}
}

func TestPostconditionTriggersCompensation(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, _ := fx.exec(t, `
(step.with-compensation
  (step "Do" ^{:post (fn [c c'] (= (:result c') :never))} (call :test.ok {:v 1}))
  (step "Undo" (call :test.undo {:v 1})))`, rtfs.Nil)
	if res.Err == nil || fx.count("test.undo") != 1 {
		t.Fatalf("err %v, undo ran %d times", res.Err, fx.count("test.undo"))
	}
	if !has(fx.trace(t, res.PlanID), "ContractViolation post", "PlanStepFailed Do", "CompensationStarted Undo", "CompensationCompleted Undo") {
		t.Errorf("trace %v", fx.trace(t, res.PlanID))
	}
}

func TestSagaCompensatesLIFO(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, _ := fx.exec(t, `
(do
  (step.with-compensation (step "S1" (call :test.ok 1)) (step "U1" (call :test.undo 1)))
  (step.with-compensation (step "S2" (call :test.ok 2)) (step "U2" (call :test.undo 2)))
  (step.with-compensation (step "S3" (call :test.fail 3)) (step "U3" (call :test.undo 3))))`, rtfs.Nil)
	if res.Err == nil {
		t.Fatal("saga did not fail")
	}
	var order []string
	for _, e := range fx.trace(t, res.PlanID) {
		if strings.HasPrefix(e, "CompensationStarted") {
			order = append(order, strings.TrimPrefix(e, "CompensationStarted "))
		}
	}
	if strings.Join(order, ",") != "U2,U1" {
		t.Errorf("compensations ran %v, want U2,U1 (S3 failed before completing)", order)
	}
}

func TestParallelFailureCompensatesCompletedBranches(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	// B fails only once A has completed, so there is something to undo
	// (a failure first would cancel A before it ran: nothing to compensate).
	fx.hold = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for a := range fx.store.Subscribe(ctx, 1) {
			if a.Type == ledger.PlanStepCompleted && a.FunctionName == "A" {
				close(fx.hold)
				return
			}
		}
	}()
	res, _ := fx.exec(t, `
(step-parallel
  (step.with-compensation (step "A" (call :test.ok :a)) (step "UndoA" (call :test.undo :a)))
  (step "B" (do (call :test.wait {}) (call :test.fail :b))))`, rtfs.Nil)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "boom") {
		t.Fatalf("got %v", res.Err)
	}
	tr := fx.trace(t, res.PlanID)
	n := 0
	for _, e := range tr {
		if e == "CompensationCompleted UndoA" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("UndoA completed %d times, want once: %v", n, tr)
	}
}

func TestRuntimeErrorClosesStep(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, _ := fx.exec(t, `(step "Div" (/ 1 (count [])))`, rtfs.Nil)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "plan.rtfs:1:13: division by zero") {
		t.Fatalf("got %v", res.Err)
	}
	if !has(fx.trace(t, res.PlanID), "PlanStepStarted Div", "PlanStepFailed Div", "PlanAborted plan.rtfs") {
		t.Errorf("trace %v", fx.trace(t, res.PlanID))
	}
}

func TestContractRunsOutOfFuel(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, _ := fx.exec(t, `(step "Spin" ^{:pre (fn [c] (count (range 100000000)))} (call :test.ok 1))`, rtfs.Nil)
	var e *rtfs.Error
	if !errors.As(res.Err, &e) || e.Type != "contract/precondition-failed" || !strings.Contains(res.Err.Error(), "out of fuel") {
		t.Fatalf("got %v", res.Err)
	}
	if fx.count("test.ok") != 0 {
		t.Error("body ran")
	}
}

func TestImpureContractRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, err := fx.exec(t, "(step \"S\"\n  ^{:pre (fn [c] (call :test.ok 1))} 1)", rtfs.Nil)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "plan.rtfs:2:18: call is not allowed in contracts") {
		t.Fatalf("got %v", err)
	}
	if tr := fx.trace(t, res.PlanID); len(tr) != 1 || tr[0] != "GovernanceDecision admission" {
		t.Errorf("trace %v", tr)
	}
}

func TestShellRefusalRecorded(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{ShellAllow: []string{"echo"}}, nil, nil)
	// A literal command is refused at admission.
	_, err := fx.exec(t, `(step "Rm" (call :shell.exec {:cmd "rm" :args ["-rf" "x"]}))`, rtfs.Nil)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `command "rm" is not in [governance].shell_allow`) {
		t.Fatalf("literal: %v", err)
	}
	// A computed one is refused when the call runs, and the refusal is recorded.
	res, err := fx.exec(t, `(step "Rm" (call :shell.exec {:cmd (:tool ctx)}))`, mustCtx(t, `{:tool "rm"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !errors.Is(res.Err, governance.ErrRefused) {
		t.Fatalf("run-time refusal: %v", res.Err)
	}
	if !has(fx.trace(t, res.PlanID), "GovernanceDecision shell.exec", "CapabilityCall shell.exec", "PlanStepFailed Rm") {
		t.Errorf("trace %v", fx.trace(t, res.PlanID))
	}
}

func TestRetryAndTimeout(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{ShellAllow: []string{"sleep"}}, nil, nil)
	res, _ := fx.exec(t, `(step "Flaky" ^{:retry {:max 2 :backoff-ms 1}} (call :test.fail 1))`, rtfs.Nil)
	if res.Err == nil || fx.count("test.fail") != 3 {
		t.Fatalf("err %v, %d attempts", res.Err, fx.count("test.fail"))
	}
	n := 0
	for _, e := range fx.trace(t, res.PlanID) {
		if e == "PlanStepRetrying Flaky" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d PlanStepRetrying, want 2", n)
	}
	res, _ = fx.exec(t, `(step "Slow" ^{:timeout-ms 100} (call :shell.exec {:cmd "sleep" :args ["30"]}))`, rtfs.Nil)
	if res.Err == nil || !strings.Contains(res.Err.Error(), `step "Slow" timed out after 100ms`) {
		t.Fatalf("timeout: %v", res.Err)
	}
}

func TestIdempotentStepRunsOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `(step "Charge" ^{:idempotency {:key "charge-1" :scope :intent}} (call :test.ok {:charged true}))`
	for i := range 2 { // the second pass is a new process: new store handle, new orchestrator
		store, err := ledger.Open(ledger.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		fx := newFixture(t, governance.Constitution{}, store, store.KV())
		res, err := fx.exec(t, src, rtfs.Nil)
		if err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
		if got := rtfs.Print(res.Value); got != "{:charged true}" {
			t.Errorf("pass %d value %s", i, got)
		}
		if want := 1 - i; fx.count("test.ok") != want {
			t.Errorf("pass %d ran the capability %d times, want %d", i, fx.count("test.ok"), want)
		}
		if i == 1 && !has(fx.trace(t, res.PlanID), "CapabilityDeduplicated Charge") {
			t.Errorf("no CapabilityDeduplicated: %v", fx.trace(t, res.PlanID))
		}
		store.Close()
	}
}

func TestFailedCompensationIsReported(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, _ := fx.exec(t, `
(do
  (step.with-compensation (step "Do" (call :test.ok 1)) (step "Undo" (call :test.fail 1)))
  (step "Later" (call :test.fail 2)))`, rtfs.Nil)
	if res.Err == nil || strings.Join(res.FailedCompensations, ",") != "Undo" {
		t.Fatalf("err %v, failed compensations %v", res.Err, res.FailedCompensations)
	}
	acts, _ := fx.store.ByPlan(res.PlanID)
	last := acts[len(acts)-1]
	if last.Type != ledger.PlanAborted || rtfs.Print(last.Metadata["failed_compensations"]) != `["Undo"]` {
		t.Errorf("last action %s %v", last.Type, last.Metadata)
	}
	if !has(fx.trace(t, res.PlanID), "CompensationStarted Undo", "CompensationFailed Undo") {
		t.Errorf("trace %v", fx.trace(t, res.PlanID))
	}
}

func TestAbortRunsCompensations(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{ShellAllow: []string{"sleep"}}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		// Abort once the long step is running (its PlanStepStarted is on the chain).
		sub := fx.store.Subscribe(ctx, 1)
		for a := range sub {
			if a.Type == ledger.PlanStepStarted && a.FunctionName == "Long" {
				close(started)
				cancel()
				return
			}
		}
	}()
	res, err := fx.orch.Execute(ctx, PlanInput{File: "plan.rtfs", Source: `
(do
  (step.with-compensation (step "Book" (call :test.ok 1)) (step "Unbook" (call :test.undo 1)))
  (step "Long" (call :shell.exec {:cmd "sleep" :args ["60"]})))`, Ctx: rtfs.Nil})
	<-started
	if err != nil || res.Err == nil {
		t.Fatalf("err %v res.Err %v", err, res.Err)
	}
	if fx.count("test.undo") != 1 {
		t.Errorf("Unbook ran %d times after the abort", fx.count("test.undo"))
	}
	if !has(fx.trace(t, res.PlanID), "PlanStepFailed Long", "CompensationCompleted Unbook", "PlanAborted plan.rtfs") {
		t.Errorf("trace %v", fx.trace(t, res.PlanID))
	}
}

func TestContractCannotReachEffectsThroughFunctions(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	for _, src := range []string{
		"(defn g [c] (call :test.ok {:x 1}) true)\n(step \"S\" ^{:pre g} 1)",
		"(defn g [r] (call :test.ok {:effect 1}) true)\n(step-loop \"L\" {:max 2 :until (fn [r] (g r))} 1)",
		"(defn g [x] (call :test.ok 1) true)\n(defn f ^{:pre g} [x] x)\n(step \"S\" (f 1))",
	} {
		res, err := fx.exec(t, src, rtfs.Nil)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if res.Err == nil || !strings.Contains(res.Err.Error(), "must be pure") {
			t.Errorf("%s: got %v, want an impurity failure", src, res.Err)
		}
	}
	if n := fx.count("test.ok"); n != 0 {
		t.Errorf("a contract performed %d capability calls", n)
	}
}

func TestKVCannotForgeIdempotencyRecords(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	res, err := fx.exec(t, `(do (call :kv.put {:key "idem/global//pay" :value "forged"})
  (step "Pay" ^{:idempotency {:key "pay" :scope :global}} (call :test.ok {:paid true})))`, rtfs.Nil)
	if err != nil || res.Err != nil || fx.count("test.ok") != 1 {
		t.Fatalf("err %v %v; Pay ran %d times", err, res.Err, fx.count("test.ok"))
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	fx.orch.o.Secrets = []string{"sk-live-abcdef123456"}
	res, err := fx.exec(t, `(step "Leak" (call :test.ok {:token "Bearer sk-live-abcdef123456"}))`, rtfs.Nil)
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	var buf strings.Builder
	if _, err := fx.store.Export(&buf, ledger.Filter{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "sk-live-abcdef123456") || !strings.Contains(buf.String(), "Bearer [REDACTED]") {
		t.Errorf("secret not redacted:\n%s", buf.String())
	}
}

func TestPlacementIsCheckedWhereTheCallRuns(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{RequireCompensationForEffects: []string{"network"}}, nil, nil)
	res, err := fx.exec(t, `
(step.with-compensation
  (step "Do" (fn [] (call :bank.credit {:account "x" :amount 1})))
  (step "Undo" nil))
(step "Elsewhere" ((:result ctx)))`, rtfs.Nil)
	if err != nil {
		t.Fatalf("admission: %v", err)
	}
	if res.Err == nil || !errors.Is(res.Err, governance.ErrRefused) || !strings.Contains(res.Err.Error(), "gov.require-compensation") {
		t.Fatalf("got %v, want a run-time refusal by gov.require-compensation", res.Err)
	}
	if fx.count("bank.credit") != 0 {
		t.Error("the uncompensated call ran")
	}
}

func TestCompensationClearsIdempotencyRecord(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	ctx := context.Background()
	_ = fx.kv.Put(ctx, "bank/a", rtfs.Int(100))
	res, err := fx.exec(t, `
(step "Outer" ^{:retry {:max 1 :backoff-ms 1}}
  (step.with-compensation
    (step "Debit" ^{:idempotency {:key "debit-1"}} (call :bank.debit {:account "a" :amount 10}))
    (step "Refund" (call :bank.credit {:account "a" :amount 10})))
  (if (call :kv.get {:key "failed-once"})
    :ok
    (do (call :kv.put {:key "failed-once" :value true}) (call :test.fail 1))))`, rtfs.Nil)
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if v, _, _ := fx.kv.Get(ctx, "bank/a"); v.AsInt() != 90 {
		t.Errorf("balance %d, want 90: the retry must debit again after the refund", v.AsInt())
	}
	if fx.count("bank.debit") != 2 || fx.count("bank.credit") != 1 {
		t.Errorf("debits %d credits %d", fx.count("bank.debit"), fx.count("bank.credit"))
	}
}

// A secret is found in a string nested in a collection even when it holds
// characters the printed form escapes.
func TestRedactFindsSecretsPrintWouldEscape(t *testing.T) {
	t.Parallel()
	const sec = `sk-"quoted\secret`
	plain := rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("k"), rtfs.String("nothing here")))
	a := &ledger.Action{Arguments: []rtfs.Value{rtfs.Vector([]rtfs.Value{rtfs.String("x" + sec)}), plain},
		Result: rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("auth"), rtfs.List([]rtfs.Value{rtfs.String(sec + "y")})))}
	Redact(a, []string{sec})
	for _, v := range append(a.Arguments, a.Result) {
		if p := rtfs.Print(v); strings.Contains(p, "quoted") {
			t.Errorf("secret left in %s", p)
		}
	}
	if got := rtfs.Print(a.Arguments[0]); got != `["x[REDACTED]"]` {
		t.Errorf("arguments %s", got)
	}
	if got := rtfs.Print(a.Result); got != `{:auth ("[REDACTED]y")}` {
		t.Errorf("result %s", got)
	}
	if !rtfs.Equal(a.Arguments[1], plain) {
		t.Errorf("a value without the secret changed: %s", rtfs.Print(a.Arguments[1]))
	}
}

// A secret in a name (a step a model named after text it saw) is redacted
// like one in a value.
func TestSecretsAreRedactedFromNames(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	fx.orch.o.Secrets = []string{"sk-live-abcdef123456"}
	res, err := fx.exec(t, `(step "use sk-live-abcdef123456" (call :test.ok 1))`, rtfs.Nil)
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	var buf strings.Builder
	if _, err := fx.store.Export(&buf, ledger.Filter{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "sk-live-abcdef123456") {
		t.Errorf("secret recorded:\n%s", buf.String())
	}
}

// A signal's abort gives the plan's compensations SignalGrace in all: one
// that outlasts it is cut off and recorded as cut off.
func TestSignalCutsCompensationsOff(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{ShellAllow: []string{"sleep"}}, nil, nil)
	fx.orch.o.SignalGrace = 50 * time.Millisecond
	fx.hold = make(chan struct{}) // test.wait waits for its context
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		for a := range fx.store.Subscribe(ctx, 1) {
			if a.Type == ledger.PlanStepStarted && a.FunctionName == "Long" {
				cancel(errors.New("terminated signal received"))
				return
			}
		}
	}()
	res, err := fx.orch.Execute(ctx, PlanInput{File: "plan.rtfs", Source: `
(do
  (step.with-compensation (step "Book" (call :test.ok 1)) (step "Unbook" (call :test.wait 1)))
  (step "Long" (call :shell.exec {:cmd "sleep" :args ["60"]})))`, Ctx: rtfs.Nil})
	if err != nil || res.Err == nil {
		t.Fatalf("err %v res.Err %v", err, res.Err)
	}
	acts, err := fx.store.ByPlan(res.PlanID)
	if err != nil {
		t.Fatal(err)
	}
	var failed *ledger.Action
	for i := range acts {
		if acts[i].Type == ledger.CompensationFailed {
			failed = &acts[i]
		}
	}
	if failed == nil || failed.Metadata[MetaCutOff] != rtfs.True || !strings.Contains(failed.ErrorMessage, "cut off") {
		t.Fatalf("no cut-off compensation in %v (%+v)", fx.trace(t, res.PlanID), failed)
	}
	if !slices.Equal(res.FailedCompensations, []string{"Unbook"}) {
		t.Errorf("failed compensations %v", res.FailedCompensations)
	}
}
