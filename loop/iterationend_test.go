package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// endHook records each OnIterationEnd call and answers with a commit per
// iteration, or failAt's error.
type endHook struct {
	mu     sync.Mutex
	calls  []int
	failAt int
	live   []bool // whether the hook's context was live
	check  func(iteration int) error
}

func (h *endHook) fn(ctx context.Context, iteration int) (map[string]rtfs.Value, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, iteration)
	h.live = append(h.live, ctx.Err() == nil)
	if h.check != nil {
		if err := h.check(iteration); err != nil {
			return nil, err
		}
	}
	meta := map[string]rtfs.Value{"commit": rtfs.String(fmt.Sprintf("c%d", iteration)), "branch": rtfs.String("ralph/x"),
		"status": rtfs.String("overridden")}
	if iteration == h.failAt {
		return meta, errors.New("push rejected")
	}
	return meta, nil
}

func TestOnIterationEndPutsItsMetadataOnIterationCompleted(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
kind = "max_iterations"
max = 3
`, nil)
	h := &endHook{}
	// The iteration's plan is durable on the chain before the hook runs.
	h.check = func(iteration int) error {
		steps := runTypes(t, fx, r.RunID(), ledger.PlanStepCompleted)
		if len(steps) != iteration {
			return fmt.Errorf("%d steps on the chain at the end of iteration %d", len(steps), iteration)
		}
		return nil
	}
	r.o.OnIterationEnd = h.fn
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 3 || out.ExitCode != ExitLimit {
		t.Fatalf("outcome %+v %v", out, err)
	}
	if fmt.Sprint(h.calls) != "[1 2 3]" {
		t.Fatalf("hook called for %v, want [1 2 3]", h.calls)
	}
	for i, a := range runTypes(t, fx, out.RunID, ledger.IterationCompleted) {
		want := fmt.Sprintf("c%d", i+1)
		if a.Metadata["commit"].Str() != want || a.Metadata["branch"].Str() != "ralph/x" || a.Metadata["status"].Str() != "ok" || !a.Success {
			t.Errorf("IterationCompleted %d metadata %v success %v", i+1, a.Metadata, a.Success)
		}
	}
	acts, err := fx.store.ByRun(out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got := LastCommit(acts); got != "c3" {
		t.Errorf("LastCommit %q, want c3", got)
	}
}

func TestOnIterationEndErrorFailsTheRun(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	h := &endHook{failAt: 2}
	r.o.OnIterationEnd = h.fn
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != ExitFailure || out.State != StateFailed || out.TriggeredBy != "iteration_end" ||
		out.Iterations != 2 || !strings.Contains(out.Reason, "the end of iteration 2 failed: push rejected") {
		t.Fatalf("outcome %+v", out)
	}
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if len(iters) != 2 {
		t.Fatalf("%d IterationCompleted, want 2", len(iters))
	}
	last := iters[1]
	if last.Success || !strings.Contains(last.ErrorMessage, "push rejected") || last.Metadata["commit"].Str() != "c2" {
		t.Errorf("IterationCompleted 2: success %v error %q metadata %v", last.Success, last.ErrorMessage, last.Metadata)
	}
	failed := runTypes(t, fx, out.RunID, ledger.RunFailed)
	if len(failed) != 1 || failed[0].Metadata["condition"].Str() != "iteration_end" {
		t.Fatalf("closing actions %+v", failed)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.StopConditionsEvaluated)); n != 1 {
		t.Errorf("%d stop evaluations, want 1: the failed iteration ends the run at once", n)
	}
}

// An aborted iteration counts on the chain, so its workspace is committed
// with it, under a context the abort did not cancel.
func TestOnIterationEndRunsForAnAbortedIteration(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "Wait" (call :test.wait {}))'
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	fx.hold, fx.waiting = make(chan struct{}), make(chan struct{}, 1)
	h := &endHook{}
	r.o.OnIterationEnd = h.fn
	go func() {
		<-fx.waiting
		r.Abort()
	}()
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.State != StateAborted || out.Iterations != 1 {
		t.Fatalf("outcome %+v", out)
	}
	if fmt.Sprint(h.calls, h.live) != "[1] [true]" {
		t.Fatalf("hook calls %v live %v, want iteration 1 with a live context", h.calls, h.live)
	}
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if len(iters) != 1 || iters[0].Metadata["status"].Str() != "cancelled" || iters[0].Metadata["commit"].Str() != "c1" {
		t.Fatalf("IterationCompleted %+v", iters)
	}
}

// An iteration stopped at an agent's usage limit is not counted: it runs
// again under its number, and only that run ends it.
func TestOnIterationEndSkipsAnIterationStoppedAtALimit(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.limited {:reset-ms 20}))'
[[stop]]
kind = "max_iterations"
max = 2
`, nil)
	h := &endHook{}
	r.o.OnIterationEnd = h.fn
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 2 {
		t.Fatalf("outcome %+v %v", out, err)
	}
	if fmt.Sprint(h.calls) != "[1 2]" {
		t.Fatalf("hook called for %v, want [1 2]", h.calls)
	}
	var got []string
	for _, a := range runTypes(t, fx, out.RunID, ledger.IterationCompleted) {
		got = append(got, a.Metadata["status"].Str()+":"+a.Metadata["commit"].Str())
	}
	if strings.Join(got, " ") != "usage-limit: ok:c1 ok:c2" {
		t.Errorf("iterations %q", got)
	}
}

func TestLastCommit(t *testing.T) {
	t.Parallel()
	done := func(status, commit string) ledger.Action {
		m := map[string]rtfs.Value{"status": rtfs.String(status)}
		if commit != "" {
			m["commit"] = rtfs.String(commit)
		}
		return ledger.Action{Type: ledger.IterationCompleted, Metadata: m}
	}
	other := ledger.Action{Type: ledger.IterationStarted, Metadata: map[string]rtfs.Value{"commit": rtfs.String("no")}}
	for _, tc := range []struct {
		name string
		acts []ledger.Action
		want string
	}{
		{"none", nil, ""},
		{"last counted", []ledger.Action{done("ok", "a"), done("failed", "b"), other}, "b"},
		{"a limited iteration does not count", []ledger.Action{done("ok", "a"), done(string(ledger.StatusUsageLimit), "")}, "a"},
		{"the last counted recorded none", []ledger.Action{done("ok", "a"), done("ok", "")}, ""},
	} {
		if got := LastCommit(tc.acts); got != tc.want {
			t.Errorf("%s: LastCommit = %q, want %q", tc.name, got, tc.want)
		}
	}
}
