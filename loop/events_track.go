package loop

import (
	"context"
	"sync"
)

// TrackSeq passes events on and tells, through caughtUp(seq), when the
// consumer has taken the action at seq or a later one (at once if it has
// already); the events start after seq before.
func TrackSeq(ctx context.Context, before uint64, in <-chan Event) (out <-chan Event, caughtUp func(seq uint64) <-chan struct{}) {
	fwd := make(chan Event)
	var mu sync.Mutex
	last, want := before, uint64(0)
	var reached chan struct{}
	go func() {
		defer close(fwd)
		for e := range in {
			select {
			case fwd <- e:
			case <-ctx.Done():
				return
			}
			if e.Kind != EventAction {
				continue
			}
			mu.Lock()
			last = e.Action.Seq
			if reached != nil && last >= want {
				close(reached)
				reached = nil
			}
			mu.Unlock()
		}
	}()
	return fwd, func(seq uint64) <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		ch := make(chan struct{})
		if last >= seq {
			close(ch)
		} else {
			want, reached = seq, ch
		}
		return ch
	}
}
