package batch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// runTypes are the types of run's actions, in order.
func runTypes(t *testing.T, st *ledger.Store, run string) []ledger.ActionType {
	t.Helper()
	acts, err := st.ByRun(run)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.ActionType
	for _, a := range acts {
		out = append(out, a.Type)
	}
	return out
}

func count(ts []ledger.ActionType, want ledger.ActionType) int {
	n := 0
	for _, t := range ts {
		if t == want {
			n++
		}
	}
	return n
}

// A batch the user stopped resumes: the aborted run goes on under its own
// id from its last iteration, the tasks never started start, and every
// task merges.
func TestResumeAfterAbort(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B"))
	ctx, cancel := context.WithCancel(context.Background())
	o := f.options(t)
	o.Parallel = 1
	o.OnEvent = func(e Event) {
		if e.Kind == EventTaskStarted {
			cancel()
		}
	}
	s := run(t, ctx, o)
	if s.ExitCode != loop.ExitAborted {
		t.Fatalf("first part: %+v", s)
	}
	aborted := s.Tasks[0].Runs[0]

	o.ID, o.OnEvent = s.ID, nil
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	s, err = b.Resume(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v := verdicts(s); s.ExitCode != 0 || v["A"] != VerdictMerged || v["B"] != VerdictMerged {
		t.Fatalf("resumed: %v exit %d", v, s.ExitCode)
	}
	if len(s.Tasks[0].Runs) != 1 || s.Tasks[0].Runs[0] != aborted {
		t.Fatalf("A's runs %v, want its aborted run %s resumed", s.Tasks[0].Runs, aborted)
	}
	ts := runTypes(t, f.store, aborted)
	if count(ts, ledger.RunStarted) != 1 || count(ts, ledger.RunAborted) != 1 || ts[len(ts)-1] != ledger.RunCompleted {
		t.Fatalf("the resumed run: %v", ts)
	}
	if h, err := f.store.Verify(context.Background(), nil); err != nil || !h.OK() {
		t.Fatalf("verify: %+v %v", h, err)
	}
}

// A batch killed mid-way resumes from what its chain says: a run that was
// running (left open, as a crash leaves it) resumes; a run that ended green
// before the batch could say so goes to the queue; a task never started
// starts.
func TestResumeAfterKill(t *testing.T) {
	t.Parallel()
	slow := "[intent]\ngoal = \"do the task\"\n[plan]\nrtfs = '" + workPlan + "'\n[loop]\ncheckpoints = false\ndelay = \"1s\"\n" +
		"[[stop]]\nname = \"work\"\nkind = \"file_exists\"\npath = \"work.txt\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 5\n"
	f := newFixture(t, slow, task("A"), task("B"), task("C"), task("D"))
	f.target.broken = string(filepath.Separator) + "A" // A cannot write its work.txt until the "crash" is over
	o := f.options(t)
	b1, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	b1.started = b1.o.Now()
	b1.setTasks(f.src.tasks)
	if err := b1.recordStarted(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	// D: its TaskStarted is recorded, and the batch dies before its run's RunStarted.
	td, ad := b1.tasks[3], b1.attempts(b1.tasks[3])[0]
	if ad.checkout, err = f.target.Checkout(context.Background(), ad.dir, ad.branch, false); err != nil {
		t.Fatal(err)
	}
	if err := b1.recordTaskStarted(context.Background(), td, ad, "never-started", 1, false); err != nil {
		t.Fatal(err)
	}
	// A: its run is handed back after its first iteration, open as after a crash.
	ctx, cancel := context.WithCancelCause(context.Background())
	b1.o.OnEvent = func(e Event) {
		if e.Kind == EventIteration {
			cancel(&loop.Cancelled{By: loop.CancelHandBack})
		}
	}
	ta, aa := b1.tasks[0], b1.attempts(b1.tasks[0])[0]
	if aa.checkout, err = f.target.Checkout(ctx, aa.dir, aa.branch, false); err != nil {
		t.Fatal(err)
	}
	crA := b1.runChild(ctx, ta, aa, 1, "", "")
	if !errors.Is(crA.err, loop.ErrHandedBack) {
		t.Fatalf("A's run: %+v", crA)
	}
	// B: its run ends green, and the batch dies before its TaskEnded.
	b1.o.OnEvent = nil
	tb, ab := b1.tasks[1], b1.attempts(b1.tasks[1])[0]
	if ab.checkout, err = f.target.Checkout(context.Background(), ab.dir, ab.branch, false); err != nil {
		t.Fatal(err)
	}
	if crB := b1.runChild(context.Background(), tb, ab, 1, "", ""); crB.err != nil || crB.out.ExitCode != 0 {
		t.Fatalf("B's run: %+v", crB)
	}
	if err := os.Remove(filepath.Join(aa.dir, "work.txt")); err != nil { // the world is fixed meanwhile
		t.Fatal(err)
	}
	f.target.broken = ""

	o.ID = b1.id
	b2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b2.Resume(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v := verdicts(s); s.ExitCode != 0 || v["A"] != VerdictMerged || v["B"] != VerdictMerged || v["C"] != VerdictMerged || v["D"] != VerdictMerged {
		t.Fatalf("resumed: %v exit %d (%+v)", v, s.ExitCode, s.Tasks)
	}
	if s.Tasks[0].Runs[0] != crA.id || len(s.Tasks[0].Runs) != 1 || len(s.Tasks[1].Runs) != 1 {
		t.Fatalf("runs A %v B %v, want A's open run resumed and B's green run merged", s.Tasks[0].Runs, s.Tasks[1].Runs)
	}
	ts := runTypes(t, f.store, crA.id)
	if count(ts, ledger.RunStarted) != 1 || count(ts, ledger.IterationCompleted) != 2 || ts[len(ts)-1] != ledger.RunCompleted {
		t.Fatalf("A's resumed run: %v", ts)
	}
	if len(s.Tasks[3].Runs) != 1 || s.Tasks[3].Runs[0] == "never-started" {
		t.Fatalf("D's runs %v, want one new run", s.Tasks[3].Runs)
	}
	if s.Tasks[0].Iterations != 2 || s.Tasks[1].Iterations != 1 {
		t.Fatalf("iterations A %d B %d, want 2 and 1", s.Tasks[0].Iterations, s.Tasks[1].Iterations)
	}
	if _, err := ReadStarted(f.store, crA.id); !errors.Is(err, ErrNotBatch) {
		t.Fatalf("a run is not a batch: %v", err)
	}
}
