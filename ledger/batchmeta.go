package ledger

// The metadata a batch of tasks records (DESIGN §23, docs/ledger.md §3.2),
// named once here so that the batch runner that writes it and the readers
// that show it (the UI's batch view) spell it the same way. Every batch
// action is on the batch's own run id and names its task's child run;
// each child run's RunStarted names its batch.
const (
	// MetaBatch is, on a task's RunStarted, the id of the batch run it is
	// a task of.
	MetaBatch = "batch"

	// BatchStarted: where the tasks come from, where they land, and how
	// the batch runs them.
	MetaBatchSource    = "source"    // the task source, as the user named it (also on TaskStarted)
	MetaBatchTarget    = "target"    // the branch merged tasks land on
	MetaBatchTasks     = "tasks"     // how many tasks the backlog holds
	MetaBatchParallel  = "parallel"  // how many tasks run at once
	MetaBatchRetries   = "retries"   // how many times a conflict or a red re-run goes back to its loop
	MetaBatchAttempts  = "attempts"  // how many loops work on each task (best of K)
	MetaBatchIntegrate = "integrate" // how the queue puts a task onto the target: rebase or merge
	MetaBatchShared    = "shared"    // true: each checkout is a git clone --shared, not a worktree
	MetaBatchDir       = "dir"       // the batch's directory: its checkouts and the queue's scratch tree
	MetaBatchConfig    = "config"    // the loop's config, as its snapshot (what resume reads)

	// TaskStarted (one per child run of a task), TaskEnded (how that run
	// ended) and TaskMerged (the queue landed the task).
	MetaTask         = "task"     // the task's id in its source
	MetaTaskTitle    = "title"    // TaskStarted: the task's title
	MetaTaskRun      = "run"      // the child run's id
	MetaTaskTry      = "try"      // TaskStarted: which run of the attempt, from 1
	MetaTaskAttempt  = "attempt"  // TaskStarted: which attempt, from 1
	MetaTaskBranch   = "branch"   // TaskStarted: the branch the run works on
	MetaTaskCheckout = "checkout" // TaskStarted: the run's checkout
	MetaTaskResumed  = "resumed"  // TaskStarted: true when the run resumes one that was cut short
	MetaTaskVerdict  = "verdict"  // TaskEnded: how the run ended (a TaskVerdict*)
	MetaTaskWhy      = "why"      // TaskEnded: why, in a sentence
	MetaTaskFinal    = "final"    // TaskEnded: true when the task's attempt is over; false: it goes back to its loop
	MetaTaskCommit   = "commit"   // TaskMerged: the target's new commit
)

// The verdicts of a task's run (TaskEnded's verdict) and of a task. A
// TaskEnded holds merged, conflict, red, failed, stopped, aborted, error or
// cancelled; green (the run's conditions held: it goes to the merge
// queue), blocked and queued are said of a task, never recorded.
const (
	TaskVerdictGreen     = "green"     // its run's success conditions held: it goes to the merge queue
	TaskVerdictMerged    = "merged"    // it is on the target
	TaskVerdictConflict  = "conflict"  // its work did not apply on the target's tip
	TaskVerdictRed       = "red"       // it applied, but the conditions failed on the merged tree
	TaskVerdictFailed    = "failed"    // its run ended in failure, or its re-runs stayed red
	TaskVerdictStopped   = "stopped"   // its run hit a limit (max_iterations, max_cost, …) before success
	TaskVerdictAborted   = "aborted"   // the user stopped the batch while it ran
	TaskVerdictBlocked   = "blocked"   // a task it depends on did not merge
	TaskVerdictQueued    = "queued"    // it never started: the batch was stopped first
	TaskVerdictError     = "error"     // ralph could not run or merge it (its why says what)
	TaskVerdictCancelled = "cancelled" // a run of an attempt another attempt's merge made moot
)
