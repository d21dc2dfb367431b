package stop

import (
	"context"
	"errors"
	"fmt"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// Metadata keys of the RunCompleted action a Watcher records.
const (
	MetaTriggerActionID = "trigger_action_id"
	MetaTriggerSeq      = "trigger_seq"
	MetaPredicate       = "predicate"
)

// Store is what a Watcher needs from the ledger; *ledger.Store is one.
type Store interface {
	Recorder
	Head() ledger.Head
	ByRun(runID string) ([]ledger.Action, error)
	Subscribe(ctx context.Context, fromSeq uint64) <-chan ledger.Action
}

// Completion says which action made a predicate hold.
type Completion struct {
	TriggerSeq      uint64
	TriggerActionID string
	Recorded        ledger.Action // the RunCompleted action
	Resumed         bool          // it was already recorded before this Watcher started
}

// Watcher keeps a run's audit index current from the ledger and evaluates
// a completion predicate after every action of the run. The first time it
// holds, the watcher records RunCompleted naming the action that made it
// hold (metadata trigger_action_id and trigger_seq) and returns.
type Watcher struct {
	store Store
	run   string
	pred  *Predicate
	ix    *Index
	bound *Bound
}

// NewWatcher binds pred to a fresh index for runID.
func NewWatcher(store Store, runID string, pred *Predicate) (*Watcher, error) {
	if runID == "" {
		return nil, errors.New("watch predicate: the run id is empty")
	}
	ix := NewIndex()
	b, err := pred.Bind(ix)
	if err != nil {
		return nil, err
	}
	return &Watcher{store: store, run: runID, pred: pred, ix: ix, bound: b}, nil
}

// Index returns the run's audit index, for predicate stop conditions that
// share it.
func (w *Watcher) Index() *Index { return w.ix }

// Run rebuilds the index from the run's recorded actions (resume), then
// follows the ledger until the predicate holds or ctx ends. If the run
// already has a RunCompleted recorded by a watcher, Run returns it at once.
func (w *Watcher) Run(ctx context.Context) (Completion, error) {
	head := w.store.Head().Seq
	acts, err := w.store.ByRun(w.run)
	if err != nil {
		return Completion{}, fmt.Errorf("watch run %s: %w", w.run, err)
	}
	for i := range acts {
		if a := &acts[i]; a.Type == ledger.RunCompleted && !a.Metadata[MetaTriggerActionID].IsNil() {
			return Completion{TriggerSeq: uint64(a.Metadata[MetaTriggerSeq].AsInt()),
				TriggerActionID: a.Metadata[MetaTriggerActionID].Str(), Recorded: *a, Resumed: true}, nil
		}
	}
	for i := range acts {
		a := &acts[i]
		if a.Seq > head {
			break // Subscribe delivers it
		}
		if c, done, err := w.step(ctx, a); done || err != nil {
			return c, err
		}
	}
	for a := range w.store.Subscribe(ctx, head+1) {
		if a.RunID != w.run {
			continue
		}
		if c, done, err := w.step(ctx, &a); done || err != nil {
			return c, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Completion{}, err
	}
	return Completion{}, fmt.Errorf("watch run %s: the ledger closed", w.run)
}

// step observes one action and evaluates the predicate.
func (w *Watcher) step(ctx context.Context, a *ledger.Action) (Completion, bool, error) {
	if a.Type == ledger.RunCompleted {
		return Completion{}, false, nil // our own record, or another's: it is not evidence
	}
	w.ix.Observe(a)
	holds, err := w.bound.Eval(ctx)
	if err != nil {
		return Completion{}, false, fmt.Errorf("evaluate predicate after seq %d: %w", a.Seq, err)
	}
	if !holds {
		return Completion{}, false, nil
	}
	rc := &ledger.Action{Type: ledger.RunCompleted, RunID: w.run, ParentActionID: "", FunctionName: "completion_predicate",
		Success: true, Metadata: map[string]rtfs.Value{
			MetaTriggerActionID: rtfs.String(a.ActionID), MetaTriggerSeq: rtfs.Int(int64(a.Seq)),
			MetaPredicate: rtfs.String(w.pred.Source),
		}}
	if _, err := w.store.Append(context.WithoutCancel(ctx), rc); err != nil {
		return Completion{}, false, fmt.Errorf("record RunCompleted: %w", err)
	}
	return Completion{TriggerSeq: a.Seq, TriggerActionID: a.ActionID, Recorded: *rc}, true, nil
}
