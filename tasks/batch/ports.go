package batch

import (
	"context"

	"github.com/ralphloop/ralph/tasks"
)

// The batch reaches a task source, the target branch and the merge queue
// through the small interfaces below, the method sets it uses of the tasks
// package's Source, Target and Queue; adapt.go binds them to those.

// Source is a backlog the batch works through: it lists the tasks, and
// marks one done, never before its conditions held on the merged tree.
type Source interface {
	List(ctx context.Context) ([]tasks.Task, error)
	String() string
	// MarksInCheckout says the source marks a task done in the merge
	// checkout (a file of the repository, bd close), so that the change
	// rides in the task's commit: MarkDone, through the queue's Edit.
	// Otherwise (a GitHub issue) MarkMerged marks it once the target has
	// moved.
	MarksInCheckout() bool
	MarkDone(ctx context.Context, dir string, t tasks.Task) error
	MarkMerged(ctx context.Context, t tasks.Task, n Note) error
}

// Note is what a source that marks a task done after its merge is told.
type Note struct {
	Batch, Commit, Target string
}

// Target is the branch merged tasks land on, and where task checkouts are
// made from.
type Target interface {
	// Branch is the target branch's name.
	Branch() string
	// Checkout makes (or, resuming, finds) a task's checkout at dir on
	// branch, from the target's tip: a git worktree, or a clone --shared
	// when shared (a sandboxed run's agent must not reach the user's .git).
	Checkout(ctx context.Context, dir, branch string, shared bool) (Checkout, error)
}

// Checkout is one task's working copy.
type Checkout interface {
	// Dir is the checkout's top directory.
	Dir() string
	// Remove deletes it; its branch stays, with what was committed on it.
	Remove(ctx context.Context) error
}

// Merger is the merge queue: it integrates one task at a time on the
// target's tip in a scratch tree, re-runs the conditions there, and
// advances the target only when they hold.
type Merger interface {
	Merge(ctx context.Context, m MergeRequest) (MergeResult, error)
	// Reset moves a task's checkout onto the target's tip after a conflict
	// or a red re-run, and returns what its next prompt says of it.
	Reset(ctx context.Context, c Checkout, r MergeResult) (string, error)
	// Close removes what the queue made for its merges (its scratch tree).
	Close(ctx context.Context) error
}

// MergeRequest is one task's work offered to the queue.
type MergeRequest struct {
	Task     tasks.Task
	Checkout Checkout
	// Check re-runs the batch's conditions in dir, the integrated tree.
	Check func(ctx context.Context, dir string) (ok bool, evidence string, err error)
	// Edit marks the task done in dir, the merge checkout, before the
	// commit that lands it.
	Edit func(ctx context.Context, dir string) error
	// Body are the lines of the commit message's body: the batch and run
	// it came from.
	Body []string
}

// MergeOutcome is what the queue did with a task's work: the tasks
// package's Outcome.
type MergeOutcome = tasks.Outcome

// Merge outcomes.
const (
	Merged     = tasks.Merged     // the target advanced by the task's commit
	Conflicted = tasks.Conflicted // the work does not apply on the target's tip
	Red        = tasks.Red        // it applies, but the conditions do not hold there
)

// MergeResult is the queue's answer for one task.
type MergeResult struct {
	Outcome   MergeOutcome
	Commit    string   // the target's new commit (Merged)
	Evidence  string   // the conflict or the failing conditions (Conflicted, Red)
	Conflicts []string // the conflicting paths (Conflicted)

	raw any // the queue's own answer, which its Reset takes back
}
