package tui

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// The scripted batch: three tasks from a prd.json, two at a time, one
// retry. US-001 merges at once; US-002 conflicts on the queue, goes back
// to its loop and merges on its second run; US-003 fails after three
// iterations. Ids, times and spend are fixed, so golden screens hold.

const (
	fixtureBatch = "0193a1b2-ba7c-7000-8000-0000000000b1"
	fixtureR1    = "0193a1b2-0001-7000-8000-000000000001"
	fixtureR2    = "0193a1b2-0002-7000-8000-000000000002"
	fixtureR3    = "0193a1b2-0003-7000-8000-000000000003"
	fixtureR4    = "0193a1b2-0004-7000-8000-000000000004"
	commitUS1    = "3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a"
	commitUS2    = "5c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"
)

// batchScript builds a batch's actions, each run under its own id.
type batchScript struct {
	acts  []ledger.Action
	clock time.Time
	n     int
}

func (s *batchScript) add(run string, a ledger.Action, ms int64) string {
	s.n++
	a.ActionID = fmt.Sprintf("0193a1b2-0000-7000-9000-%012d", s.n)
	s.clock = s.clock.Add(time.Duration(ms) * time.Millisecond)
	a.RunID, a.IntentID, a.Timestamp = run, run, s.clock
	s.acts = append(s.acts, a)
	return a.ActionID
}

func (s *batchScript) batchAction(typ ledger.ActionType, task string, md map[string]rtfs.Value, ms int64) {
	md[ledger.MetaTask] = rtfs.String(task)
	s.add(fixtureBatch, ledger.Action{Type: typ, FunctionName: task, Success: true, Metadata: md}, ms)
}

func (s *batchScript) taskStarted(task, title, run string, try int, ms int64) {
	s.batchAction(ledger.TaskStarted, task, map[string]rtfs.Value{ledger.MetaTaskTitle: rtfs.String(title),
		ledger.MetaBatchSource: rtfs.String("prd:prd.json"), ledger.MetaTaskRun: rtfs.String(run), ledger.MetaTaskTry: rtfs.Int(int64(try)),
		ledger.MetaTaskAttempt: rtfs.Int(1), ledger.MetaTaskBranch: rtfs.String("ralph/" + fixtureBatch + "/task/" + task)}, ms)
}

func (s *batchScript) taskEnded(task, run, verdict, why string, final bool, ms int64) {
	s.batchAction(ledger.TaskEnded, task, map[string]rtfs.Value{ledger.MetaTaskRun: rtfs.String(run),
		ledger.MetaTaskVerdict: rtfs.String(verdict), ledger.MetaTaskWhy: rtfs.String(why), ledger.MetaTaskFinal: rtfs.Bool(final)}, ms)
}

func (s *batchScript) taskMerged(task, run, commit string, ms int64) {
	s.batchAction(ledger.TaskMerged, task, map[string]rtfs.Value{ledger.MetaTaskRun: rtfs.String(run), ledger.MetaTaskCommit: rtfs.String(commit)}, ms)
}

// runStart records a task run's start with the fixture's config.
func (s *batchScript) runStart(run string, ms int64) string {
	return s.add(run, ledger.Action{Type: ledger.RunStarted, FunctionName: "Work through the backlog", Success: true,
		Metadata: map[string]rtfs.Value{"provider": rtfs.String("static"), "model": rtfs.String(""), ledger.MetaBatch: rtfs.String(fixtureBatch),
			"config": rtfs.String(fixtureTOML)}}, ms)
}

// iteration records one iteration of run costing cost and its
// evaluation: fails is the failure streak after it (0: it went well),
// done says the run's success condition holds.
func (s *batchScript) iteration(run, start string, it int, cost float64, fails int, done bool, ms int64) {
	failed := fails > 0
	iter := s.add(run, ledger.Action{Type: ledger.IterationStarted, ParentActionID: start, FunctionName: fmt.Sprintf("iteration %d", it),
		Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it))}}, ms)
	s.add(run, ledger.Action{Type: ledger.CapabilityCall, ParentActionID: iter, FunctionName: "agent.run", Success: !failed, Cost: cost,
		DurationMS: ms / 2}, ms/2)
	status := "ok"
	if failed {
		status = "failed"
	}
	s.add(run, ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iter, FunctionName: fmt.Sprintf("iteration %d", it),
		Success: !failed, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it)), "status": rtfs.String(status)}}, ms/2)
	s.add(run, evaluationAction(start, batchEvaluation(it, fails, done)), 1)
}

// batchEvaluation is a task run's evaluation after iteration it: its
// success condition (a command) holds when done, and fails is its failure
// streak, of 2.
func batchEvaluation(it, fails int, done bool) stop.Evaluation {
	cmd := stop.Result{Name: "done", Kind: "command", Class: stop.ClassSuccess, Priority: 55, Met: done, Detail: "exit 2",
		Reason: "ls done-*.txt exited 2", Evidence: "ls: cannot access 'done-*.txt': No such file or directory", Duration: 3 * time.Millisecond}
	if done {
		cmd.Detail, cmd.Reason, cmd.Evidence, cmd.Progress = "exit 0", "ls done-*.txt exited 0", "done-US-001.txt", 1
	}
	streak := stop.Result{Name: "keeps-failing", Kind: "consecutive_failures", Class: stop.ClassFailure, Priority: 70, Met: fails >= 2,
		Reason: fmt.Sprintf("%d of 2 consecutive failures", fails), Progress: float64(fails) / 2, Detail: fmt.Sprintf("%d/2 failures", fails)}
	ev := stop.Evaluation{Iteration: it, Results: []stop.Result{streak, cmd}, At: fixtureStart.Add(time.Duration(it) * time.Second)}
	switch {
	case done:
		ev.ShouldStop, ev.Class, ev.TriggeredBy, ev.Reason = true, stop.ClassSuccess, "done", "the command held"
	case fails >= 2:
		ev.ShouldStop, ev.Class, ev.TriggeredBy, ev.Reason = true, stop.ClassFailure, "keeps-failing", streak.Reason
	}
	return ev
}

