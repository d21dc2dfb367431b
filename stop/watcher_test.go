package stop

import (
	"context"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

func openStore(t *testing.T) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func appendAll(t *testing.T, st *ledger.Store, acts []ledger.Action) []ledger.Action {
	t.Helper()
	out := make([]ledger.Action, len(acts))
	for i := range acts {
		a := acts[i]
		a.Seq, a.ActionID = 0, ""
		if _, err := st.Append(context.Background(), &a); err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

func completions(t *testing.T, st *ledger.Store, run string) []ledger.Action {
	t.Helper()
	acts, err := st.ByRun(run)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.Action
	for _, a := range acts {
		if a.Type == ledger.RunCompleted {
			out = append(out, a)
		}
	}
	return out
}

// The watcher follows the live ledger, ignores other runs, and records
// RunCompleted naming the action after which the predicate first held.
func TestWatcherRecordsTheTriggeringAction(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	pred, err := ParsePredicate(`(and (audit.succeeded? "git.commit") (audit.metadata? "shell.exec" "exit" "0"))`, "p")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWatcher(st, "run-1", pred)
	if err != nil {
		t.Fatal(err)
	}
	trace := traceActions("run-1")
	appendAll(t, st, trace[:4]) // before the watcher starts: rebuilt from ByRun
	done := make(chan Completion, 1)
	errc := make(chan error, 1)
	go func() {
		c, err := w.Run(context.Background())
		done <- c
		errc <- err
	}()
	// Another run completing the same predicate does not count.
	appendAll(t, st, traceActions("run-2")[5:8])
	live := appendAll(t, st, trace[4:])
	c, err := <-done, <-errc
	if err != nil {
		t.Fatal(err)
	}
	commit := live[3] // seq-order: trace[7] is git.commit
	if commit.FunctionName != "git.commit" || c.TriggerActionID != commit.ActionID || c.TriggerSeq != commit.Seq {
		t.Fatalf("triggered by %s@%d, want git.commit %s@%d", c.TriggerActionID, c.TriggerSeq, commit.ActionID, commit.Seq)
	}
	rcs := completions(t, st, "run-1")
	if len(rcs) != 1 || rcs[0].Metadata[MetaTriggerActionID].Str() != commit.ActionID ||
		rcs[0].Metadata[MetaTriggerSeq].AsInt() != int64(commit.Seq) {
		t.Fatalf("RunCompleted records: %+v", rcs)
	}
	if len(completions(t, st, "run-2")) != 0 {
		t.Error("run-2 completed")
	}

	// Resume: a new watcher finds the recorded completion and adds none.
	w2, _ := NewWatcher(st, "run-1", pred)
	c2, err := w2.Run(context.Background())
	if err != nil || !c2.Resumed || c2.TriggerActionID != commit.ActionID || len(completions(t, st, "run-1")) != 1 {
		t.Errorf("resume: %+v, %v", c2, err)
	}
}

// A crash between the triggering action and RunCompleted: on resume the
// index is rebuilt from the ledger and the trigger is found exactly.
func TestWatcherResumeFindsEarlierTrigger(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	recorded := appendAll(t, st, traceActions("run-1"))
	pred, _ := ParsePredicateJSON([]byte(`{"action_succeeded": {"function_name": "Tests"}}`), "p")
	w, _ := NewWatcher(st, "run-1", pred)
	c, err := w.Run(context.Background())
	if err != nil || c.Resumed || c.TriggerActionID != recorded[6].ActionID {
		t.Fatalf("%+v %v; want trigger %s (the completed step)", c, err, recorded[6].ActionID)
	}
	if w.Index().Observed() != 7 {
		t.Errorf("index observed %d actions, want 7", w.Index().Observed())
	}
}

func TestWatcherStopsWithContext(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	pred, _ := ParsePredicate(`(audit.succeeded? "never")`, "p")
	w, _ := NewWatcher(st, "run-1", pred)
	ctx, cancel := context.WithCancel(context.Background())
	appendAll(t, st, []ledger.Action{{RunID: "run-1", Type: ledger.CapabilityCall, FunctionName: "x", Success: true, Result: rtfs.Int(1)}})
	cancel()
	if _, err := w.Run(ctx); err == nil {
		t.Error("Run returned no error after cancel")
	}
	if _, err := NewWatcher(st, "", pred); err == nil {
		t.Error("empty run id accepted")
	}
}
