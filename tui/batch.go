package tui

import (
	"slices"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// batch is a batch run as the chain tells it (DESIGN §23): BatchStarted,
// TaskStarted, TaskEnded and TaskMerged on the batch's own run, and the
// actions of the task runs they name, from which it takes each run's
// iterations, spend, times and end. It keeps a few fields per task and
// run, never an action, so it costs the same live and recorded.
type batch struct {
	id                                 string
	source, target, integrate          string
	total, parallel, retries, attempts int
	started, last                      time.Time
	tasks                              []*batchTask // in the order they first started
	byID                               map[string]*batchTask
	runs                               map[string]*taskRun
	ver                                int       // bumped by every change, for the rows' cache
	end                                *batchEnd // from the batch's record once it ended; nil before, or when it has none
}

// batchTask is one task of the batch: its runs (several when the merge
// queue sent it back, or with attempts) and the commit it landed as.
type batchTask struct {
	id, title string
	runs      []*taskRun // in the order they started
	commit    string     // TaskMerged: the target's commit
	first     time.Time  // its first TaskStarted
	endAt     time.Time  // its latest TaskEnded
	ver       int        // bumped when it or one of its runs changes, for its row
}

// taskRun is one child run of a task: what its TaskStarted and TaskEnded
// say of it, and what its own actions do.
type taskRun struct {
	id           string // "" for a TaskEnded that names no run (its checkout could not be made)
	task         *batchTask
	try, attempt int
	seq          uint64    // its first TaskStarted's: the run's own actions come after it
	last         uint64    // the seq of its latest action seen
	started      time.Time // its RunStarted (its TaskStarted until then)
	iteration    int
	cost         float64
	closed       time.Time // its closing action
	state        string    // how it closed (loop.StateDone…); "" while it runs
	reason       string    // its closing action's condition and reason
	whys         string    // its latest evaluation's whys (stop.Brief), while it runs
	verdict, why string    // its TaskEnded's; "" before
	final        bool      // its TaskEnded said the attempt is over
	endedAt      time.Time // its TaskEnded
}

// batchEnd is how the batch ended, from its record (ralph runs).
type batchEnd struct {
	state, class, reason string
	at                   time.Time
}

// Task and run states the view shows beside the recorded verdicts: a run
// that works, one whose conditions held waiting for the merge queue, one
// the queue sent back to its loop, and one the batch left running when it
// was cut short.
const (
	taskRunning     = "running"
	taskMerging     = "merging"
	taskBack        = "back"
	taskInterrupted = "interrupted"
)

func newBatch(id string) *batch {
	return &batch{id: id, byID: map[string]*batchTask{}, runs: map[string]*taskRun{}}
}

// isTaskRun reports whether a belongs to one of the batch's task runs.
func (b *batch) isTaskRun(runID string) bool { return b.runs[runID] != nil }

// observe takes one action of the batch or of one of its task runs; it
// reports whether the action was the batch's.
func (b *batch) observe(a *ledger.Action) bool {
	switch {
	case a.RunID == b.id:
		b.own(a)
	case b.runs[a.RunID] != nil:
		r := b.runs[a.RunID]
		r.observe(a)
		r.task.ver++
	default:
		return false
	}
	if a.Timestamp.After(b.last) {
		b.last = a.Timestamp
	}
	b.ver++
	return true
}

// own takes one of the batch's own actions.
func (b *batch) own(a *ledger.Action) {
	md := a.Metadata
	switch a.Type {
	case ledger.BatchStarted:
		b.source, b.target, b.integrate = md[ledger.MetaBatchSource].Str(), md[ledger.MetaBatchTarget].Str(), md[ledger.MetaBatchIntegrate].Str()
		b.total, b.parallel = int(md[ledger.MetaBatchTasks].AsInt()), int(md[ledger.MetaBatchParallel].AsInt())
		b.retries, b.attempts = int(md[ledger.MetaBatchRetries].AsInt()), int(md[ledger.MetaBatchAttempts].AsInt())
		if b.started.IsZero() { // a resumed batch records it again: it started with the first
			b.started = a.Timestamp
		}
	case ledger.TaskStarted:
		t := b.task(md[ledger.MetaTask].Str(), a.Timestamp)
		if title := md[ledger.MetaTaskTitle].Str(); title != "" {
			t.title = title
		}
		id := md[ledger.MetaTaskRun].Str()
		r := b.runs[id]
		if r == nil {
			r = &taskRun{id: id, task: t, seq: a.Seq, started: a.Timestamp}
			b.runs[id] = r
			t.runs = append(t.runs, r)
		}
		// A run that resumes under its id works again: its earlier end is void.
		r.try, r.attempt = int(md[ledger.MetaTaskTry].AsInt()), int(md[ledger.MetaTaskAttempt].AsInt())
		r.verdict, r.why, r.final, r.state, r.reason, r.closed, r.endedAt = "", "", false, "", "", time.Time{}, time.Time{}
	case ledger.TaskEnded:
		t := b.task(md[ledger.MetaTask].Str(), a.Timestamp)
		r := b.runs[md[ledger.MetaTaskRun].Str()]
		if r == nil { // no run: the task could not start one
			r = &taskRun{task: t, seq: a.Seq, started: a.Timestamp}
			t.runs = append(t.runs, r)
		}
		r.verdict, r.why, r.final = md[ledger.MetaTaskVerdict].Str(), md[ledger.MetaTaskWhy].Str(), md[ledger.MetaTaskFinal].AsBool()
		r.endedAt, t.endAt = a.Timestamp, a.Timestamp
	case ledger.TaskMerged:
		b.task(md[ledger.MetaTask].Str(), a.Timestamp).commit = md[ledger.MetaTaskCommit].Str()
	}
	if t := b.byID[md[ledger.MetaTask].Str()]; t != nil && a.Type != ledger.BatchStarted {
		t.ver++
	}
}

// task is the task named id, made when the batch first names it.
func (b *batch) task(id string, at time.Time) *batchTask {
	t := b.byID[id]
	if t == nil {
		t = &batchTask{id: id, first: at}
		b.byID[id] = t
		b.tasks = append(b.tasks, t)
	}
	return t
}

// observe takes one action of the run: its start, iterations, spend,
// evaluations and end.
func (r *taskRun) observe(a *ledger.Action) {
	r.last = max(r.last, a.Seq)
	switch a.Type {
	case ledger.RunStarted:
		r.started = a.Timestamp
	case ledger.IterationStarted:
		r.iteration = max(r.iteration, int(a.Metadata["iteration"].AsInt()))
	case ledger.CapabilityCall, ledger.PlanGenerated: // what a run spends, as the run view sums it
		r.cost += a.Cost
	case ledger.StopConditionsEvaluated:
		if ev, err := stop.EvaluationFromAction(a); err == nil {
			r.whys = stop.Brief{Eval: &ev}.Whys()
		}
	case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
		r.closed, r.state = a.Timestamp, runEndState(a.Type)
		r.reason = a.Metadata["condition"].Str()
		if why := a.Metadata["reason"].Str(); why != "" {
			r.reason += ": " + why
		}
	}
}

// status is where the run stands: its verdict once the batch recorded
// one, back when the queue sent it back to its loop, merging while its
// green end waits for the queue, else running.
func (r *taskRun) status() string {
	switch {
	case r.verdict != "" && r.final:
		return r.verdict
	case r.verdict != "":
		return taskBack
	case r.state == loop.StateDone:
		return taskMerging
	}
	return taskRunning
}

// workRank orders the statuses of a task at work: the one furthest along
// is the task's.
var workRank = map[string]int{taskBack: 1, taskRunning: 2, taskMerging: 3}

// active reports whether a status is one of a task still at work.
func active(status string) bool { return workRank[status] > 0 }

// endRank orders the ends of a task's attempts as the batch picks the
// task's: merged, then the end that got furthest, the first of equals.
var endRank = map[string]int{ledger.TaskVerdictMerged: 0, ledger.TaskVerdictConflict: 1, ledger.TaskVerdictRed: 2,
	ledger.TaskVerdictFailed: 3, ledger.TaskVerdictStopped: 4, ledger.TaskVerdictError: 5, ledger.TaskVerdictAborted: 6,
	ledger.TaskVerdictCancelled: 7}

// status is where the task stands: merged once the queue landed it;
// while an attempt works, the furthest along (in the merge queue, running,
// back to its loop); else the best end of its attempts.
func (t *batchTask) status() string {
	if t.commit != "" {
		return ledger.TaskVerdictMerged
	}
	work, end := "", ""
	for i, r := range t.runs {
		if slices.ContainsFunc(t.runs[i+1:], func(x *taskRun) bool { return x.attempt == r.attempt }) {
			continue // its attempt has a later run
		}
		s := r.status()
		if w := workRank[s]; w > 0 {
			if w > workRank[work] {
				work = s
			}
			continue
		}
		if end == "" || rankOf(s) < rankOf(end) {
			end = s
		}
	}
	if work != "" {
		return work
	}
	return end
}

func rankOf(verdict string) int {
	if r, ok := endRank[verdict]; ok {
		return r
	}
	return len(endRank)
}

// last is the task's run the view opens: the run that merged, else the
// one that started last.
func (t *batchTask) last() *taskRun {
	for _, r := range t.runs {
		if r.verdict == ledger.TaskVerdictMerged {
			return r
		}
	}
	for i := len(t.runs) - 1; i >= 0; i-- {
		if t.runs[i].id != "" {
			return t.runs[i]
		}
	}
	return nil
}

// latest is the task's run that says how it stands: the run that merged,
// else the one that started (or ended without a run) last.
func (t *batchTask) latest() *taskRun {
	if r := t.last(); r != nil && r.verdict == ledger.TaskVerdictMerged {
		return r
	}
	if len(t.runs) == 0 {
		return nil
	}
	return t.runs[len(t.runs)-1]
}

// figures are the task's iterations and spend, summed over its runs.
func (t *batchTask) figures() (iterations int, cost float64) {
	for _, r := range t.runs {
		iterations += r.iteration
		cost += r.cost
	}
	return iterations, cost
}

// elapsed is how long the task has worked: from its first run's start to
// its end, or to now while it works.
func (t *batchTask) elapsed(now time.Time) time.Duration {
	if !active(t.status()) && !t.endAt.IsZero() {
		return t.endAt.Sub(t.first)
	}
	return now.Sub(t.first)
}

// elapsed is how long the run has worked: to its closing action, its
// TaskEnded, or now.
func (r *taskRun) elapsed(now time.Time) time.Duration {
	switch {
	case !r.closed.IsZero():
		return r.closed.Sub(r.started)
	case !r.endedAt.IsZero():
		return r.endedAt.Sub(r.started)
	}
	return now.Sub(r.started)
}

// count is how many tasks stand at each status.
func (b *batch) count() map[string]int {
	n := map[string]int{}
	for _, t := range b.tasks {
		n[t.status()]++
	}
	return n
}

// notStarted is how many of the batch's tasks no run has worked on yet:
// queued while the batch goes on, blocked by a dependency that did not
// merge once it ended (queued still when the user stopped it).
func (b *batch) notStarted() (n int, status string) {
	n = max(0, b.total-len(b.tasks))
	status = ledger.TaskVerdictQueued
	if b.end != nil && b.end.state != loop.StateAborted {
		status = ledger.TaskVerdictBlocked
	}
	return n, status
}

// busy reports whether a task is still at work.
func (b *batch) busy() bool {
	for _, t := range b.tasks {
		if active(t.status()) {
			return true
		}
	}
	return false
}
