package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func green(context.Context, string) (bool, string, error) { return true, "", nil }

// markDone is an Edit that adds id to prd.json's "done" list, as a
// source's MarkDone changes its file.
func markDone(id string) func(context.Context, string) error {
	return func(_ context.Context, dir string) error {
		p := filepath.Join(dir, "prd.json")
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var prd struct {
			UserStories []any    `json:"userStories"`
			Done        []string `json:"done"`
		}
		if err := json.Unmarshal(b, &prd); err != nil {
			return fmt.Errorf("prd.json: %w", err)
		}
		prd.Done = append(prd.Done, id)
		out, err := json.Marshal(prd)
		if err != nil {
			return err
		}
		return os.WriteFile(p, append(out, '\n'), 0o644)
	}
}

// edit rewrites calc.go's line old as new in dir.
func (f *repoFixture) edit(dir, old, new string) {
	f.tb.Helper()
	src := f.read(dir, "calc.go")
	if !strings.Contains(src, old) {
		f.tb.Fatalf("calc.go in %s has no %q", dir, old)
	}
	f.write(dir, "calc.go", strings.Replace(src, old, new, 1))
}

func (f *repoFixture) queue(tg *Target, mode Integration) *Queue {
	f.tb.Helper()
	q := NewQueue(tg, QueueOptions{Integrate: mode, Scratch: filepath.Join(f.home, "scratch"), Batch: "b1"})
	f.tb.Cleanup(func() {
		if err := q.Close(context.Background()); err != nil {
			f.tb.Error(err)
		}
	})
	return q
}

// merge offers c's work as task id to q, marked done by markDone.
func (f *repoFixture) merge(q *Queue, c *Checkout, id string, check func(context.Context, string) (bool, string, error)) Result {
	f.tb.Helper()
	res, err := q.Merge(f.ctx, Merge{Task: Task{ID: id, Title: "task " + id}, Checkout: c, Check: check, Edit: markDone(id),
		Body: []string{"Ralph-Batch: b1", "Ralph-Run: run-" + id}})
	if err != nil {
		f.tb.Fatalf("merge %s: %v", id, err)
	}
	return res
}

// commitsSince are the subjects of the target's commits since from,
// oldest first, checking each has one parent.
func (f *repoFixture) commitsSince(tg *Target, from string) []string {
	f.tb.Helper()
	out := f.git(f.dir, "log", "--reverse", "--format=%s|%p", from+".."+tg.Ref)
	var subjects []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		subject, parents, _ := strings.Cut(l, "|")
		if strings.Contains(parents, " ") {
			f.tb.Fatalf("commit %q on the target has parents %s: a task lands as one commit", subject, parents)
		}
		subjects = append(subjects, subject)
	}
	return subjects
}

func modes(t *testing.T, run func(t *testing.T, mode Integration)) {
	for _, mode := range []Integration{IntegrateRebase, IntegrateMerge} {
		t.Run(string(mode), func(t *testing.T) { run(t, mode) })
	}
}

