package batch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// run builds and runs a batch of f with o, failing the test on an error.
func run(t *testing.T, ctx context.Context, o Options) *Summary {
	t.Helper()
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func verdicts(s *Summary) map[string]string {
	out := map[string]string{}
	for _, t := range s.Tasks {
		out[t.ID] = t.Verdict
	}
	return out
}

func types(acts []ledger.Action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, a.Type.String()+" "+a.FunctionName)
	}
	return out
}

// Three tasks, two at a time: each is a child run linked on the chain, each
// merges, each is marked done by the queue's Edit (in the merge tree, not
// the checkout), and the batch's record lists its children.
func TestBatchMergesEveryTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B"), task("C"))
	o := f.options(t)
	s := run(t, context.Background(), o)
	if s.ExitCode != 0 || s.State != loop.StateDone {
		t.Fatalf("summary %+v, want exit 0", s)
	}
	if v := verdicts(s); v["A"] != VerdictMerged || v["B"] != VerdictMerged || v["C"] != VerdictMerged {
		t.Fatalf("verdicts %v", v)
	}
	slices.Sort(f.src.done)
	if !slices.Equal(f.src.done, []string{"A", "B", "C"}) {
		t.Fatalf("marked done %v", f.src.done)
	}
	for _, id := range []string{"A", "B", "C"} {
		if _, err := os.Stat(filepath.Join(f.merger.target, "done", id)); err != nil {
			t.Errorf("the merged tree lacks the source's edit for %s: %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(o.Dir, "task", id, "done")); err == nil {
			t.Errorf("task %s's checkout was marked done; only the merge tree may be", id)
		}
	}
	acts := f.batchActions(t, s.ID)
	counts := map[ledger.ActionType]int{}
	children := map[string]string{} // run → task
	for _, a := range acts {
		counts[a.Type]++
		if a.Type == ledger.TaskStarted {
			children[a.Metadata[MetaRun].Str()] = a.Metadata[MetaTask].Str()
		}
		if a.Type != ledger.BatchStarted && a.ParentActionID != acts[0].ActionID {
			t.Errorf("%s is not under BatchStarted", a.Type)
		}
	}
	if acts[0].Type != ledger.BatchStarted || counts[ledger.TaskStarted] != 3 || counts[ledger.TaskMerged] != 3 || counts[ledger.TaskEnded] != 3 {
		t.Fatalf("batch actions %v", types(acts))
	}
	runs, err := loop.ListRuns(f.store)
	if err != nil {
		t.Fatal(err)
	}
	kids := 0
	for _, r := range runs {
		switch {
		case r.ID == s.ID:
			if r.Tasks != 3 || r.State != loop.StateDone || r.Iterations != 3 {
				t.Errorf("the batch's record %+v", r)
			}
		case r.Batch == s.ID:
			kids++
			if children[r.ID] == "" || r.State != loop.StateDone {
				t.Errorf("child record %+v is not one TaskStarted names (%v)", r, children)
			}
		}
	}
	if kids != 3 {
		t.Fatalf("%d child records of the batch in %+v", kids, runs)
	}
	if v, err := f.store.Verify(context.Background(), nil); err != nil || !v.OK() {
		t.Fatalf("the chain does not verify: %+v %v", v, err)
	}
}

