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

func (r *Runner) feedIndex(ctx context.Context, runID string, ix *stop.Index) (*indexFeed, error) {
	f := &indexFeed{}
	f.cond = sync.NewCond(&f.mu)
	bounds := make([]*stop.Bound, len(r.o.Predicates))
	for i, p := range r.o.Predicates {
		b, err := p.Pred.Bind(ix)
		if err != nil {
			return nil, err
		}
		bounds[i] = b
	}
	observe := func(a *ledger.Action) {
		if a.RunID != runID || a.Type == ledger.RunCompleted {
			return
		}
		ix.Observe(a)
		for i, b := range bounds {
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
				f.trigger, f.name = &c, r.o.Predicates[i].Name
			}
			f.mu.Unlock()
		}
	}
	head := r.o.Store.Head().Seq
	acts, err := r.o.Store.ByRun(runID)
	if err != nil {
		return nil, err
	}
	if r.o.Resume {
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
				ix.Observe(&acts[i])
			}
		}
	} else {
		for i := range acts {
			if acts[i].Seq <= head {
				observe(&acts[i])
			}
		}
	}
	f.seen = head
	go func() {
		defer func() { // release waiters for good when the feed ends
			f.mu.Lock()
			f.seen = ^uint64(0)
			f.cond.Broadcast()
			f.mu.Unlock()
		}()
		for a := range r.o.Store.Subscribe(ctx, head+1) {
			observe(&a)
			f.mu.Lock()
			f.seen = a.Seq
			f.cond.Broadcast()
			f.mu.Unlock()
		}
	}()
	return f, nil
}
