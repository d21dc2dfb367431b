package ledger

import (
	"context"
	"fmt"
	"sync"
)

// ring keeps the most recently committed actions so live subscribers read
// them from memory; anything older is read from the store.
type ring struct {
	mu     sync.Mutex
	slots  []*Action
	lo, hi uint64 // seqs held: lo..hi, empty when hi == 0
}

func newRing(n int) *ring { return &ring{slots: make([]*Action, n)} }

func (r *ring) add(items []*pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := uint64(len(r.slots))
	for _, p := range items {
		seq := p.a.Seq
		r.slots[seq%n] = p.a
		if r.hi == 0 || seq != r.hi+1 {
			r.lo = seq
		}
		r.hi = seq
		if r.hi-r.lo+1 > n {
			r.lo = r.hi - n + 1
		}
	}
}

// get appends to dst the actions from..to (at most max of them) if the ring
// still holds from; ok is false when it does not.
func (r *ring) get(dst []*Action, from, to uint64, max int) ([]*Action, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hi == 0 || from < r.lo || from > r.hi {
		return dst, false
	}
	n := uint64(len(r.slots))
	for seq := from; seq <= to && seq <= r.hi && len(dst) < max; seq++ {
		dst = append(dst, r.slots[seq%n])
	}
	return dst, true
}

// commitSignal returns a channel closed by the next commit.
func (s *Store) commitSignal() <-chan struct{} {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.commitCh
}

const subscribeChunk = 256

// Subscribe delivers every action with seq ≥ fromSeq in seq order: first
// those already recorded, then each new one as it commits. It never drops an
// action and never slows the writer: a subscriber that falls behind reads
// the missed actions back from the store. The channel is closed when ctx
// ends, the store closes, or a read fails (the failure is logged).
func (s *Store) Subscribe(ctx context.Context, fromSeq uint64) <-chan Action {
	out := make(chan Action, subscribeChunk)
	if fromSeq == 0 {
		fromSeq = 1
	}
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.sendClosed {
		close(out)
		return out
	}
	s.subWG.Add(1)
	go s.runSubscriber(ctx, fromSeq, out)
	return out
}

func (s *Store) runSubscriber(ctx context.Context, next uint64, out chan<- Action) {
	defer s.subWG.Done()
	defer close(out)
	defer s.recoverBackground("subscriber")
	var buf []*Action
	for {
		wake := s.commitSignal()
		head := s.Head().Seq
		for next <= head {
			to := min(head, next+subscribeChunk-1)
			var ok bool
			if buf, ok = s.recent.get(buf[:0], next, to, subscribeChunk); !ok {
				var err error
				if buf, err = s.readSeqs(buf[:0], next, to); err != nil {
					if err != ErrClosed {
						s.log.Error("ledger subscriber stopped: cannot read the store", "from_seq", next, "err", err)
					}
					return
				}
			}
			for _, a := range buf {
				select {
				case out <- *a:
					next++
				case <-ctx.Done():
					return
				case <-s.done:
					return
				}
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		case <-s.done:
			return
		}
	}
}

// readSeqs appends the stored actions from..to to dst.
func (s *Store) readSeqs(dst []*Action, from, to uint64) ([]*Action, error) {
	err := s.rangeSeqs(from, to, func(a Action) error {
		dst = append(dst, &a)
		return nil
	})
	if err == nil && (len(dst) == 0 || dst[len(dst)-1].Seq != to) {
		return dst, &IntegrityError{Seq: from, Reason: fmt.Sprintf("actions are missing between seq %d and %d", from, to)}
	}
	return dst, err
}