// A task's run is built from the loop's config with its workdir in the
// task's checkout and its prompt the loop's prompt then the task's.
func TestTaskRunIsTheLoopInItsCheckout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("US-1"))
	o := f.options(t)
	s := run(t, context.Background(), o)
	prompt, err := os.ReadFile(filepath.Join(o.Dir, "prompts", "US-1-1.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"do the task\n\n## Task US-1: Title of US-1", "Text of US-1", "Acceptance criteria:\n- criterion of US-1"} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if _, err := os.Stat(filepath.Join(f.merger.target, "work.txt")); err != nil {
		t.Errorf("the run's work did not reach the merged tree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "task", "US-1")); err == nil {
		t.Error("a merged task's checkout was left behind")
	}
	if _, err := os.Stat(filepath.Join(f.repo, "work.txt")); err == nil {
		t.Error("the run wrote in the user's tree")
	}
	if got := f.target.made[filepath.Join(o.Dir, "task", "US-1")]; got != "ralph/"+s.ID+"/task/US-1" {
		t.Errorf("checkout branch %q", got)
	}
	acts, err := f.store.ByRun(s.Tasks[0].Runs[0])
	if err != nil || len(acts) == 0 || acts[0].Type != ledger.RunStarted {
		t.Fatalf("child run: %v %v", types(acts), err)
	}
	if b := acts[0].Metadata["batch"].Str(); b != s.ID {
		t.Errorf("child RunStarted names batch %q, want %q", b, s.ID)
	}
	if snap := acts[0].Metadata["config"].Str(); !strings.Contains(snap, filepath.Join(o.Dir, "prompts", "US-1-1.md")) ||
		strings.Contains(snap, "[tasks]") {
		t.Errorf("child config snapshot:\n%s", snap)
	}
}

// A conflict sends the task back to its loop with the queue's news in its
// prompt; it merges on the next run. Past Retries it ends conflict, is
// never marked done, and the batch exits 1.
func TestConflictGoesBackToTheLoop(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B"))
	f.merger.conflicts["A"] = 1
	f.merger.conflicts["B"] = 5
	o := f.options(t)
	o.Retries = 1
	s := run(t, context.Background(), o)
	if v := verdicts(s); v["A"] != VerdictMerged || v["B"] != VerdictConflict || s.ExitCode != 1 {
		t.Fatalf("verdicts %v exit %d", v, s.ExitCode)
	}
	if slices.Contains(f.src.done, "B") {
		t.Fatal("a conflicting task was marked done")
	}
	if len(s.Tasks[0].Runs) != 2 || len(s.Tasks[1].Runs) != 2 {
		t.Fatalf("runs %v %v, want 2 each", s.Tasks[0].Runs, s.Tasks[1].Runs)
	}
	prompt, err := os.ReadFile(filepath.Join(o.Dir, "prompts", "A-2.md"))
	if err != nil || !strings.Contains(string(prompt), "## Back from the merge queue\n\nThe merge queue said: <<<<<<< ours") {
		t.Fatalf("second prompt (%v):\n%s", err, prompt)
	}
	var ended []string
	for _, a := range f.batchActions(t, s.ID) {
		if a.Type == ledger.TaskEnded && a.FunctionName == "B" {
			ended = append(ended, a.Metadata[MetaVerdict].Str()+"/"+a.Metadata[MetaFinal].String())
		}
	}
	if !slices.Equal(ended, []string{"conflict/false", "conflict/true"}) {
		t.Fatalf("B's TaskEnded: %v", ended)
	}
	if !strings.Contains(s.Reason, "1 of 2 merged, 1 conflict") {
		t.Errorf("reason %q", s.Reason)
	}
}

// A merged tree on which the conditions fail (red) goes back to the loop;
// the task merges only once they hold there.
func TestRedReRunGoesBackToTheLoop(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"))
	f.merger.lose["A"] = []string{"work.txt"}
	s := run(t, context.Background(), f.options(t))
	if s.ExitCode != 0 || len(s.Tasks[0].Runs) != 2 || len(f.merger.merges) != 2 {
		t.Fatalf("summary %+v merges %v", s, f.merger.merges)
	}
	var back *Event
	for i := range f.events {
		if f.events[i].Kind == EventTaskBack {
			back = &f.events[i]
		}
	}
	if back == nil || back.Verdict != VerdictRed || !strings.Contains(back.Why, "work (success, not met)") {
		t.Fatalf("back event %+v", back)
	}
}

// A task's run that hits its limit ends stopped (exit 3); one that fails
// ends failed (exit 1), and the task that depends on it is blocked, never
// run.
func TestRunEndsAndDependencies(t *testing.T) {
	t.Parallel()
	never := "[plan]\nrtfs = '(do (step \"idle\" (call :ccos.echo {:message \"hi\"})))'\n[loop]\ncheckpoints = false\n" +
		"[[stop]]\nkind = \"file_exists\"\npath = \"work.txt\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 2\n"
	f := newFixture(t, never, task("A"))
	s := run(t, context.Background(), f.options(t))
	if s.ExitCode != loop.ExitLimit || s.Tasks[0].Verdict != VerdictStopped || s.Tasks[0].Iterations != 2 {
		t.Fatalf("limit: %+v", s)
	}

	failing := "[plan]\nrtfs = '(do (step \"read\" (call :fs.read {:path \"missing.txt\"})))'\n[loop]\ncheckpoints = false\n" +
		"[[stop]]\nkind = \"file_exists\"\npath = \"work.txt\"\n[[stop]]\nkind = \"consecutive_failures\"\ncount = 1\n"
	f = newFixture(t, failing, task("A"), task("B", "A"))
	s = run(t, context.Background(), f.options(t))
	if v := verdicts(s); v["A"] != VerdictFailed || v["B"] != VerdictBlocked || s.ExitCode != 1 {
		t.Fatalf("verdicts %v exit %d", v, s.ExitCode)
	}
	if len(s.Tasks[1].Runs) != 0 || !strings.Contains(s.Tasks[1].Why, "depends on did not merge: A") {
		t.Fatalf("blocked task %+v", s.Tasks[1])
	}
}

// A task runs only once the tasks it depends on merged, however many run
// at once; independent tasks' loops run side by side up to Parallel (a
// task waiting in the merge queue runs none).
func TestOrderAndParallel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B", "A"), task("C"), task("D"))
	o := f.options(t)
	s := run(t, context.Background(), o)
	if s.ExitCode != 0 {
		t.Fatalf("summary %+v", s)
	}
	running, most := 0, 0
	mergedA := false
	for _, e := range f.events {
		switch e.Kind {
		case EventTaskStarted:
			running++
			most = max(most, running)
			if e.Task == "B" && !mergedA {
				t.Error("B started before A, which it depends on, merged")
			}
		case EventRunEnded:
			running--
		case EventTaskMerged:
			mergedA = mergedA || e.Task == "A"
		}
	}
	if most > o.Parallel {
		t.Errorf("%d loops ran at once, more than parallel %d", most, o.Parallel)
	}
}