func TestMergeLandsEachTaskAsOneCommit(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode Integration) {
		f := newRepoFixture(t)
		f.dirtyUser()
		before := f.userState()
		tg := f.target("ralph/b1/merged")
		q := f.queue(tg, mode)
		a := f.checkout(tg, "ralph/b1/task/A", false)
		b := f.checkout(tg, "ralph/b1/task/B", false)
		f.edit(a.Dir, "return a + b", "return b + a")
		f.write(a.Dir, "add_test.go", "package calc\n")
		// B's agent commits twice itself and leaves a change uncommitted.
		f.edit(b.Dir, "return a - b", "return -(b - a)")
		f.git(b.Dir, "commit", "-q", "-am", "B one")
		f.write(b.Dir, "sub.md", "Sub subtracts.\n")
		f.git(b.Dir, "add", "sub.md")
		f.git(b.Dir, "commit", "-q", "-m", "B two")
		f.write(b.Dir, "sub_test.go", "package calc\n")

		ra := f.merge(q, a, "A", green)
		var seen string
		rb := f.merge(q, b, "B", func(_ context.Context, dir string) (bool, string, error) {
			b, err := os.ReadFile(filepath.Join(dir, "calc.go"))
			seen = string(b)
			return err == nil, "", err
		})
		if ra.Outcome != Merged || rb.Outcome != Merged || ra.Resumed || rb.Resumed {
			t.Fatalf("results %+v, %+v", ra, rb)
		}
		if !strings.Contains(seen, "return b + a") || !strings.Contains(seen, "return -(b - a)") {
			t.Fatalf("B's check saw calc.go without both tasks' work:\n%s", seen)
		}
		if got, want := f.commitsSince(tg, tg.Start), []string{"A: task A", "B: task B"}; !slices.Equal(got, want) {
			t.Fatalf("target commits %q, want %q", got, want)
		}
		if tip := f.git(f.dir, "rev-parse", tg.Ref); tip != rb.Commit || f.git(f.dir, "rev-parse", rb.Commit+"^") != ra.Commit {
			t.Fatalf("target at %s, want B's commit %s on A's %s", tip, rb.Commit, ra.Commit)
		}
		msg := f.git(f.dir, "log", "-1", "--format=%B", rb.Commit)
		for _, want := range []string{"Ralph-Batch: b1", "Ralph-Run: run-B", "Ralph-Task: b1/B"} {
			if !strings.Contains(msg, want) {
				t.Errorf("B's commit message %q lacks %q", msg, want)
			}
		}
		files := f.git(f.dir, "diff", "--name-only", rb.Commit+"^", rb.Commit)
		if want := "calc.go\nprd.json\nsub.md\nsub_test.go"; files != want {
			t.Fatalf("B's commit changes %q, want its whole work and the prd: %q", files, want)
		}
		if prd := f.show(tg.Ref, "prd.json"); !strings.Contains(prd, `"done":["A","B"]`) {
			t.Fatalf("prd.json on the target = %s, want both tasks marked done", prd)
		}
		if after := f.userState(); after != before {
			t.Fatalf("user state changed:\n%s\nwant\n%s", after, before)
		}
	})
}

func TestMergeConflictGoesBackWithMarkers(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode Integration) {
		f := newRepoFixture(t)
		tg := f.target("ralph/b1/merged")
		q := f.queue(tg, mode)
		a := f.checkout(tg, "ralph/b1/task/A", false)
		b := f.checkout(tg, "ralph/b1/task/B", false)
		f.edit(a.Dir, "return a + b", "return b + a // A")
		f.edit(b.Dir, "return a + b", "return a + b + 0 // B")

		ra := f.merge(q, a, "A", green)
		checked := false
		rb := f.merge(q, b, "B", func(context.Context, string) (bool, string, error) { checked = true; return true, "", nil })
		if ra.Outcome != Merged || rb.Outcome != Conflicted || checked {
			t.Fatalf("A %v, B %v (checked %v): want B conflicted and never checked", ra.Outcome, rb.Outcome, checked)
		}
		if !slices.Equal(rb.Conflicts, []string{"calc.go"}) || rb.Onto != ra.Commit {
			t.Fatalf("B: conflicts %q onto %s, want calc.go onto %s", rb.Conflicts, rb.Onto, ra.Commit)
		}
		for _, want := range []string{"CONFLICT (content): Merge conflict in calc.go", "<<<<<<<", "return b + a // A", "return a + b + 0 // B", ">>>>>>>"} {
			if !strings.Contains(rb.Evidence, want) {
				t.Errorf("evidence lacks %q:\n%s", want, rb.Evidence)
			}
		}
		if tip := f.git(f.dir, "rev-parse", tg.Ref); tip != ra.Commit {
			t.Fatalf("target at %s after a conflict, want A's %s", tip, ra.Commit)
		}

		text, err := q.Reset(f.ctx, b, rb)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"conflicts with what landed", "- A: task A", "conflict markers", "calc.go", "<<<<<<<", "Your earlier work", "+\treturn a + b + 0 // B"} {
			if !strings.Contains(text, want) {
				t.Errorf("the prompt text lacks %q:\n%s", want, text)
			}
		}
		if head := f.git(b.Dir, "rev-parse", "HEAD"); head != ra.Commit || f.git(b.Dir, "symbolic-ref", "HEAD") != b.Ref {
			t.Fatalf("B's checkout at %s, want on its branch at the tip %s", head, ra.Commit)
		}
		src := f.read(b.Dir, "calc.go")
		if !strings.Contains(src, "<<<<<<<") || !strings.Contains(src, "return b + a // A") {
			t.Fatalf("B's calc.go has no markers around the tip's side:\n%s", src)
		}
		if diff := f.git(b.Dir, "diff"); !strings.Contains(diff, "return a + b + 0 // B") {
			t.Fatalf("git diff in B's checkout does not show its work:\n%s", diff)
		}
		// The agent resolves; the queue lands it.
		f.write(b.Dir, "calc.go", strings.Replace(calcGo, "return a + b", "return b + a + 0 // A and B", 1))
		rb = f.merge(q, b, "B", green)
		if rb.Outcome != Merged {
			t.Fatalf("B after resolving: %+v", rb)
		}
		if got := f.commitsSince(tg, tg.Start); !slices.Equal(got, []string{"A: task A", "B: task B"}) {
			t.Fatalf("target commits %q", got)
		}
		if src := f.show(tg.Ref, "calc.go"); !strings.Contains(src, "// A and B") || strings.Contains(src, "<<<") {
			t.Fatalf("calc.go on the target:\n%s", src)
		}
	})
}

