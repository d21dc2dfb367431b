package loop

import (
	"context"
	"fmt"
	"sync"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/stop"
)

// indexFeed keeps the run's audit index current from the ledger and
// evaluates the completion predicates after every action of the run.
type indexFeed struct {
	mu      sync.Mutex
	cond    *sync.Cond
	seen    uint64
	trigger *ledger.Action // the action after which a predicate first held
	name    string         // that predicate's condition name
	failed  map[int]error  // predicates that could not be evaluated since the last triggered, by index

	runID  string
	ix     *stop.Index
	preds  []CompletionPredicate
	bounds []*stop.Bound // preds bound to ix
}

// waitFor blocks until the feed has processed seq.
func (f *indexFeed) waitFor(seq uint64) {
	f.mu.Lock()
	for f.seen < seq {
		f.cond.Wait()
	}
	f.mu.Unlock()
}

// triggered reports the action after which a predicate held, and takes
// the errors of the predicates that could not be evaluated since the last
// call, by condition name: the next evaluation records them as results.
func (f *indexFeed) triggered(names func(int) string) (*ledger.Action, string, map[string]error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var failed map[string]error
	for i, err := range f.failed {
		if failed == nil {
			failed = map[string]error{}
		}
		failed[names(i)] = err
	}
	f.failed = nil
	return f.trigger, f.name, failed
}

// feedIndex starts the run's index feed: it binds the predicates to ix,
// catches up with the run's recorded actions and then follows the ledger
// until ctx ends.
func (r *Runner) feedIndex(ctx context.Context, runID string, ix *stop.Index) (*indexFeed, error) {
	f := &indexFeed{runID: runID, ix: ix, preds: r.o.Predicates}
	f.cond = sync.NewCond(&f.mu)
	f.bounds = make([]*stop.Bound, len(r.o.Predicates))
	for i, p := range r.o.Predicates {
		b, err := p.Pred.Bind(ix)
		if err != nil {
			return nil, err
		}
		f.bounds[i] = b
	}
	head := r.o.Store.Head().Seq
	if err := r.catchUp(ctx, f, head); err != nil {
		return nil, err
	}
	f.seen = head
	go func() { f.follow(ctx, r.o.Store.Subscribe(ctx, head+1)) }()
	return f, nil
}

// catchUp feeds the index the run's actions up to head. On resume it
// rebuilds the index from the iterations that completed, without
// evaluating the predicates.
func (r *Runner) catchUp(ctx context.Context, f *indexFeed, head uint64) error {
	acts, err := r.o.Store.ByRun(f.runID)
	if err != nil {
		return err
	}
	if !r.o.Resume {
		for i := range acts {
			if acts[i].Seq <= head {
				f.observe(ctx, &acts[i])
			}
		}
		return nil
	}
	// Rebuild the index from the iterations that completed. The dead
	// process's interrupted iteration runs again, so its actions are
	// left out, and nothing replayed can end the new process: the
	// predicates are evaluated from its first action on.
	var cutoff uint64
	for i := range acts {
		if acts[i].Type == ledger.IterationCompleted || acts[i].Type == ledger.RunStarted {
			cutoff = acts[i].Seq
		}
	}
	for i := range acts {
		if acts[i].Seq <= cutoff && acts[i].Seq <= head {
			f.ix.Observe(&acts[i])
		}
	}
	return nil
}

// follow observes the ledger's new actions until the subscription ends,
// then releases every waiter for good.
func (f *indexFeed) follow(ctx context.Context, sub <-chan ledger.Action) {
	defer func() { // release waiters for good when the feed ends
		f.mu.Lock()
		f.seen = ^uint64(0)
		f.cond.Broadcast()
		f.mu.Unlock()
	}()
	for a := range sub {
		f.observe(ctx, &a)
		f.mu.Lock()
		f.seen = a.Seq
		f.cond.Broadcast()
		f.mu.Unlock()
	}
}

// observe adds one of the run's actions to the index and evaluates the
// predicates after it, until one holds.
func (f *indexFeed) observe(ctx context.Context, a *ledger.Action) {
	if a.RunID != f.runID || a.Type == ledger.RunCompleted {
		return
	}
	f.ix.Observe(a)
	for i, b := range f.bounds {
		f.mu.Lock()
		done, failed := f.trigger != nil, f.failed[i] != nil
		f.mu.Unlock()
		if done {
			return
		}
		if failed { // already reported for this iteration
			continue
		}
		holds, err := b.Eval(ctx)
		f.mu.Lock()
		switch {
		case err != nil:
			if f.failed == nil {
				f.failed = map[int]error{}
			}
			f.failed[i] = fmt.Errorf("%w (evaluated after seq %d)", err, a.Seq)
		case holds:
			c := *a
			f.trigger, f.name = &c, f.preds[i].Name
		}
		f.mu.Unlock()
	}
}
