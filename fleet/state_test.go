package fleet

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// PutState orders a run's writers by the delivery of its job they took,
// and a final state stays.
func TestPutStateFencesEarlierDeliveriesAndKeepsTheEnd(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)
	id := netJob(t).RunID
	put := func(state, worker string, delivery int) error {
		return PutState(ctx, h.Runs, RunState{RunID: id, State: state, Worker: worker, Deliveries: delivery})
	}
	steps := []struct {
		state, worker string
		delivery      int
		want          error
	}{
		{StateQueued, "", 0, nil},
		{StateRunning, "w1", 1, nil},
		{StateRunning, "w1", 1, nil},
		{StateRunning, "w2", 2, nil},      // failover: w2 took the redelivered job
		{StateRunning, "w1", 1, ErrStale}, // the zombie w1 may not write
		{StateSucceeded, "w1", 1, ErrStale},
		{StateSucceeded, "w2", 2, nil},
		{StateSucceeded, "w2", 2, nil}, // a retried final put
		{StateRunning, "w2", 2, ErrRunEnded},
		{StateFailed, "w3", 3, ErrRunEnded},
	}
	for i, s := range steps {
		err := put(s.state, s.worker, s.delivery)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("step %d: put %s by %s (delivery %d): %v, want %v", i, s.state, s.worker, s.delivery, err, s.want)
		}
	}
	got, found, err := GetState(ctx, h.Runs, id)
	if err != nil || !found || got.State != StateSucceeded || got.Worker != "w2" || got.Updated.IsZero() {
		t.Errorf("final state %+v, %v, %v; want succeeded by w2 with an update time", got, found, err)
	}
}

// Writers racing on one run all end, and the latest delivery wins.
func TestPutStateRacingWriters(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)
	id := netJob(t).RunID
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for d := 1; d <= 8; d++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := PutState(ctx, h.Runs, RunState{RunID: id, State: StateRunning, Worker: fmt.Sprintf("w%d", d), Deliveries: d})
			if err != nil && !errors.Is(err, ErrStale) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, _, err := GetState(ctx, h.Runs, id)
	if err != nil || got.Deliveries != 8 || got.Worker != "w8" {
		t.Errorf("after the race: %+v, %v; want delivery 8 by w8", got, err)
	}
}

func TestPutStateRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)
	for _, c := range []struct {
		s    RunState
		want string
	}{
		{RunState{RunID: "a b", State: StateQueued}, "cannot be a key"},
		{RunState{RunID: "", State: StateQueued}, "cannot be a key"},
		{RunState{RunID: "r1", State: "done"}, "is not a run state"},
	} {
		if err := PutState(ctx, h.Runs, c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PutState(%+v): %v, want %q", c.s, err, c.want)
		}
	}
	if _, err := h.Runs.Put(ctx, "r2", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := GetState(ctx, h.Runs, "r2"); err == nil || !strings.Contains(err.Error(), "r2") {
		t.Errorf("GetState of a corrupt entry: %v, want an error naming it", err)
	}
	if _, err := ListStates(ctx, h.Runs); err == nil || !strings.Contains(err.Error(), "r2") {
		t.Errorf("ListStates with a corrupt entry: %v, want an error naming it", err)
	}
	if _, found, err := GetState(ctx, h.Runs, "r3"); found || err != nil {
		t.Errorf("GetState of no run: found %v, %v", found, err)
	}
}

func TestListStatesOldestSubmittedFirst(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)
	if got, err := ListStates(ctx, h.Runs); err != nil || len(got) != 0 {
		t.Fatalf("an empty bucket lists %v, %v", got, err)
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	order := []int{3, 0, 4, 1, 2}
	var want []string
	ids := make([]string, len(order))
	for i := range order {
		ids[i] = netJob(t).RunID
	}
	for i := range order {
		want = append(want, ids[i])
	}
	for k := len(order) - 1; k >= 0; k-- { // put newest first
		i := order[k]
		if err := PutState(ctx, h.Runs, RunState{RunID: ids[i], State: StateQueued, Submitted: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// A later state of the oldest run is listed once, with its latest value.
	if err := PutState(ctx, h.Runs, RunState{RunID: ids[0], State: StateRunning, Worker: "w1", Deliveries: 1, Submitted: base}); err != nil {
		t.Fatal(err)
	}
	got, err := ListStates(ctx, h.Runs)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, s := range got {
		gotIDs = append(gotIDs, s.RunID)
	}
	if strings.Join(gotIDs, " ") != strings.Join(want, " ") {
		t.Errorf("listed %v, want oldest first %v", gotIDs, want)
	}
	if got[0].State != StateRunning {
		t.Errorf("the oldest run lists as %q, want its latest state running", got[0].State)
	}
}

func TestWorkers(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)
	for _, w := range []WorkerState{
		{ID: "host-b.2", Host: "host-b", Slots: 2, PID: 2},
		{ID: "host-a.1", Host: "host-a", Slots: 4, Runs: []string{"r1", "r2"}, PID: 1},
	} {
		if err := PutWorker(ctx, h.Workers, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := PutWorker(ctx, h.Workers, WorkerState{ID: "host a"}); err == nil || !strings.Contains(err.Error(), "worker id") {
		t.Errorf("a worker id with a space: %v", err)
	}
	got, err := ListWorkers(ctx, h.Workers)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "host-a.1" || got[1].ID != "host-b.2" || len(got[0].Runs) != 2 || got[1].Runs == nil || got[0].Heartbeat.IsZero() {
		t.Errorf("workers %+v", got)
	}
}

func TestValidKey(t *testing.T) {
	t.Parallel()
	for k, want := range map[string]bool{
		"0190a0b2-7c3e-7def-8abc-0123456789ab": true, "host.1": true, "a/b=c_d": true,
		"": false, ".a": false, "a.": false, "a..b": false, "a b": false, "a*": false, "a>": false, "é": false,
	} {
		if got := validKey(k); got != want {
			t.Errorf("validKey(%q) = %v, want %v", k, got, want)
		}
	}
}
