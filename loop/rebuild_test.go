package loop

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// failover moves runID's chain from the store of r into a new store, as a
// fleet worker taking over the run does: export the bundle, import it
// (verified against the old store's key), rebuild the kv table from the
// chain. It returns a fixture over the new store (test.wait does not block
// there) and a runner that resumes the run on it.
func failover(t *testing.T, r *Runner, from *fixture, runID string, edit func(*RunnerOptions)) (*Runner, *fixture) {
	t.Helper()
	ctx := context.Background()
	var bundle bytes.Buffer
	if _, err := from.store.ExportBundle(&bundle); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, _, err := store.ImportBundle(ctx, &bundle, []string{from.store.VerifierKeyString()}); err != nil {
		t.Fatal(err)
	}
	if err := RebuildKV(ctx, store, runID); err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, governance.Constitution{}, store, nil)
	o := RunnerOptions{Config: r.o.Config, Store: store, Orchestrator: fx.orch, Provider: r.o.Provider,
		Conditions: r.o.Conditions, Intent: r.o.Intent, RunID: runID, Resume: true}
	if edit != nil {
		edit(&o)
	}
	r2, err := NewRunner(o)
	if err != nil {
		t.Fatal(err)
	}
	return r2, fx
}

// crashAt runs r until test.wait blocks (the plan's effects so far are
// durable: a call syncs the chain before it runs), then stops it without
// recording anything more, as if its process died there.
func crashAt(t *testing.T, r *Runner, fx *fixture) {
	t.Helper()
	fx.hold, fx.waiting = make(chan struct{}), make(chan struct{}, 1)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx)
		done <- err
	}()
	select {
	case <-fx.waiting:
	case err := <-done:
		t.Fatalf("the run ended before it reached test.wait: %v", err)
	}
	t.Cleanup(func() {
		cancel(&Cancelled{By: CancelHandBack})
		if err := <-done; !errors.Is(err, ErrHandedBack) {
			t.Errorf("the crashed run ended with %v, want it handed back", err)
		}
	})
}

// A run that dies mid-iteration continues in a fresh store that has only
// its chain: the idempotent step is deduplicated, not run again, and the
// spend before the failover counts toward max_cost.
func TestRebuildKVResumesInAFreshStore(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '''
(step "Pay" ^{:idempotency {:key "pay-1" :scope :intent}} (call :kv.put {:key "paid" :value (:iteration ctx)}))
(step "Note" (call :kv.put "note" (:iteration ctx)))
(step "Work" (call :test.ok {}))
(if (= (:iteration ctx) 2) (step "Wait" (call :test.wait {})) nil)
'''
[[stop]]
name = "budget"
kind = "max_cost"
usd = 0.05
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	runID := r.RunID()
	crashAt(t, r, fx) // in iteration 2, after Pay, Note and Work
	r2, fx2 := failover(t, r, fx, runID, nil)

	kv := fx2.store.KV()
	ctx := context.Background()
	if v, _, _ := kv.Get(ctx, "user/paid"); !rtfs.Equal(v, rtfs.Int(1)) {
		t.Errorf("rebuilt user/paid = %s, want 1 (iteration 1's)", rtfs.Print(v))
	}
	if v, _, _ := kv.Get(ctx, "user/note"); !rtfs.Equal(v, rtfs.Int(2)) {
		t.Errorf("rebuilt user/note = %s, want 2 (the interrupted iteration's)", rtfs.Print(v))
	}
	if rec, _, _ := kv.Get(ctx, RunKVPrefix+runID); rec.AsMap().GetKey("state").Str() != StateRunning {
		t.Errorf("rebuilt run record %s", rtfs.Print(rec))
	}

	out, err := r2.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Spent: iteration 1's Work (0.01), the interrupted iteration's Work
	// (0.01), its rerun's Work and Wait (0.02). The mean iteration (0.015)
	// would take 0.04 past 0.05: the budget stops the run before iteration 3.
	if out.TriggeredBy != "budget" || out.Iterations != 2 || math.Abs(out.CostUSD-0.04) > 1e-9 {
		t.Fatalf("resumed run %+v", out)
	}
	var puts, dedups int
	for _, a := range runTypes(t, fx2, runID, ledger.CapabilityCall) {
		if a.FunctionName == "kv.put" && a.Arguments[0].Kind() == rtfs.KindMap {
			puts++
		}
	}
	for _, a := range runTypes(t, fx2, runID, ledger.CapabilityDeduplicated) {
		if a.FunctionName == "Pay" && a.Metadata["idempotency_key"].Str() == "pay-1" {
			dedups++
		}
	}
	if puts != 1 || dedups != 2 {
		t.Errorf("Pay ran %d times and was deduplicated %d times; want once, then deduplicated in iteration 2 and its rerun", puts, dedups)
	}
	if v, _, _ := kv.Get(ctx, "user/paid"); !rtfs.Equal(v, rtfs.Int(1)) {
		t.Errorf("user/paid = %s after the resume, want 1: Pay must not run again", rtfs.Print(v))
	}
	if n := len(runTypes(t, fx2, runID, ledger.RunStopped)); n != 1 {
		t.Errorf("%d closing actions", n)
	}
	if _, err := fx2.store.Verify(ctx, nil); err != nil {
		t.Errorf("verify the continued chain: %v", err)
	}
}

