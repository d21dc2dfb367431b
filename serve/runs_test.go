package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// putRun records a run as the loop does (loop.RunKVPrefix+id).
func putRun(t *testing.T, st interface {
	Put(context.Context, string, rtfs.Value) error
}, id, state, started, updated string) {
	t.Helper()
	b := rtfs.NewMapBuilder(4)
	b.Set(rtfs.Keyword("id"), rtfs.String(id))
	b.Set(rtfs.Keyword("state"), rtfs.Keyword(state))
	b.Set(rtfs.Keyword("started"), rtfs.String(started))
	b.Set(rtfs.Keyword("updated"), rtfs.String(updated))
	if err := st.Put(context.Background(), loop.RunKVPrefix+id, rtfs.MapValue(b.Map())); err != nil {
		t.Fatal(err)
	}
}

// GET /v1/runs answers an array of the rows ralph runs --json prints one a
// line: when each run ended and how long it ran, the live run's process,
// and a run whose process died as interrupted.
func TestRunsAnswersRows(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	putRun(t, st.KV(), "r1", loop.StateDone, "2026-11-26T10:00:00.000Z", "2026-11-26T10:01:12.500Z")
	putRun(t, st.KV(), "r2", loop.StateRunning, "2026-11-26T11:00:00.000Z", "2026-11-26T11:00:03.000Z")
	putRun(t, st.KV(), "r3", loop.StateRunning, time.Now().UTC().Format(loop.RecordTime), time.Now().UTC().Format(loop.RecordTime))
	s, c := start(t, Options{Store: st, Runner: &fakeRunner{bus: loop.NewBus(st, "r3"), id: "r3"}})
	s.SetOutput(false, "logs/r3.log")
	resp, err := c.get(context.Background(), "/v1/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got []map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || len(got) != 3 {
		t.Fatalf("GET /v1/runs: %d %s", resp.StatusCode, body)
	}
	r1, r2, r3 := got[0], got[1], got[2]
	if r1["ended"] != "2026-11-26T10:01:12.500Z" || r1["duration_ms"] != float64(72500) || r1["pid"] != nil {
		t.Errorf("ended run: %v", r1)
	}
	if r2["state"] != StateInterrupted || r2["ended"] != nil || r2["duration_ms"] != float64(3000) {
		t.Errorf("run whose process died: %v", r2)
	}
	if r3["pid"] == nil || r3["attached"] != false || r3["log_file"] != "logs/r3.log" || r3["ended"] != nil || r3["duration_ms"] == nil {
		t.Errorf("live run: %v", r3)
	}
	// The same fields as a row of ralph runs --json (serve.RunRows).
	recs, err := loop.ListRuns(st)
	if err != nil {
		t.Fatal(err)
	}
	in := s.info()
	for i, row := range RunRows(recs, &in, time.Now()) {
		b, _ := json.Marshal(row)
		var want map[string]any
		_ = json.Unmarshal(b, &want) // a RunRow marshals to an object
		for k := range want {
			if _, ok := got[i][k]; !ok {
				t.Errorf("run %s: GET /v1/runs lacks %q", row.ID, k)
			}
		}
		if len(got[i]) != len(want) {
			t.Errorf("run %s: GET /v1/runs has %d fields, ralph runs --json %d", row.ID, len(got[i]), len(want))
		}
	}
}

// A process that drives a batch (Hold) has the batch's run and its task
// runs still running as its own: live, not interrupted; a run of another
// batch, or one that ended, is not.
func TestRunRowsOfAHeldBatch(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Format(loop.RecordTime)
	recs := []loop.RunRecord{
		{ID: "b1", State: loop.StateRunning, Started: now, Updated: now},
		{ID: "t1", State: loop.StateRunning, Started: now, Updated: now, Batch: "b1"},
		{ID: "t2", State: loop.StateDone, Started: now, Updated: now, Batch: "b1"},
		{ID: "t3", State: loop.StateRunning, Started: now, Updated: now, Batch: "b0"},
	}
	in := Info{PID: 42, Batch: "b1"}
	want := map[string]bool{"b1": true, "t1": true}
	for _, row := range RunRows(recs, &in, time.Now()) {
		if live := row.PID == 42; live != want[row.ID] || live == (row.State == StateInterrupted) && row.ID != "t2" {
			t.Errorf("run %s: pid %d, state %s; want live %v", row.ID, row.PID, row.State, want[row.ID])
		}
	}
}

// The events of a process that drives a batch are every action its runs
// record on the store (the batch's and its task runs'), as they are
// appended; with neither a run nor a batch there are none (409).
func TestEventsOfAHeldBatch(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	_, c := start(t, Options{Store: st, Batch: "b1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := c.Events(ctx, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, run := range []string{"b1", "t1", "t2"} {
		if _, err := st.Append(ctx, action(run, i, "x")); err != nil {
			t.Fatal(err)
		}
	}
	var runs []string
	for e := range evs {
		if e.Kind == loop.EventAction {
			if runs = append(runs, e.Action.RunID); len(runs) == 3 {
				break
			}
		}
	}
	if strings.Join(runs, " ") != "b1 t1 t2" {
		t.Fatalf("events carried the actions of %v, want b1 t1 t2", runs)
	}
	_, c2 := start(t, Options{Store: openStore(t)})
	if _, err := c2.Events(ctx, 1, false); err == nil {
		t.Fatal("a process that drives nothing streamed events")
	}
}
