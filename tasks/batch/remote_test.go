package batch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// carrierTarget makes fakeTarget's checkouts carriers.
type carrierTarget struct{ *fakeTarget }

type carrierCheckout struct{ dirCheckout }

func (t carrierTarget) Checkout(ctx context.Context, dir, branch string, shared bool) (Checkout, error) {
	c, err := t.fakeTarget.Checkout(ctx, dir, branch, shared)
	if err != nil {
		return nil, err
	}
	return carrierCheckout{c.(dirCheckout)}, nil
}

func (c carrierCheckout) Send(context.Context, string) (string, string, error) {
	return "task-branch", "c0mm1t", nil
}

// Receive brings the remote run's work: work.txt, as the loop's plan
// writes it.
func (c carrierCheckout) Receive(context.Context, string, string) (string, error) {
	return "r3ce1ved", os.WriteFile(filepath.Join(c.Dir(), "work.txt"), []byte("done"), 0o644)
}

// fakeRemote runs each task's run "elsewhere": green (its work received
// into the checkout) unless fail names the task.
type fakeRemote struct {
	fail string
	mu   sync.Mutex
	runs []RemoteRun
}

func (r *fakeRemote) Run(ctx context.Context, rr RemoteRun) (*loop.Outcome, error) {
	r.mu.Lock()
	r.runs = append(r.runs, rr)
	r.mu.Unlock()
	rr.OnIteration(1, "ok", 0.01)
	if rr.Task.ID == r.fail {
		return &loop.Outcome{Class: stop.ClassFailure, TriggeredBy: "tests", Reason: "go test failed", Iterations: 1, CostUSD: 0.01}, nil
	}
	if _, err := rr.Checkout.Receive(ctx, "url", "ralph/"+rr.ID); err != nil {
		return nil, err
	}
	return &loop.Outcome{Class: stop.ClassSuccess, TriggeredBy: "work", Reason: "work.txt exists", Iterations: 1, CostUSD: 0.01}, nil
}

// With a Remote the batch runs no loop of its own: each run of a task is
// the Remote's, linked by TaskStarted, its prompt the task's (with the
// merge queue's news after a conflict), and a green one goes through the
// same merge queue.
func TestBatchRemoteRunsTasksElsewhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B"))
	f.merger.conflicts["A"] = 1
	o := f.options(t)
	o.Target = carrierTarget{f.target}
	remote := &fakeRemote{fail: "B"}
	o.Remote = remote
	s := run(t, context.Background(), o)
	if v := verdicts(s); v["A"] != VerdictMerged || v["B"] != VerdictFailed || s.ExitCode != 1 {
		t.Fatalf("verdicts %v, exit %d", v, s.ExitCode)
	}
	var aPrompts []string
	for _, rr := range remote.runs {
		if rr.Batch != s.ID || !strings.Contains(rr.Prompt, "## Task "+rr.Task.ID+": Title of "+rr.Task.ID) || !strings.Contains(rr.Prompt, "criterion of "+rr.Task.ID) {
			t.Errorf("run %+v: prompt or batch wrong", rr)
		}
		if rr.Task.ID == "A" {
			aPrompts = append(aPrompts, rr.Prompt)
		}
	}
	if len(aPrompts) != 2 || strings.Contains(aPrompts[0], "Back from the merge queue") || !strings.Contains(aPrompts[1], "The merge queue said: <<<<<<< ours") {
		t.Fatalf("A's prompts: %q", aPrompts)
	}
	started := 0
	for _, a := range f.batchActions(t, s.ID) {
		if a.Type != ledger.TaskStarted {
			continue
		}
		started++
		run := a.Metadata[MetaRun].Str()
		if acts, err := f.store.ByRun(run); err != nil || len(acts) != 0 {
			t.Errorf("run %s ran here: %d actions, %v", run, len(acts), err)
		}
	}
	if started != 3 {
		t.Fatalf("%d TaskStarted, want 3 (A twice, B once)", started)
	}
	iterations := 0
	for _, e := range f.events {
		if e.Kind == EventIteration && e.Status == "ok" {
			iterations++
		}
	}
	if iterations != 3 {
		t.Fatalf("%d iteration events, want 3", iterations)
	}
}

// A checkout that cannot be carried ends its task in error, and a
// batch with a Remote does not resume a run.
func TestBatchRemoteNeedsACarrier(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"))
	o := f.options(t)
	o.Remote = &fakeRemote{}
	s := run(t, context.Background(), o)
	if v := verdicts(s); v["A"] != VerdictError || !strings.Contains(s.Tasks[0].Why, "cannot be carried") {
		t.Fatalf("summary %+v", s.Tasks)
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if cr := b.startRemote(context.Background(), nil, nil, 1, "", "some-run"); cr.err != errRemoteResume {
		t.Fatalf("resume: %v", cr.err)
	}
}