// RebuildKV writes what the run wrote: comparing the kv table of the store
// that ran a plan (an idempotent step compensated, another kept, kv.put in
// both argument forms) with the one rebuilt from its chain.
func TestRebuildKVMatchesTheStoreThatRan(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '''
(step "Keep" ^{:idempotency {:key "keep" :scope :global}} (call :kv.put {:key "kept" :value {:n 1}}))
(step.with-compensation
  (step "Reserve" ^{:idempotency {:key "reserve-1" :scope :intent}} (call :kv.put {:key "reserved" :value true}))
  (step "Release" (call :kv.put "reserved" false)))
(step "Fail" (call :test.fail {}))
'''
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 1 {
		t.Fatalf("run: %+v %v", out, err)
	}
	var cleared int
	for _, a := range runTypes(t, fx, out.RunID, ledger.CompensationCompleted) {
		if a.Metadata[MetaIdempotencyCleared].Str() != "" {
			cleared++
		}
	}
	if cleared != 1 {
		t.Fatalf("%d compensations say they cleared an idempotency record, want 1", cleared)
	}
	_, fx2 := failover(t, r, fx, out.RunID, nil)
	for _, prefix := range []string{"idem/", "user/"} {
		want, got := kvDump(t, fx.store, prefix), kvDump(t, fx2.store, prefix)
		if len(want) == 0 || !equalDumps(want, got) {
			t.Errorf("%s: rebuilt %v, want %v", prefix, got, want)
		}
	}
	want, _, _ := fx.store.KV().Get(context.Background(), RunKVPrefix+out.RunID)
	got, _, _ := fx2.store.KV().Get(context.Background(), RunKVPrefix+out.RunID)
	for _, k := range []string{"id", "state", "goal", "iterations", "cost", "tokens", "started", "class", "condition", "reason", "evidence"} {
		if w, g := want.AsMap().GetKey(k), got.AsMap().GetKey(k); !rtfs.Equal(w, g) {
			t.Errorf("run record :%s rebuilt as %s, want %s", k, rtfs.Print(g), rtfs.Print(w))
		}
	}
	if got.AsMap().GetKey("state").Str() != StateStopped {
		t.Errorf("rebuilt state %s, want stopped", got.AsMap().GetKey("state").Str())
	}
}

func kvDump(t *testing.T, s *ledger.Store, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.KV().Scan(prefix, func(k string, v rtfs.Value) bool {
		out[k] = rtfs.Print(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func equalDumps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// max_duration counts wall time since the run started (its RunStarted),
// across a failover to another store: a run started two hours ago resumes
// under a one-hour limit and starts no iteration.
func TestResumedRunsDurationCountsFromRunStarted(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '''
(step "Work" (call :test.ok {}))
(if (= (:iteration ctx) 2) (step "Wait" (call :test.wait {})) nil)
'''
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	r.o.Now = func() time.Time { return time.Now().Add(-2 * time.Hour) } // RunStarted two hours ago
	runID := r.RunID()
	crashAt(t, r, fx)
	cfg := *r.o.Config
	cfg.Stop = append(slices.Clone(cfg.Stop), config.Stop{Name: "hour", Kind: "max_duration", Duration: config.Duration{Duration: time.Hour}})
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	r2, fx2 := failover(t, r, fx, runID, func(o *RunnerOptions) { o.Config, o.Conditions = &cfg, conds })
	out, err := r2.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "hour" || out.ExitCode != ExitLimit || out.Iterations != 1 {
		t.Fatalf("resumed run %+v, want it stopped by max_duration at once", out)
	}
	if n := len(runTypes(t, fx2, runID, ledger.IterationStarted)); n != 2 {
		t.Errorf("%d iterations started, want the 2 of the first worker only", n)
	}
}

// RebuildKV refuses a run the store's chain does not hold.
func TestRebuildKVNeedsTheRunsChain(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, governance.Constitution{}, nil, nil)
	err := RebuildKV(context.Background(), fx.store, "nope")
	if err == nil || err.Error() != "run nope has no RunStarted on this store's chain; import the run's chain before rebuilding its records" {
		t.Fatalf("error %v", err)
	}
}
