package batch

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/loop"
)

// work takes one task to its end: its checkout, then runs of its loop
// until one is green and the queue merges it, or a run ends otherwise, or
// the queue sent it back more than Retries times. It returns an error only
// when the batch cannot go on (the store refused a record).
func (b *Batch) work(ctx context.Context, t *taskState) error {
	if t.checkout == nil {
		c, err := b.o.Target.Checkout(ctx, filepath.Join(b.o.Dir, "task", t.ref), t.branch, b.o.Shared)
		if err != nil {
			return b.end(ctx, t, "", VerdictError, fmt.Sprintf("make its checkout: %v", err))
		}
		t.checkout = c
	}
	back := ""
	for try := 1; ; try++ {
		cr := b.runChild(ctx, t, try, back)
		b.account(t, cr)
		verdict, why := runVerdict(cr)
		b.emit(Event{Kind: EventRunEnded, Task: t.task.ID, Run: cr.id, Try: try, Verdict: verdict, Why: why, Iteration: iterations(cr)})
		if verdict != VerdictGreen {
			return b.end(ctx, t, cr.id, verdict, why)
		}
		m := MergeRequest{Task: t.task, Checkout: t.checkout, Check: b.check.check, Body: []string{"Ralph-Batch: " + b.id, "Ralph-Run: " + cr.id}}
		if b.o.Source.MarksInCheckout() {
			m.Edit = func(ctx context.Context, dir string) error { return b.o.Source.MarkDone(ctx, dir, t.task) }
		}
		res, err := b.o.Merger.Merge(ctx, m)
		if err != nil {
			if ctx.Err() != nil {
				return b.end(ctx, t, cr.id, VerdictAborted, "stopped while in the merge queue")
			}
			return b.end(ctx, t, cr.id, VerdictError, fmt.Sprintf("merge: %v", err))
		}
		if res.Outcome == Merged {
			return b.merged(ctx, t, cr.id, res.Commit)
		}
		verdict, why = VerdictConflict, conflictWhy(res)
		if res.Outcome == Red {
			verdict, why = VerdictRed, "the conditions fail on the merged tree: "+firstLine(res.Evidence)
		}
		if try > b.o.Retries {
			final := verdict
			if final == VerdictRed {
				final = VerdictFailed
			}
			return b.end(ctx, t, cr.id, final, why)
		}
		if err := b.recordTaskEnded(ctx, t, cr.id, verdict, why, false); err != nil {
			return err
		}
		b.emit(Event{Kind: EventTaskBack, Task: t.task.ID, Run: cr.id, Try: try, Verdict: verdict, Why: why,
			TriesLeft: b.o.Retries + 1 - try, Tries: b.o.Retries + 1})
		if back, err = b.o.Merger.Reset(ctx, t.checkout, res); err != nil {
			return b.end(ctx, t, cr.id, VerdictError, fmt.Sprintf("move its checkout onto the target: %v", err))
		}
		if ctx.Err() != nil {
			return b.end(ctx, t, cr.id, VerdictAborted, "stopped before its next run")
		}
	}
}

// merged ends t as merged as commit: TaskMerged, a source outside the
// repository told (MarkMerged), then its TaskEnded. A source that cannot
// be told leaves the task merged, with why.
func (b *Batch) merged(ctx context.Context, t *taskState, run, commit string) error {
	if err := b.recordTaskMerged(ctx, t, run, commit); err != nil {
		return err
	}
	b.mu.Lock()
	t.commit = commit
	b.mu.Unlock()
	b.emit(Event{Kind: EventTaskMerged, Task: t.task.ID, Title: t.task.Title, Run: run, Commit: commit})
	why := ""
	if !b.o.Source.MarksInCheckout() {
		n := Note{Batch: b.id, Commit: commit, Target: b.o.Target.Branch()}
		if err := b.o.Source.MarkMerged(context.WithoutCancel(ctx), t.task, n); err != nil {
			why = fmt.Sprintf("merged, but %s was not told: %v", b.o.Source.String(), err)
			b.o.Logger.Warn("a merged task's source was not told", "task", t.task.ID, "error", err)
		}
	}
	return b.end(ctx, t, run, VerdictMerged, why)
}

// end ends t with verdict: its final TaskEnded, its state, the batch's
// record.
func (b *Batch) end(ctx context.Context, t *taskState, run, verdict, why string) error {
	b.mu.Lock()
	t.state, t.why = verdict, why
	b.mu.Unlock()
	b.emit(Event{Kind: EventTaskEnded, Task: t.task.ID, Title: t.task.Title, Run: run, Verdict: verdict, Why: why, Commit: t.commit})
	if err := b.recordTaskEnded(ctx, t, run, verdict, why, true); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.saveRecord(ctx, loop.StateRunning, nil)
}

// account adds a run's iterations and spend to its task's.
func (b *Batch) account(t *taskState, cr childRun) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t.runs = append(t.runs, cr.id)
	if cr.out != nil {
		t.iterations += cr.out.Iterations
		t.cost += cr.out.CostUSD
		t.tokens += cr.out.Tokens
	}
}

// iterations is how many iterations a run had (0 when it could not run).
func iterations(cr childRun) int {
	if cr.out == nil {
		return 0
	}
	return cr.out.Iterations
}

// conflictWhy names the paths a merge conflicted on.
func conflictWhy(res MergeResult) string {
	if len(res.Conflicts) == 0 {
		return "its work does not apply on the target's tip: " + firstLine(res.Evidence)
	}
	return "its work conflicts with the target's tip in " + strings.Join(res.Conflicts, ", ")
}

// firstLine is the first non-empty line of s.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
