package loop

import (
	"context"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
)

func TestTrackSeqTellsWhenTheConsumerCaughtUp(t *testing.T) {
	const guard = 30 * time.Second // bounds a wait for what must happen
	in := make(chan Event, 3)
	for seq := uint64(3); seq <= 5; seq++ {
		in <- Event{Kind: EventAction, Action: &ledger.Action{Seq: seq}}
	}
	close(in)
	out, caughtUp := TrackSeq(context.Background(), 2, in)
	select {
	case <-caughtUp(2): // taken before the events started
	case <-time.After(guard):
		t.Fatal("seq 2 was before the events, yet not caught up")
	}
	four := caughtUp(4)
	select {
	case <-four:
		t.Fatal("caught up with seq 4 before the consumer took anything")
	default:
	}
	var took []uint64
	for e := range out {
		took = append(took, e.Action.Seq)
	}
	select {
	case <-four:
	case <-time.After(guard):
		t.Fatal("the consumer took seq 5, yet seq 4 was not caught up")
	}
	if len(took) != 3 || took[0] != 3 || took[2] != 5 {
		t.Errorf("passed on %v, want 3 4 5", took)
	}
}