// A batch whose config has no success condition that reads the work tree,
// or whose workdir lies outside the repository, is refused before it
// records anything.
func TestRefusals(t *testing.T) {
	t.Parallel()
	claim := "[plan]\nrtfs = '(do (step \"w\" (call :ccos.echo {:message \"DONE\"})))'\n[[stop]]\nkind = \"output_pattern\"\npattern = \"DONE\"\n"
	f := newFixture(t, claim, task("A"))
	if _, err := New(f.options(t)); !errors.Is(err, ErrNoWorldCheck) || !strings.Contains(err.Error(), "ralph.toml: no success condition checks the work tree") {
		t.Fatalf("no world check: %v", err)
	}
	f = newFixture(t, "", task("A"))
	o := f.options(t)
	o.Repo = t.TempDir()
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "is outside the repository") {
		t.Fatalf("workdir outside: %v", err)
	}
	o = f.options(t)
	f.src.err = errors.New("prd.json:3:5: story has no id")
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Run(context.Background()); !IsRefused(err) {
		t.Fatalf("a source that cannot be listed: %v", err)
	}
	if h := f.store.Head(); h.Seq != 0 {
		t.Fatalf("a refused batch recorded %d actions", h.Seq)
	}
}

// Stopping the batch aborts the runs in flight, leaves the others queued,
// and exits 4.
func TestAbort(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B"), task("C"))
	ctx, cancel := context.WithCancel(context.Background())
	o := f.options(t)
	o.Parallel = 1
	o.OnEvent = func(e Event) {
		if e.Kind == EventTaskStarted {
			cancel()
		}
	}
	s := run(t, ctx, o)
	if v := verdicts(s); s.ExitCode != loop.ExitAborted || v["A"] != VerdictAborted || v["B"] != VerdictQueued {
		t.Fatalf("verdicts %v exit %d", v, s.ExitCode)
	}
	if len(f.src.done) != 0 {
		t.Fatalf("an aborted batch marked %v done", f.src.done)
	}
}

// A source outside the repository (a GitHub issue) is told of a merge
// after the target moved, with the batch, the commit and the target; a
// task its source has done already is skipped, and the tasks that depend
// on it run.
func TestSourceOutsideAndDoneTasks(t *testing.T) {
	t.Parallel()
	done := task("A")
	done.Done = true
	f := newFixture(t, "", done, task("B", "A"))
	f.src.outside = true
	s := run(t, context.Background(), f.options(t))
	if s.ExitCode != 0 || len(s.Tasks) != 1 || s.Tasks[0].ID != "B" {
		t.Fatalf("summary %+v", s)
	}
	if len(f.src.notes) != 1 || f.src.notes[0] != (Note{Batch: s.ID, Commit: s.Tasks[0].Commit, Target: "ralph/b/merged"}) {
		t.Fatalf("notes %+v", f.src.notes)
	}
	if _, err := os.Stat(filepath.Join(f.merger.target, "done")); err == nil {
		t.Fatal("a source outside the repository was edited in the merge tree")
	}
}

