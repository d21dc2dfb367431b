package batch

import (
	"context"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// Summary is how a batch ended: each task's end, the target, and the exit
// status (DESIGN §3): 0 every task merged, 1 a task failed, conflicted,
// was blocked or could not run, 3 a limit stopped a task, 4 the user
// stopped the batch.
type Summary struct {
	ID       string        `json:"batch"`
	Source   string        `json:"source"`
	Target   string        `json:"target"`
	Tasks    []TaskSummary `json:"tasks"`
	State    string        `json:"state"` // a loop.State*: done, failed, stopped, aborted
	Class    stop.Class    `json:"class"`
	Reason   string        `json:"reason"`
	ExitCode int           `json:"exit_code"`
	// Take is the command that takes the target into the user's branch.
	Take string `json:"take"`
}

// TaskSummary is one task's end.
type TaskSummary struct {
	ID         string   `json:"id"`
	Title      string   `json:"title"`
	Verdict    string   `json:"verdict"`
	Why        string   `json:"why,omitempty"`
	Commit     string   `json:"commit,omitempty"`
	Runs       []string `json:"runs"`
	Iterations int      `json:"iterations"`
	CostUSD    float64  `json:"cost_usd"`
}

// finish sums the batch up, marks the tasks that never started (blocked
// by a dependency that did not merge, or queued when the batch was
// stopped), and saves the batch's final record.
func (b *Batch) finish(ctx context.Context) (*Summary, error) {
	if err := b.o.Merger.Close(context.WithoutCancel(ctx)); err != nil {
		b.o.Logger.Warn("the merge queue's scratch tree was not removed", "error", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &Summary{ID: b.id, Source: b.o.Source.String(), Target: b.o.Target.Branch()}
	count := map[string]int{}
	for _, t := range b.tasks {
		if t.state == VerdictQueued && ctx.Err() == nil {
			t.state, t.why = VerdictBlocked, "a task it depends on did not merge: "+strings.Join(t.task.DependsOn, ", ")
		}
		count[t.state]++
		s.Tasks = append(s.Tasks, TaskSummary{ID: t.task.ID, Title: t.task.Title, Verdict: t.state, Why: t.why, Commit: t.commit,
			Runs: t.runs, Iterations: t.iterations, CostUSD: t.cost})
	}
	s.State, s.Class, s.ExitCode = loop.StateDone, stop.ClassSuccess, loop.ExitSuccess
	switch {
	case ctx.Err() != nil || count[VerdictAborted] > 0:
		s.State, s.Class, s.ExitCode = loop.StateAborted, stop.ClassAbort, loop.ExitAborted
	case count[VerdictFailed]+count[VerdictConflict]+count[VerdictBlocked]+count[VerdictError] > 0:
		s.State, s.Class, s.ExitCode = loop.StateFailed, stop.ClassFailure, loop.ExitFailure
	case count[VerdictStopped] > 0:
		s.State, s.Class, s.ExitCode = loop.StateStopped, stop.ClassLimit, loop.ExitLimit
	}
	s.Reason = countLine(count, len(b.tasks))
	s.Take = "git merge --ff-only " + s.Target
	if tk, ok := b.o.Target.(interface{ Take() string }); ok {
		s.Take = tk.Take()
	}
	if count[VerdictMerged] == 0 {
		s.Take = "nothing: no task merged"
	}
	if err := b.saveRecord(ctx, s.State, s); err != nil {
		return nil, err
	}
	return s, nil
}

// verdictOrder is the order countLine names verdicts in.
var verdictOrder = []string{VerdictMerged, VerdictFailed, VerdictConflict, VerdictStopped, VerdictBlocked, VerdictError, VerdictAborted, VerdictQueued}

// countLine says how many tasks ended each way: "2 of 3 merged, 1 conflict".
func countLine(count map[string]int, n int) string {
	parts := []string{fmt.Sprintf("%d of %d merged", count[VerdictMerged], n)}
	for _, v := range verdictOrder[1:] {
		if count[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[v], v))
		}
	}
	return strings.Join(parts, ", ")
}
