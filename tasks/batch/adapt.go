package batch

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/tasks"
)

// The bindings of the batch's interfaces to the tasks package: thin, so
// that what the batch does is in the batch and what git does is in tasks.

// source is a tasks.Source as the batch's Source; the tasks in
// doneOnTarget (done in the source's file as the target branch has it)
// list as done.
type source struct {
	tasks.Source
	doneOnTarget map[string]bool
}

func (s source) List(ctx context.Context) ([]tasks.Task, error) {
	ts, err := s.Source.List(ctx)
	for i := range ts {
		ts[i].Done = ts[i].Done || s.doneOnTarget[ts[i].ID]
	}
	return ts, err
}

func (s source) MarksInCheckout() bool { return s.Kind().MarksInCheckout }

func (s source) MarkMerged(ctx context.Context, t tasks.Task, n Note) error {
	return s.MarkDone(tasks.WithNote(ctx, tasks.Note{Batch: n.Batch, Commit: n.Commit, Target: n.Target}), "", t)
}

// target is a *tasks.Target as the batch's Target (which makes and
// removes its worktrees one at a time).
type target struct{ t *tasks.Target }

func (t target) Branch() string { return t.t.Branch }

func (t target) Checkout(ctx context.Context, dir, branch string, shared bool) (Checkout, error) {
	c, err := t.t.Checkout(ctx, dir, branch, shared)
	if err != nil {
		return nil, err
	}
	return checkout{c: c}, nil
}

// Take says how the user takes the target: its branch checked out already
// holds the tasks, else a fast-forward merge brings them.
func (t target) Take() string {
	if t.t.CheckedOut != "" {
		return fmt.Sprintf("%s is checked out at %s and holds the merged tasks already", t.t.Branch, t.t.CheckedOut)
	}
	return "git merge --ff-only " + t.t.Branch
}

// checkout is a *tasks.Checkout as the batch's Checkout.
type checkout struct{ c *tasks.Checkout }

func (c checkout) Dir() string { return c.c.Dir }

func (c checkout) Remove(ctx context.Context) error {
	return c.c.Remove(ctx)
}

// queue is a *tasks.Queue as the batch's Merger.
type queue struct{ q *tasks.Queue }

func (q queue) Merge(ctx context.Context, m MergeRequest) (MergeResult, error) {
	c, ok := m.Checkout.(checkout)
	if !ok {
		return MergeResult{}, fmt.Errorf("merge %s: its checkout was not made by the target", m.Task.ID)
	}
	r, err := q.q.Merge(ctx, tasks.Merge{Task: m.Task, Checkout: c.c, Check: m.Check, Edit: m.Edit, Body: m.Body})
	if err != nil {
		return MergeResult{}, err
	}
	return MergeResult{Outcome: r.Outcome, Commit: r.Commit, Evidence: r.Evidence, Conflicts: r.Conflicts, raw: r}, nil
}

func (q queue) Reset(ctx context.Context, c Checkout, r MergeResult) (string, error) {
	cc, ok := c.(checkout)
	if !ok {
		return "", fmt.Errorf("reset: the checkout %s was not made by the target", c.Dir())
	}
	raw, ok := r.raw.(tasks.Result)
	if !ok { // a resumed batch's: rebuilt from the chain
		raw = tasks.Result{Evidence: r.Evidence, Conflicts: r.Conflicts, Outcome: tasks.Conflicted}
		if r.Outcome == Red {
			raw.Outcome = tasks.Red
		}
	}
	return q.q.Reset(ctx, cc.c, raw)
}

func (q queue) Close(ctx context.Context) error { return q.q.Close(ctx) }