func TestMergeRedLeavesTargetAndGoesBack(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	q := f.queue(tg, IntegrateRebase)
	a := f.checkout(tg, "ralph/b1/task/A", false)
	b := f.checkout(tg, "ralph/b1/task/B", false)
	f.edit(a.Dir, "return a - b", "return a - b - 0")
	f.edit(b.Dir, "return a + b", "return a + b + 1")
	ra := f.merge(q, a, "A", green)
	red := func(_ context.Context, dir string) (bool, string, error) {
		f.write(dir, "test-output.txt", "litter\n")
		return false, "--- FAIL: TestAdd (0.00s)\n    calc_test.go:9: Add(1, 2) = 4, want 3\nFAIL", nil
	}
	rb := f.merge(q, b, "B", red)
	if rb.Outcome != Red || !strings.Contains(rb.Evidence, "Add(1, 2) = 4") {
		t.Fatalf("B = %+v, want Red with the evidence", rb)
	}
	if tip := f.git(f.dir, "rev-parse", tg.Ref); tip != ra.Commit {
		t.Fatalf("target at %s after a red check, want %s", tip, ra.Commit)
	}
	text, err := q.Reset(f.ctx, b, rb)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"re-ran the success conditions", "they failed", "Add(1, 2) = 4", "- A: task A", "+\treturn a + b + 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("the prompt text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "conflict markers") {
		t.Errorf("no conflict, yet the text speaks of markers:\n%s", text)
	}
	src := f.read(b.Dir, "calc.go")
	if !strings.Contains(src, "return a - b - 0") || !strings.Contains(src, "return a + b + 1") {
		t.Fatalf("B's checkout does not hold its work on the tip:\n%s", src)
	}
	if head := f.git(b.Dir, "rev-parse", "HEAD"); head != ra.Commit {
		t.Fatalf("B's HEAD %s, want the tip %s", head, ra.Commit)
	}
	if _, err := q.Reset(f.ctx, b, ra); err == nil {
		t.Fatal("a merged result was sent back to its loop")
	}
	if rb = f.merge(q, b, "B", green); rb.Outcome != Merged {
		t.Fatalf("B again: %+v", rb)
	}
	if files := f.git(f.dir, "diff", "--name-only", rb.Commit+"^", rb.Commit); files != "calc.go\nprd.json" {
		t.Fatalf("B's commit changes %q: the red check's litter or A's work came along", files)
	}
}