// A panic in one task's work ends that task as error; the batch and its
// other tasks go on.
func TestPanicEndsOneTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B"))
	f.merger.panicOn = "A"
	o := f.options(t)
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := run(t, context.Background(), o)
	if v := verdicts(s); v["A"] != VerdictError || v["B"] != VerdictMerged || s.ExitCode != 1 {
		t.Fatalf("verdicts %v exit %d", v, s.ExitCode)
	}
	if !strings.Contains(s.Tasks[0].Why, "ralph failed: assignment to entry in nil map") {
		t.Fatalf("why %q", s.Tasks[0].Why)
	}
}

// With attempts = 2 each task has two loops in two checkouts; the first
// the queue merges wins, and the other, still working, is cancelled
// (superseded) and recorded so, never merged.
func TestAttempts(t *testing.T) {
	t.Parallel()
	slow := "[intent]\ngoal = \"do the task\"\n[plan]\nrtfs = '" + workPlan + "'\n[loop]\ncheckpoints = false\ndelay = \"1s\"\n" +
		"[[stop]]\nname = \"work\"\nkind = \"file_exists\"\npath = \"work.txt\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 3\n"
	f := newFixture(t, slow, task("A"))
	f.target.broken = string(filepath.Separator) + "2" // attempt 2 cannot write work.txt: it keeps trying
	o := f.options(t)
	o.Attempts = 2
	s := run(t, context.Background(), o)
	if s.ExitCode != 0 || s.Tasks[0].Verdict != VerdictMerged || len(f.merger.merges) != 1 || len(f.src.done) != 1 {
		t.Fatalf("summary %+v merges %v done %v", s, f.merger.merges, f.src.done)
	}
	for _, k := range []string{"1", "2"} {
		if got := f.target.made[filepath.Join(o.Dir, "task", "A", k)]; got != "ralph/"+s.ID+"/task/A/"+k {
			t.Errorf("attempt %s's checkout: branch %q (made %v)", k, got, f.target.made)
		}
	}
	var ends []string
	for _, a := range f.batchActions(t, s.ID) {
		if a.Type == ledger.TaskEnded {
			ends = append(ends, a.Metadata[MetaVerdict].Str())
		}
	}
	slices.Sort(ends)
	if !slices.Equal(ends, []string{VerdictCancelled, VerdictMerged}) {
		t.Fatalf("TaskEnded verdicts %v", ends)
	}
	var loser string
	for _, r := range s.Tasks[0].Runs {
		acts, _ := f.store.ByRun(r)
		if last := acts[len(acts)-1]; last.Type == ledger.RunAborted {
			loser = last.Metadata["condition"].Str() + ": " + last.Metadata["reason"].Str()
		}
	}
	if loser != "superseded: attempt 1 of task A merged first" {
		for _, r := range s.Tasks[0].Runs {
			acts, _ := f.store.ByRun(r)
			t.Log(types(acts))
		}
		t.Fatalf("the losing attempt's run ended %q", loser)
	}
}

// A plan finds its task in its context (:task ctx), from [intent] params.
func TestPlanSeesItsTask(t *testing.T) {
	t.Parallel()
	cfg := "[plan]\nrtfs = '(do (step \"w\" (call :fs.write {:path (str (:id (:task ctx)) \".txt\") :content (first (:criteria (:task ctx)))})))'\n" +
		"[loop]\ncheckpoints = false\n[[stop]]\nkind = \"file_exists\"\npath = \"US-7.txt\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n"
	f := newFixture(t, cfg, task("US-7"))
	o := f.options(t)
	s := run(t, context.Background(), o)
	b, err := os.ReadFile(filepath.Join(f.merger.target, "US-7.txt"))
	if s.ExitCode != 0 || err != nil || string(b) != "criterion of US-7" {
		t.Fatalf("exit %d; the plan wrote %q (%v)", s.ExitCode, b, err)
	}
}

// A task waiting in the merge queue gives its slot back: with parallel 1,
// the next task's loop starts while the first waits to merge.
func TestQueueFreesTheSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "", task("A"), task("B"))
	gate := make(chan struct{})
	f.merger.gates = map[string]chan struct{}{"A": gate}
	o := f.options(t)
	o.Parallel = 1
	o.OnEvent = func(e Event) {
		if e.Kind == EventTaskStarted && e.Task == "B" {
			close(gate)
		}
	}
	if s := run(t, context.Background(), o); s.ExitCode != 0 {
		t.Fatalf("summary %+v: B did not start while A waited in the queue", s)
	}
}
