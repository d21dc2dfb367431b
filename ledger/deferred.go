package ledger

import (
	"context"
	"fmt"
	"time"
)

// deferWindow bounds how long the writer holds a batch of deferred appends
// open for more before it commits them, when nobody waits on it yet.
const deferWindow = time.Millisecond

// Pending is a deferred append on its way to the store.
type Pending struct {
	req *request
	a   *Action // the caller's action
}

// AppendDeferred records a like Append, but returns once the writer has
// accepted it, without waiting for the commit: the action rides in the
// writer's next group commit, which starts at once when nothing else is
// waiting (or after at most a millisecond, to gather the deferred appends
// that follow). Its action_id and timestamp are filled in before it
// returns; its seq and hashes are known only once it is committed (Wait).
//
// Until Sync (or Wait, or any later Append) returns, a crash may lose the
// action, and subscribers and readers do not see it. Callers use it for
// bookkeeping that is made durable before anything it records can have an
// effect outside the store: write-ahead, with the barrier where the effect
// begins. Validation errors are returned at once; a commit that fails
// fails the next Sync.
func (s *Store) AppendDeferred(ctx context.Context, a *Action) (*Pending, error) {
	fresh := a.ActionID == ""
	if err := fillDefaults(a); err != nil {
		return nil, err
	}
	p, err := s.prepare(a)
	if err != nil {
		return nil, err
	}
	p.fresh = fresh
	req := &request{items: []*pending{p}, done: make(chan struct{}), deferred: true}
	if err := s.send(ctx, req); err != nil {
		return nil, err
	}
	return &Pending{req: req, a: a}, nil
}

// Wait blocks until the deferred append is committed (and fsynced when
// SyncWrites is on), fills in the action's seq, hashes and checkpoint seq
// as Append does, and returns its receipt. Every append accepted before it
// is then committed too. ctx bounds only the wait; the append stays on its
// way.
func (p *Pending) Wait(ctx context.Context) (Receipt, error) {
	select {
	case <-p.req.done:
	case <-ctx.Done():
		return Receipt{}, ctx.Err()
	}
	if p.req.err != nil {
		return Receipt{}, p.req.err
	}
	r := p.req.res[0]
	p.a.Seq, p.a.ActionHash, p.a.ChainHash, p.a.CheckpointSeq = r.Seq, r.ActionHash, r.ChainHash, r.CheckpointSeq
	return r, nil
}

// Sync blocks until every append accepted before it — deferred or not —
// is committed (and fsynced when SyncWrites is on). It commits nothing
// itself when nothing is waiting. It fails when the store is closed, or
// when a deferred append of this store failed to commit: the record then
// lacks an action its caller was told would follow, and nothing that
// depends on it may go ahead.
//
// ctx bounds the wait for the writer to accept the barrier; once accepted,
// Sync waits for the commit so that its answer is never ambiguous.
func (s *Store) Sync(ctx context.Context) error {
	req := &request{done: make(chan struct{})}
	if err := s.submit(ctx, req); err != nil {
		return err
	}
	if err := s.deferErr.Load(); err != nil {
		return fmt.Errorf("a deferred append failed to commit: %w", *err)
	}
	return nil
}

// noteDeferred keeps the first error of a deferred append for Sync.
func (s *Store) noteDeferred(req *request, err error) {
	if req.deferred && err != nil {
		s.deferErr.CompareAndSwap(nil, &err)
	}
}

// lingerDeferred holds a batch of deferred appends open for more, for at
// most deferWindow: until a request that someone waits on (an Append, a
// Sync) arrives, the batch is full, or reqCh closes.
func (s *Store) lingerDeferred(batch *[]*request, n int) {
	t := time.NewTimer(deferWindow)
	defer t.Stop()
	for n < maxBatchItems {
		select {
		case r, ok := <-s.reqCh:
			if !ok {
				return
			}
			*batch = append(*batch, r)
			n += len(r.items)
			if !r.deferred {
				s.drain(batch, n)
				return
			}
		case <-t.C:
			return
		}
	}
}

// allDeferred reports whether nobody waits on any request of batch.
func allDeferred(batch []*request) bool {
	for _, r := range batch {
		if !r.deferred {
			return false
		}
	}
	return true
}