// What the check leaves in the scratch work tree (an untracked file, a
// rewritten tracked file) never reaches the commit; Edit's change does.
func TestMergeCommitIsTheCheckedTreeAndTheEdit(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	q := f.queue(tg, IntegrateRebase)
	littering := func(_ context.Context, dir string) (bool, string, error) {
		f.write(dir, "cover.out", "mode: set\n")
		f.write(dir, "out/bin.txt", "built\n")
		f.write(dir, "README.md", "# rewritten by the check\n")
		f.write(dir, "run.log", "ignored\n")
		return true, "", nil
	}
	for i, id := range []string{"A", "B", "C"} {
		c := f.checkout(tg, "ralph/b1/task/"+id, false)
		f.write(c.Dir, id+".go", "package calc\n")
		res, err := q.Merge(f.ctx, Merge{Task: Task{ID: id}, Checkout: c, Check: littering, Edit: []func(context.Context, string) error{markDone(id), nil, markDone(id)}[i]})
		if err != nil || res.Outcome != Merged {
			t.Fatalf("%s: %+v, %v", id, res, err)
		}
		want := id + ".go\nprd.json"
		if i == 1 {
			want = id + ".go" // no Edit
		}
		if files := f.git(f.dir, "diff", "--name-only", res.Commit+"^", res.Commit); files != want {
			t.Fatalf("%s's commit changes %q, want %q", id, files, want)
		}
		if subject := f.git(f.dir, "log", "-1", "--format=%s", res.Commit); subject != id {
			t.Fatalf("subject %q, want the id alone when there is no title", subject)
		}
	}
}

// A target moved by someone else during the merge is tried once more
// from where it went; moved again, the merge fails and says so.
func TestMergeTargetMovedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	q := f.queue(tg, IntegrateRebase)
	c := f.checkout(tg, "ralph/b1/task/A", false)
	f.edit(c.Dir, "return a + b", "return b + a")
	moves := 0
	move := func(_ context.Context, dir string) (bool, string, error) {
		tip := f.git(f.dir, "rev-parse", tg.Ref)
		tree := f.git(f.dir, "rev-parse", tip+"^{tree}")
		moved := f.git(f.dir, "commit-tree", tree, "-p", tip, "-m", fmt.Sprintf("someone else %d", moves))
		f.git(f.dir, "update-ref", tg.Ref, moved, tip)
		moves++
		return true, "", nil
	}
	once := func(ctx context.Context, dir string) (bool, string, error) {
		if moves == 0 {
			return move(ctx, dir)
		}
		return true, "", nil
	}
	res := f.merge(q, c, "A", once)
	if res.Outcome != Merged || moves != 1 {
		t.Fatalf("%+v after %d moves", res, moves)
	}
	if got := f.commitsSince(tg, tg.Start); !slices.Equal(got, []string{"someone else 0", "A: task A"}) {
		t.Fatalf("target commits %q, want A on top of the commit that moved it", got)
	}
	d := f.checkout(tg, "ralph/b1/task/B", false)
	f.edit(d.Dir, "return a - b", "return a - b - 0")
	before := f.git(f.dir, "rev-parse", tg.Ref)
	_, err := q.Merge(f.ctx, Merge{Task: Task{ID: "B"}, Checkout: d, Check: move})
	if err == nil || !strings.Contains(err.Error(), "moved twice") {
		t.Fatalf("err = %v, want the target moved twice", err)
	}
	if got := f.commitsSince(tg, before); !slices.Equal(got, []string{"someone else 1", "someone else 2"}) {
		t.Fatalf("after the failed merge the target has %q: B landed", got)
	}
}

