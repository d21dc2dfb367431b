package ledger

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestSubscribeDeliversEveryActionInOrder(t *testing.T) {
	t.Parallel()
	// total is a multiple of writers and four times the recent-actions
	// ring, so the stalled subscriber has to catch up from the store.
	const writers = 64
	const total = 16_384
	s, err := Open(Options{InMemory: true, MemTableSize: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if total < 10+len(s.recent.slots)+1000 {
		t.Fatalf("%d actions do not take the stalled subscriber past the ring of %d", total, len(s.recent.slots))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Two subscribers: one keeps up, one stalls so it must catch up from the
	// store after the recent-actions ring has moved on.
	fast := s.Subscribe(ctx, 1)
	slow := s.Subscribe(ctx, 1)

	// Small actions from many appenders keep the test quick under -race:
	// what is under test is delivery, not encoding.
	var wg sync.WaitGroup
	per := total / writers
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				a := &Action{ActionID: fmt.Sprintf("w%d-%d", w, i), RunID: "run", Type: InternalStep, Success: true, Timestamp: baseTime}
				if _, err := s.Append(ctx, a); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	check := func(name string, ch <-chan Action, stallAt int) {
		want := uint64(1)
		for want <= uint64(total) {
			if int(want) == stallAt {
				// Let the writer get far ahead.
				for s.Head().Seq < uint64(stallAt)+uint64(len(s.recent.slots))+1000 && s.Head().Seq < uint64(total) {
					<-s.commitSignal()
				}
			}
			select {
			case a, ok := <-ch:
				if !ok {
					t.Errorf("%s: channel closed at seq %d", name, want)
					return
				}
				if a.Seq != want {
					t.Errorf("%s: got seq %d, want %d", name, a.Seq, want)
					return
				}
				if a.ActionID == "" || a.ChainHash.IsZero() {
					t.Errorf("%s: seq %d delivered without its fields", name, a.Seq)
					return
				}
				want++
			case <-time.After(30 * time.Second):
				t.Errorf("%s: stuck waiting for seq %d (head %d)", name, want, s.Head().Seq)
				return
			}
		}
	}
	var cw sync.WaitGroup
	cw.Go(func() { check("fast", fast, -1) })
	cw.Go(func() { check("slow", slow, 10) })
	wg.Wait()
	cw.Wait()

	// A late subscriber starting in the middle gets the rest, then live ones.
	late := s.Subscribe(ctx, uint64(total)-5)
	for i := uint64(total) - 5; i <= uint64(total); i++ {
		if a := <-late; a.Seq != i {
			t.Fatalf("late subscriber got %d, want %d", a.Seq, i)
		}
	}
	if _, err := s.Append(ctx, sample(total+1)); err != nil {
		t.Fatal(err)
	}
	if a := <-late; a.Seq != uint64(total)+1 {
		t.Fatalf("late subscriber got %d live", a.Seq)
	}
	cancel()
	for range late {
	}
}

func TestSubscribeEndsWithContextAndClose(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	appendN(t, s, 0, 3)
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Subscribe(ctx, 0)
	for i := 1; i <= 3; i++ {
		if a := <-ch; a.Seq != uint64(i) {
			t.Fatalf("got %d", a.Seq)
		}
	}
	cancel()
	for range ch {
	}
	// A subscriber nobody reads from does not hold up Close.
	_ = s.Subscribe(context.Background(), 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Subscribe(context.Background(), 1); ok {
		t.Fatal("subscribing to a closed store must give a closed channel")
	}
}
