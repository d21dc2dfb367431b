package batch

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// Metadata keys of the batch's actions (docs/ledger.md §3.2), spelled
// once in ledger (batchmeta.go), which the UI reads them by too.
const (
	MetaTask    = ledger.MetaTask
	MetaRun     = ledger.MetaTaskRun
	MetaTry     = ledger.MetaTaskTry
	MetaAttempt = ledger.MetaTaskAttempt
	MetaVerdict = ledger.MetaTaskVerdict
	MetaFinal   = ledger.MetaTaskFinal
	MetaCommit  = ledger.MetaTaskCommit
)

// record appends a, an action of the batch's own run, and returns its id:
// durable before what it records can have an effect (the child run it
// names starts after it).
func (b *Batch) record(ctx context.Context, a *ledger.Action) (string, error) {
	a.ActionID = loop.NewID()
	a.RunID, a.IntentID = b.id, b.id
	if a.Type != ledger.BatchStarted {
		a.ParentActionID = b.startedID
	}
	a.Timestamp = b.o.Now()
	if _, err := b.o.Store.Append(context.WithoutCancel(ctx), a); err != nil {
		return "", fmt.Errorf("record %s: %w", a.Type, err)
	}
	return a.ActionID, nil
}

// recordStarted records BatchStarted: the source, the target and how the
// batch runs.
func (b *Batch) recordStarted(ctx context.Context, n int) error {
	id, err := b.record(ctx, &ledger.Action{Type: ledger.BatchStarted, FunctionName: b.o.Source.String(), Success: true,
		Metadata: map[string]rtfs.Value{
			ledger.MetaBatchSource: rtfs.String(b.o.Source.String()), ledger.MetaBatchTarget: rtfs.String(b.o.Target.Branch()),
			ledger.MetaBatchTasks: rtfs.Int(int64(n)), ledger.MetaBatchParallel: rtfs.Int(int64(b.o.Parallel)), ledger.MetaBatchRetries: rtfs.Int(int64(b.o.Retries)),
			ledger.MetaBatchAttempts: rtfs.Int(int64(max(b.o.Attempts, 1))), ledger.MetaBatchShared: rtfs.Bool(b.o.Shared),
			ledger.MetaBatchIntegrate: rtfs.String(b.o.Integrate), ledger.MetaBatchDir: rtfs.String(b.o.Dir), ledger.MetaBatchConfig: rtfs.String(b.o.Config.Snapshot()),
		}})
	b.startedID = id
	return err
}

// recordTaskStarted records TaskStarted, linking the batch to the child
// run that works on t.
func (b *Batch) recordTaskStarted(ctx context.Context, t *taskState, a *attempt, run string, try int, resumed bool) error {
	_, err := b.record(ctx, &ledger.Action{Type: ledger.TaskStarted, FunctionName: t.task.ID, Success: true,
		Metadata: map[string]rtfs.Value{
			MetaTask: rtfs.String(t.task.ID), ledger.MetaTaskTitle: rtfs.String(t.task.Title), ledger.MetaBatchSource: rtfs.String(b.o.Source.String()),
			MetaRun: rtfs.String(run), MetaTry: rtfs.Int(int64(try)), MetaAttempt: rtfs.Int(int64(a.k)), ledger.MetaTaskBranch: rtfs.String(a.branch),
			ledger.MetaTaskCheckout: rtfs.String(a.checkout.Dir()), ledger.MetaTaskResumed: rtfs.Bool(resumed),
		}})
	return err
}

// recordTaskEnded records how one child run of t ended, with the queue's
// answer when it got that far; final says its attempt is over (false: it
// goes back to its loop).
func (b *Batch) recordTaskEnded(ctx context.Context, t *taskState, run, verdict, why string, final bool) error {
	a := &ledger.Action{Type: ledger.TaskEnded, FunctionName: t.task.ID, Success: verdict == VerdictMerged,
		Metadata: map[string]rtfs.Value{
			MetaTask: rtfs.String(t.task.ID), MetaRun: rtfs.String(run), MetaVerdict: rtfs.String(verdict),
			ledger.MetaTaskWhy: rtfs.String(why), MetaFinal: rtfs.Bool(final),
		}}
	if verdict != VerdictMerged {
		a.ErrorMessage = verdict
		if why != "" {
			a.ErrorMessage += ": " + why
		}
	}
	_, err := b.record(ctx, a)
	return err
}

// recordTaskMerged records the commit the queue landed t's work as.
func (b *Batch) recordTaskMerged(ctx context.Context, t *taskState, run, commit string) error {
	_, err := b.record(ctx, &ledger.Action{Type: ledger.TaskMerged, FunctionName: t.task.ID, Success: true,
		Metadata: map[string]rtfs.Value{MetaTask: rtfs.String(t.task.ID), MetaRun: rtfs.String(run), MetaCommit: rtfs.String(commit)}})
	return err
}

// saveRecord keeps the batch's record (ralph runs): its state, its tasks'
// iterations and spend, and, once it ended, why. The caller holds b.mu.
func (b *Batch) saveRecord(ctx context.Context, state string, end *Summary) error {
	rec := loop.RunRecord{ID: b.id, State: state, Goal: b.goal, Started: b.started.UTC().Format(loop.RecordTime),
		Updated: b.o.Now().UTC().Format(loop.RecordTime), Tasks: len(b.tasks)}
	for _, t := range b.tasks {
		rec.Iterations += t.iterations
		rec.CostUSD += t.cost
		rec.Tokens += t.tokens
	}
	if end != nil {
		rec.Class, rec.Condition, rec.Reason = string(end.Class), "tasks", end.Reason
	}
	if err := loop.PutRunRecord(ctx, b.o.Store, rec); err != nil {
		return fmt.Errorf("save the batch's record: %w", err)
	}
	return nil
}