// A queue killed after it advanced the target finds the task's commit
// when it comes back, and merges nothing twice; one killed before it
// advanced lands the task once.
func TestMergeResumes(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode Integration) {
		f := newRepoFixture(t)
		tg := f.target("ralph/b1/merged")
		q := NewQueue(tg, QueueOptions{Integrate: mode, Scratch: filepath.Join(f.home, "scratch"), Batch: "b1"})
		a := f.checkout(tg, "ralph/b1/task/A", false)
		f.edit(a.Dir, "return a + b", "return b + a")
		ra := f.merge(q, a, "A", green)
		// Killed here: the scratch work tree stays behind. A new queue
		// (ralph resume) takes it over.
		q2 := f.queue(tg, mode)
		a = f.checkout(tg, a.Branch, false)
		checked := false
		again, err := q2.Merge(f.ctx, Merge{Task: Task{ID: "A", Title: "task A"}, Checkout: a, Edit: markDone("A"),
			Check: func(context.Context, string) (bool, string, error) { checked = true; return true, "", nil }})
		if err != nil || again.Outcome != Merged || !again.Resumed || again.Commit != ra.Commit || checked {
			t.Fatalf("resumed merge = %+v, %v (checked %v); want A's commit %s found, nothing run", again, err, checked, ra.Commit)
		}
		// B's work was squashed when ralph died; the target had not moved.
		b := f.checkout(tg, "ralph/b1/task/B", false)
		f.edit(b.Dir, "return a - b", "return a - b - 0")
		if _, err := b.commitWork(f.ctx, "squashed before the kill\n"); err != nil {
			t.Fatal(err)
		}
		rb := f.merge(q2, b, "B", green)
		rb2 := f.merge(q2, b, "B", green)
		if rb.Outcome != Merged || rb.Resumed || !rb2.Resumed || rb2.Commit != rb.Commit {
			t.Fatalf("B: %+v then %+v", rb, rb2)
		}
		if got := f.commitsSince(tg, tg.Start); !slices.Equal(got, []string{"A: task A", "B: task B"}) {
			t.Fatalf("target commits %q", got)
		}
		// Another task whose id shares A's prefix is not taken for it.
		a10 := f.checkout(tg, "ralph/b1/task/A0", false)
		f.write(a10.Dir, "a0.txt", "a0\n")
		if r := f.merge(q2, a10, "A0", green); r.Resumed {
			t.Fatalf("task A0 taken for A: %+v", r)
		}
	})
}

func TestMergeConcurrently(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	q := f.queue(tg, IntegrateRebase)
	const n = 4
	results := make([]Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("T%d", i)
		c := f.checkout(tg, "ralph/b1/task/"+id, i%2 == 1)
		f.write(c.Dir, id+".go", "package calc\n")
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = q.Merge(f.ctx, Merge{Task: Task{ID: id, Title: "task " + id}, Checkout: c, Check: green, Edit: markDone(id)})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || results[i].Outcome != Merged {
			t.Fatalf("task %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if got := f.commitsSince(tg, tg.Start); len(got) != n {
		t.Fatalf("target commits %q, want %d", got, n)
	}
	tree := f.git(f.dir, "ls-tree", "--name-only", tg.Ref)
	for i := range n {
		if !strings.Contains(tree, fmt.Sprintf("T%d.go", i)) {
			t.Fatalf("target tree lacks T%d.go:\n%s", i, tree)
		}
	}
}

func TestMergeFromSharedClone(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode Integration) {
		f := newRepoFixture(t)
		f.dirtyUser()
		before := f.userState()
		tg := f.target("ralph/b1/merged")
		q := f.queue(tg, mode)
		a := f.checkout(tg, "ralph/b1/task/A", true)
		b := f.checkout(tg, "ralph/b1/task/B", true)
		f.edit(a.Dir, "return a + b", "return b + a // A")
		f.edit(b.Dir, "return a + b", "return a + b // B")
		if ra := f.merge(q, a, "A", green); ra.Outcome != Merged {
			t.Fatalf("A: %+v", ra)
		}
		rb := f.merge(q, b, "B", green)
		if rb.Outcome != Conflicted {
			t.Fatalf("B: %+v", rb)
		}
		if got := f.git(f.dir, "rev-parse", b.Ref); got != rb.Work {
			t.Fatalf("B's branch in the user's repository at %s, want its work %s fetched back", got, rb.Work)
		}
		if _, err := q.Reset(f.ctx, b, rb); err != nil {
			t.Fatal(err)
		}
		f.write(b.Dir, "calc.go", strings.Replace(calcGo, "return a + b", "return b + a // A, B", 1))
		if rb = f.merge(q, b, "B", green); rb.Outcome != Merged {
			t.Fatalf("B after resolving: %+v", rb)
		}
		if src := f.show(tg.Ref, "calc.go"); !strings.Contains(src, "// A, B") {
			t.Fatalf("calc.go on the target:\n%s", src)
		}
		if after := f.userState(); after != before {
			t.Fatalf("user state changed:\n%s\nwant\n%s", after, before)
		}
	})
}

