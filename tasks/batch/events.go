package batch

import (
	"time"

	"github.com/ralphloop/ralph/ledger"
)

// EventKind says what happened to a batch or one of its tasks.
type EventKind int

// Event kinds, in the order a task meets them.
const (
	EventBatchStarted EventKind = iota + 1
	EventTaskStarted            // a child run of the task began
	EventIteration              // an iteration of a task's run ended
	EventRunEnded               // a task's run ended; Verdict is how (green: it goes to the merge queue)
	EventTaskMerged             // the queue landed the task on the target as Commit
	EventTaskBack               // a conflict or a red re-run sends the task back to its loop
	EventTaskEnded              // the task is over; Verdict is its end
)

var eventNames = map[EventKind]string{
	EventBatchStarted: "batch_started", EventTaskStarted: "task_started", EventIteration: "iteration",
	EventRunEnded: "run_ended", EventTaskMerged: "task_merged", EventTaskBack: "task_back", EventTaskEnded: "task_ended",
}

// String is the event's name in --json output ("task_started").
func (k EventKind) String() string { return eventNames[k] }

// Verdicts: how a task's run ended, and how a task ended.
const (
	VerdictGreen     = ledger.TaskVerdictGreen     // its run's success conditions held: it goes to the merge queue
	VerdictMerged    = ledger.TaskVerdictMerged    // it is on the target
	VerdictConflict  = ledger.TaskVerdictConflict  // its work did not apply on the target's tip
	VerdictRed       = ledger.TaskVerdictRed       // it applied, but the conditions failed on the merged tree
	VerdictFailed    = ledger.TaskVerdictFailed    // its run ended in failure, or its re-runs stayed red
	VerdictStopped   = ledger.TaskVerdictStopped   // its run hit a limit (max_iterations, max_cost, …) before success
	VerdictAborted   = ledger.TaskVerdictAborted   // the user stopped the batch while it ran
	VerdictBlocked   = ledger.TaskVerdictBlocked   // a task it depends on did not merge
	VerdictQueued    = ledger.TaskVerdictQueued    // it never started: the batch was stopped first
	VerdictError     = ledger.TaskVerdictError     // ralph could not run or merge it (its why says what)
	VerdictCancelled = ledger.TaskVerdictCancelled // a run of an attempt another attempt's merge made moot
)

// Event is one thing that happened to a batch or a task, for a printer.
type Event struct {
	Kind  EventKind
	Time  time.Time
	Batch string
	// Task and Title name the task (empty for EventBatchStarted).
	Task, Title string
	Run         string // the task's child run
	Try         int    // which run of the attempt (1 for the first)
	Attempt     int    // which attempt (1 unless Attempts > 1)
	Verdict     string
	Why         string // why it ended as it did, or what sends it back
	Commit      string // EventTaskMerged: the target's new commit
	Iteration   int    // EventIteration: its number; EventRunEnded: the run's iterations
	Status      string // EventIteration: how it ended (ok, failed, …)
	CostUSD     float64
	// EventBatchStarted: the batch's shape.
	Source, Target   string
	Tasks, Parallel  int
	Attempts         int
	Resumed          bool // EventBatchStarted: the batch resumes; EventTaskStarted: the run resumes
	Retries          int
	Integrate        string
	TriesLeft, Tries int // EventTaskBack: runs left, of how many
}