func (s *batchScript) runEnd(run, start string, typ ledger.ActionType, cond, class, reason string, ms int64) {
	s.add(run, ledger.Action{Type: typ, ParentActionID: start, FunctionName: cond, Success: typ == ledger.RunCompleted,
		Metadata: map[string]rtfs.Value{"condition": rtfs.String(cond), "class": rtfs.String(class), "reason": rtfs.String(reason)}}, ms)
}

// scriptBatch is the batch's actions, in the order a batch records them.
func scriptBatch() []ledger.Action {
	s := &batchScript{clock: fixtureStart}
	s.add(fixtureBatch, ledger.Action{Type: ledger.BatchStarted, FunctionName: "prd:prd.json", Success: true, Metadata: map[string]rtfs.Value{
		ledger.MetaBatchSource: rtfs.String("prd:prd.json"), ledger.MetaBatchTarget: rtfs.String("ralph/greetings"),
		ledger.MetaBatchTasks: rtfs.Int(3), ledger.MetaBatchParallel: rtfs.Int(2), ledger.MetaBatchRetries: rtfs.Int(1),
		ledger.MetaBatchAttempts: rtfs.Int(1), ledger.MetaBatchIntegrate: rtfs.String("rebase")}}, 0)
	s.taskStarted("US-001", "Greet in English", fixtureR1, 1, 120)
	r1 := s.runStart(fixtureR1, 30)
	s.taskStarted("US-002", "Greet in French", fixtureR2, 1, 40)
	r2 := s.runStart(fixtureR2, 30)
	s.iteration(fixtureR1, r1, 1, 0.12, 0, true, 9000)
	s.iteration(fixtureR2, r2, 1, 0.20, 0, true, 3000)
	s.runEnd(fixtureR1, r1, ledger.RunCompleted, "done", "success", "the command held", 5)
	s.runEnd(fixtureR2, r2, ledger.RunCompleted, "done", "success", "the command held", 5)
	s.taskMerged("US-001", fixtureR1, commitUS1, 2100)
	s.taskEnded("US-001", fixtureR1, ledger.TaskVerdictMerged, "", true, 3)
	s.taskEnded("US-002", fixtureR2, ledger.TaskVerdictConflict, "conflict in greet.go: the target changed it since the task started", false, 900)
	s.taskStarted("US-003", "Greet in German", fixtureR3, 1, 20)
	r3 := s.runStart(fixtureR3, 30)
	s.taskStarted("US-002", "Greet in French", fixtureR4, 2, 600)
	r4 := s.runStart(fixtureR4, 30)
	s.iteration(fixtureR3, r3, 1, 0.10, 0, false, 7000)
	s.iteration(fixtureR4, r4, 1, 0.15, 0, true, 4000)
	s.runEnd(fixtureR4, r4, ledger.RunCompleted, "done", "success", "the command held", 5)
	s.iteration(fixtureR3, r3, 2, 0.11, 1, false, 8000)
	s.taskMerged("US-002", fixtureR4, commitUS2, 1500)
	s.taskEnded("US-002", fixtureR4, ledger.TaskVerdictMerged, "", true, 3)
	s.iteration(fixtureR3, r3, 3, 0.09, 2, false, 6000)
	s.runEnd(fixtureR3, r3, ledger.RunFailed, "keeps-failing", "failure", "2 of 2 consecutive failures", 5)
	s.taskEnded("US-003", fixtureR3, ledger.TaskVerdictFailed, "keeps-failing: 2 of 2 consecutive failures", true, 20)
	return s.acts
}

// batchRecord is the record a batch saves when it ends as scriptBatch
// does.
func batchRecord(acts []ledger.Action) loop.RunRecord {
	last := acts[len(acts)-1].Timestamp
	return loop.RunRecord{ID: fixtureBatch, State: loop.StateFailed, Goal: "Work through the backlog", Class: "failure", Condition: "tasks",
		Reason: "2 of 3 merged, 1 failed", Started: fixtureStart.UTC().Format(loop.RecordTime), Updated: last.Add(time.Second).UTC().Format(loop.RecordTime),
		Tasks: 3, Iterations: 6, CostUSD: 0.77}
}

// batchStore is an in-memory store that holds acts and, when rec is set,
// the batch's record.
func batchStore(t testing.TB, acts []ledger.Action, rec *loop.RunRecord) (*ledger.Store, []ledger.Action) {
	t.Helper()
	st, stored := fixtureStore(t, acts)
	if rec != nil {
		if err := loop.PutRunRecord(context.Background(), st, *rec); err != nil {
			t.Fatal(err)
		}
	}
	return st, stored
}
