package tui

import (
	"context"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// A batch that goes on in this process, shown by View's loader with
// GoesOn: its actions reach the batch view, and an open task's run, as
// they are appended to the store; its end, once its record says it.
func TestTeaBatchLive(t *testing.T) {
	acts := scriptBatch()
	st, err := ledger.Open(ledger.Options{InMemory: true, PrivateKey: fixtureKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	appendActs := func(as []ledger.Action) {
		for i := range as {
			a := as[i]
			if _, err := st.Append(context.Background(), &a); err != nil {
				t.Fatal(err)
			}
		}
	}
	cut := 0 // US-003's run has done its first iteration
	for i := range acts {
		if acts[i].Type == ledger.IterationCompleted && acts[i].RunID == fixtureR3 {
			cut = i + 1
			break
		}
	}
	appendActs(acts[:cut])
	o := &Options{Store: st, RunID: fixtureBatch, GoesOn: "this process"}
	tm := teatest.NewTestModel(t, newModel(o, testStyles()), teatest.WithInitialTermSize(120, 40))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go load(ctx, st, fixtureBatch, tm.Send, true, true)
	press := func(k string) { tm.Send(keyMsg(k)) }

	waitScreen(t, tm, "Running", "1/3 merged", "US-003", "shown as it records")
	press("G") // US-003, the last row
	press("enter")
	waitScreen(t, tm, "US-003 try 1", "Iteration 1")
	appendActs(acts[cut:]) // the rest of the batch, its task runs' ends among it
	waitScreen(t, tm, "Failed by keeps-failing (failure)")
	press("q")
	waitScreen(t, tm, "2/3 merged", "keeps-failing: 2 of 2 consecutive failures")
	rec := batchRecord(acts)
	if err := loop.PutRunRecord(context.Background(), st, rec); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, tm, "Failed: 2 of 3 merged, 1 failed")
	press("q")
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(60*time.Second)).(*model)
	if fm.batchV == nil || fm.batchV.b.end == nil || !fm.following {
		t.Errorf("final model: batch %+v, following %v", fm.batchV, fm.following)
	}
}