func TestMergeOddIDs(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	q := NewQueue(tg, QueueOptions{Scratch: filepath.Join(f.home, "scratch"), Batch: "batch 1/ä"})
	t.Cleanup(func() { q.Close(context.Background()) })
	for i, id := range []string{"US 001\nä", "[x] tick ~^:", "fix/1..2"} {
		c := f.checkout(tg, "ralph/b1/task/"+refSafe(id), false)
		f.write(c.Dir, fmt.Sprintf("f%d.txt", i), id)
		task := Task{ID: id, Title: "line one\nline two"}
		res, err := q.Merge(f.ctx, Merge{Task: task, Checkout: c, Check: green})
		if err != nil || res.Outcome != Merged {
			t.Fatalf("%q: %+v, %v", id, res, err)
		}
		subject := f.git(f.dir, "log", "-1", "--format=%s", res.Commit)
		if want := oneLine(id) + ": line one line two"; subject != want {
			t.Fatalf("subject %q, want %q", subject, want)
		}
		again, err := q.Merge(f.ctx, Merge{Task: task, Checkout: c, Check: green})
		if err != nil || !again.Resumed || again.Commit != res.Commit {
			t.Fatalf("%q again: %+v, %v", id, again, err)
		}
	}
	if got := f.commitsSince(tg, tg.Start); len(got) != 3 {
		t.Fatalf("target commits %q", got)
	}
}

// In merge mode a branch that merged the target in is merged from
// there; rebase replays the task's whole diff since it started, which
// then conflicts with what it merged in and changed further.
func TestMergeModeFollowsTheBranchHistory(t *testing.T) {
	t.Parallel()
	for mode, want := range map[Integration]Outcome{IntegrateMerge: Merged, IntegrateRebase: Conflicted} {
		t.Run(string(mode), func(t *testing.T) {
			f := newRepoFixture(t)
			tg := f.target("ralph/b1/merged")
			q := f.queue(tg, mode)
			a := f.checkout(tg, "ralph/b1/task/A", false)
			b := f.checkout(tg, "ralph/b1/task/B", false)
			f.edit(a.Dir, "return a + b", "return b + a")
			f.merge(q, a, "A", green)
			f.git(b.Dir, "merge", "-q", tg.Branch)
			f.edit(b.Dir, "return b + a", "return b + a + 0")
			if rb := f.merge(q, b, "B", green); rb.Outcome != want {
				t.Fatalf("B = %+v, want %v", rb, want)
			}
		})
	}
}

func TestCheckedOutTargetAdvancesLikeFastForward(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("main")
	q := f.queue(tg, IntegrateRebase)
	a := f.checkout(tg, "ralph/b1/task/A", false)
	f.edit(a.Dir, "return a + b", "return b + a")
	ra := f.merge(q, a, "A", green)
	if head := f.git(f.dir, "rev-parse", "HEAD"); head != ra.Commit || f.git(f.dir, "symbolic-ref", "HEAD") != "refs/heads/main" {
		t.Fatalf("main at %s, want A's commit %s", head, ra.Commit)
	}
	if status := f.git(f.dir, "status", "--porcelain"); status != "" || !strings.Contains(f.read(f.dir, "calc.go"), "return b + a") {
		t.Fatalf("the work tree did not follow main: status %q", status)
	}
	// The user changes the tree meanwhile: main does not move, and
	// nothing of theirs is lost.
	b := f.checkout(tg, "ralph/b1/task/B", false)
	f.edit(b.Dir, "return a - b", "return a - b - 0")
	f.write(f.dir, "README.md", "# the user's edit\n")
	_, err := q.Merge(f.ctx, Merge{Task: Task{ID: "B"}, Checkout: b, Check: green})
	if refusal(err) != RefuseDirtyTarget || !strings.Contains(err.Error(), "README.md modified") {
		t.Fatalf("err = %v, want RefuseDirtyTarget naming README.md", err)
	}
	if head := f.git(f.dir, "rev-parse", "HEAD"); head != ra.Commit || f.read(f.dir, "README.md") != "# the user's edit\n" {
		t.Fatalf("main at %s, README %q: the refused advance touched the user's tree", head, f.read(f.dir, "README.md"))
	}
	// Once the tree is clean again B lands.
	f.git(f.dir, "checkout", "--", "README.md")
	if rb := f.merge(q, b, "B", green); rb.Outcome != Merged || f.git(f.dir, "rev-parse", "HEAD") != rb.Commit {
		t.Fatalf("B: %+v", rb)
	}
	if !strings.Contains(f.read(f.dir, "calc.go"), "return a - b - 0") {
		t.Fatal("the work tree did not follow B's commit")
	}
}

func TestMergeRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	c := f.checkout(tg, "ralph/b1/task/A", false)
	for _, tc := range []struct {
		name string
		q    *Queue
		m    Merge
		says string
	}{
		{"no checkout", f.queue(tg, ""), Merge{Task: Task{ID: "A"}, Check: green}, "no checkout"},
		{"no check", f.queue(tg, ""), Merge{Task: Task{ID: "A"}, Checkout: c}, "no Check"},
		{"no scratch", NewQueue(tg, QueueOptions{}), Merge{Task: Task{ID: "A"}, Checkout: c, Check: green}, "no scratch"},
		{"bad mode", NewQueue(tg, QueueOptions{Integrate: "squash", Scratch: t.TempDir()}), Merge{Task: Task{ID: "A"}, Checkout: c, Check: green}, `"squash"`},
		{"scratch in the tree", NewQueue(tg, QueueOptions{Scratch: filepath.Join(f.dir, "s")}), Merge{Task: Task{ID: "A"}, Checkout: c, Check: green}, "inside the repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.q.Merge(f.ctx, tc.m); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want one saying %q", err, tc.says)
			}
		})
	}
	boom := errors.New("the condition could not run")
	q := f.queue(tg, "")
	f.write(c.Dir, "x.txt", "x\n")
	_, err := q.Merge(f.ctx, Merge{Task: Task{ID: "A"}, Checkout: c, Check: func(context.Context, string) (bool, string, error) { return false, "", boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the check's error", err)
	}
	if tip := f.git(f.dir, "rev-parse", tg.Ref); tip != tg.Start {
		t.Fatal("the target moved after the check failed to run")
	}
}

func TestQueueScratchIsReusedAndClosed(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	scratch := filepath.Join(f.home, "scratch")
	q := NewQueue(tg, QueueOptions{Scratch: scratch, Batch: "b1"})
	var dirs []string
	for _, id := range []string{"A", "B"} {
		c := f.checkout(tg, "ralph/b1/task/"+id, false)
		f.write(c.Dir, id+".txt", id)
		f.merge(q, c, id, func(_ context.Context, dir string) (bool, string, error) {
			fi, err := os.Stat(filepath.Join(dir, ".git"))
			dirs = append(dirs, fmt.Sprint(dir, fi.ModTime()))
			return err == nil, "", err
		})
	}
	if dirs[0] != dirs[1] {
		t.Fatalf("the scratch work tree was made anew: %q", dirs)
	}
	if err := q.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) || strings.Contains(f.git(f.dir, "worktree", "list"), scratch) {
		t.Fatalf("scratch still there (%v)", err)
	}
	f.write(scratch, "x", "someone's")
	q = NewQueue(tg, QueueOptions{Scratch: scratch, Batch: "b1"})
	c := f.checkout(tg, "ralph/b1/task/C", false)
	if _, err := q.Merge(f.ctx, Merge{Task: Task{ID: "C"}, Checkout: c, Check: green}); err == nil || !strings.Contains(err.Error(), "is not a work tree of") {
		t.Fatalf("err = %v, want the foreign scratch directory refused", err)
	}
}
