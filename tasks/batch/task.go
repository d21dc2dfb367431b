package batch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ralphloop/ralph/loop"
)

// attempt is one loop working on a task: with Attempts = K a task has K,
// each in its own checkout on its own branch.
type attempt struct {
	k        int // from 1
	branch   string
	dir      string
	checkout Checkout
}

// attemptEnd is how an attempt ended: its last run, and that run's
// verdict (merged: the task is on the target as commit).
type attemptEnd struct {
	run, verdict, why, commit string
}

// attempts are t's attempts: one on ralph/<batch>/task/<ref> in
// task/<ref>, or, with Attempts = K > 1, K on .../<ref>/<k> in
// task/<ref>/<k>.
func (b *Batch) attempts(t *taskState) []*attempt {
	n := max(b.o.Attempts, 1)
	dir := filepath.Join(b.o.Dir, "task", t.ref)
	if n == 1 {
		return []*attempt{{k: 1, branch: t.branch, dir: dir}}
	}
	out := make([]*attempt, n)
	for i := range out {
		k := strconv.Itoa(i + 1)
		out[i] = &attempt{k: i + 1, branch: t.branch + "/" + k, dir: filepath.Join(dir, k)}
	}
	return out
}

// work takes one task to its end: its attempts run side by side; the
// first one the queue merges wins and the others are cancelled
// (superseded). It returns an error only when the batch cannot go on (the
// store refused a record).
func (b *Batch) work(ctx context.Context, t *taskState) error {
	as := b.attempts(t)
	if len(as) == 1 {
		end, err := b.attempt(ctx, t, as[0])
		if err != nil {
			return err
		}
		b.removeCheckouts(ctx, end, as)
		return b.endTask(ctx, t, end)
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ends := make([]attemptEnd, len(as))
	errs := make([]error, len(as))
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ends[i], errs[i] = b.attempt(actx, t, a)
			if ends[i].verdict == VerdictMerged {
				cancel(&loop.Cancelled{By: loop.CancelSuperseded, Reason: fmt.Sprintf("attempt %d of task %s merged first", a.k, t.task.ID)})
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	end := bestEnd(ends)
	b.removeCheckouts(ctx, end, as)
	return b.endTask(ctx, t, end)
}

// removeCheckouts removes a merged task's checkouts: its work is on the
// target, its branches stay. A task that did not merge keeps them, for
// the user to look at (its TaskStarted names them).
func (b *Batch) removeCheckouts(ctx context.Context, end attemptEnd, as []*attempt) {
	if end.verdict != VerdictMerged {
		return
	}
	for _, a := range as {
		if a.checkout == nil {
			continue
		}
		if err := a.checkout.Remove(context.WithoutCancel(ctx)); err != nil {
			b.o.Logger.Warn("a merged task's checkout was not removed", "dir", a.checkout.Dir(), "error", err)
		}
	}
}

// bestEnd is the end a task with several attempts takes: the merged one,
// else the one that got furthest (a conflict or a red re-run, then a
// failure, a limit, an error, an abort), the first of equals.
func bestEnd(ends []attemptEnd) attemptEnd {
	rank := map[string]int{VerdictMerged: 0, VerdictConflict: 1, VerdictFailed: 2, VerdictStopped: 3, VerdictError: 4, VerdictAborted: 5, VerdictCancelled: 6}
	best := ends[0]
	for _, e := range ends[1:] {
		if rank[e.verdict] < rank[best.verdict] {
			best = e
		}
	}
	return best
}

// attempt runs one attempt: its checkout, then runs of its loop until one
// is green and the queue merges it, or a run ends otherwise, or the queue
// sent it back more than Retries times. Each run ends with its TaskEnded.
func (b *Batch) attempt(ctx context.Context, t *taskState, a *attempt) (attemptEnd, error) {
	if a.checkout == nil {
		c, err := b.o.Target.Checkout(ctx, a.dir, a.branch, b.o.Shared)
		if err != nil {
			return b.endRun(ctx, t, "", VerdictError, fmt.Sprintf("make its checkout: %v", err), true)
		}
		a.checkout = c
	}
	try, resume, back, end, err := b.resumePoint(ctx, t, a)
	switch {
	case err != nil:
		return b.endRun(ctx, t, "", VerdictError, fmt.Sprintf("move its checkout onto the target: %v", err), true)
	case end != nil:
		return *end, nil
	}
	for ; ; try++ {
		if err := b.takeSlot(ctx, t); err != nil {
			return b.endRun(ctx, t, "", VerdictAborted, "stopped before its next run", true)
		}
		cr := b.runChild(ctx, t, a, try, back, resume)
		resume = ""
		b.account(t, cr)
		verdict, why := runVerdict(ctx, cr)
		b.emit(Event{Kind: EventRunEnded, Task: t.task.ID, Run: cr.id, Try: try, Attempt: a.k, Verdict: verdict, Why: why, Iteration: iterations(cr)})
		if verdict != VerdictGreen {
			return b.endRun(ctx, t, cr.id, verdict, why, true)
		}
		b.giveSlot(t) // while it waits in the queue, another loop may run
		res, lost, err := b.merge(ctx, t, a, cr.id)
		switch {
		case lost:
			why := "another attempt of the task merged first"
			b.emit(Event{Kind: EventRunEnded, Task: t.task.ID, Run: cr.id, Try: try, Attempt: a.k, Verdict: VerdictCancelled, Why: why})
			return b.endRun(ctx, t, cr.id, VerdictCancelled, why, true)
		case err != nil && ctx.Err() != nil:
			return b.endRun(ctx, t, cr.id, VerdictAborted, "stopped while in the merge queue", true)
		case err != nil:
			return b.endRun(ctx, t, cr.id, VerdictError, fmt.Sprintf("merge: %v", err), true)
		case res.Outcome == Merged:
			return b.merged(ctx, t, cr.id, res.Commit)
		}
		verdict, why = queueVerdict(res)
		if try > b.o.Retries {
			if verdict == VerdictRed {
				verdict = VerdictFailed
			}
			return b.endRun(ctx, t, cr.id, verdict, why, true)
		}
		if _, err := b.endRun(ctx, t, cr.id, verdict, why, false); err != nil {
			return attemptEnd{}, err
		}
		b.emit(Event{Kind: EventTaskBack, Task: t.task.ID, Run: cr.id, Try: try, Attempt: a.k, Verdict: verdict, Why: why,
			TriesLeft: b.o.Retries + 1 - try, Tries: b.o.Retries + 1})
		if back, err = b.o.Merger.Reset(ctx, a.checkout, res); err != nil {
			return b.endRun(ctx, t, cr.id, VerdictError, fmt.Sprintf("move its checkout onto the target: %v", err), true)
		}
		if ctx.Err() != nil {
			return b.endRun(ctx, t, cr.id, VerdictAborted, "stopped before its next run", true)
		}
	}
}

// takeSlot takes a slot for t's next run unless it holds one.
func (b *Batch) takeSlot(ctx context.Context, t *taskState) error {
	if t.slot {
		return nil
	}
	if err := b.slots.take(ctx); err != nil {
		return err
	}
	t.slot = true
	return nil
}

// giveSlot gives t's slot back while it waits in the merge queue, when
// it has one attempt (a task with several holds its slot throughout: its
// attempts share it).
func (b *Batch) giveSlot(t *taskState) {
	if t.slot && max(b.o.Attempts, 1) == 1 {
		t.slot = false
		b.slots.give()
	}
}

// merge offers an attempt's green work to the queue, unless another
// attempt of the task has merged already (lost). One attempt of a task
// is in the queue at a time, so only one can win.
func (b *Batch) merge(ctx context.Context, t *taskState, a *attempt, run string) (res MergeResult, lost bool, err error) {
	t.mergeMu.Lock()
	defer t.mergeMu.Unlock()
	if t.won {
		return MergeResult{}, true, nil
	}
	m := MergeRequest{Task: t.task, Checkout: a.checkout, Check: b.check.check, Body: []string{"Ralph-Batch: " + b.id, "Ralph-Run: " + run}}
	if b.o.Source.MarksInCheckout() {
		m.Edit = func(ctx context.Context, dir string) error { return b.o.Source.MarkDone(ctx, dir, t.task) }
	}
	res, err = b.o.Merger.Merge(ctx, m)
	if t.won = err == nil && res.Outcome == Merged; t.won { // said before another attempt learns it lost
		err = b.recordTaskMerged(ctx, t, run, res.Commit)
		b.emit(Event{Kind: EventTaskMerged, Task: t.task.ID, Title: t.task.Title, Run: run, Attempt: a.k, Commit: res.Commit})
	}
	return res, false, err
}

// merged ends an attempt whose run the queue merged as commit (merge
// recorded its TaskMerged): a source outside the repository told
// (MarkMerged), then its TaskEnded. A source that cannot be told leaves
// the task merged, with why.
func (b *Batch) merged(ctx context.Context, t *taskState, run, commit string) (attemptEnd, error) {
	why := ""
	if !b.o.Source.MarksInCheckout() {
		n := Note{Batch: b.id, Commit: commit, Target: b.o.Target.Branch()}
		if err := b.o.Source.MarkMerged(context.WithoutCancel(ctx), t.task, n); err != nil {
			why = fmt.Sprintf("merged, but %s was not told: %v", b.o.Source.String(), err)
			b.o.Logger.Warn("a merged task's source was not told", "task", t.task.ID, "error", err)
		}
	}
	end, err := b.endRun(ctx, t, run, VerdictMerged, why, true)
	end.commit = commit
	return end, err
}

// endRun records how one run of t ended (final: its attempt is over).
func (b *Batch) endRun(ctx context.Context, t *taskState, run, verdict, why string, final bool) (attemptEnd, error) {
	return attemptEnd{run: run, verdict: verdict, why: why}, b.recordTaskEnded(ctx, t, run, verdict, why, final)
}

// endTask ends t as end says: its state, its event, the batch's record.
func (b *Batch) endTask(ctx context.Context, t *taskState, end attemptEnd) error {
	b.mu.Lock()
	t.state, t.why, t.commit = end.verdict, end.why, end.commit
	b.mu.Unlock()
	b.emit(Event{Kind: EventTaskEnded, Task: t.task.ID, Title: t.task.Title, Run: end.run, Verdict: end.verdict, Why: end.why, Commit: end.commit})
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.saveRecord(ctx, loop.StateRunning, nil)
}

// account adds a run's iterations and spend to its task's.
func (b *Batch) account(t *taskState, cr childRun) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(t.runs, cr.id) {
		t.runs = append(t.runs, cr.id)
	}
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

// queueVerdict is the verdict of a merge that did not land, and why:
// the paths it conflicted on, or the first line of what failed.
func queueVerdict(res MergeResult) (verdict, why string) {
	switch {
	case res.Outcome == Red:
		return VerdictRed, "the conditions fail on the merged tree: " + firstLine(res.Evidence)
	case len(res.Conflicts) == 0:
		return VerdictConflict, "its work does not apply on the target's tip: " + firstLine(res.Evidence)
	}
	return VerdictConflict, "its work conflicts with the target's tip in " + strings.Join(res.Conflicts, ", ")
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
