package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/loop"
)

// Run states. A run is queued until a worker starts it, running while a
// worker drives it, handed-back when a stopping worker returned it to the
// queue, and then ends in one of the final states, named for the class of
// the stop that ended it.
const (
	StateQueued     = "queued"
	StateRunning    = "running"
	StateHandedBack = "handed-back"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"
	StateLimit      = "limit"
	StateAborted    = "aborted"
)

// Final says whether state ends a run: nothing changes it afterwards.
func Final(state string) bool {
	switch state {
	case StateSucceeded, StateFailed, StateLimit, StateAborted:
		return true
	}
	return false
}

func knownState(state string) bool {
	switch state {
	case StateQueued, StateRunning, StateHandedBack:
		return true
	}
	return Final(state)
}

// RunState is a run's entry in the runs bucket (key: the run id).
type RunState struct {
	RunID     string `json:"run_id"`
	State     string `json:"state"`
	Worker    string `json:"worker,omitempty"`
	Goal      string `json:"goal,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Branch    string `json:"branch,omitempty"`
	// SubmittedBy is the member who submitted the run (Job.SubmittedBy).
	SubmittedBy string `json:"submitted_by,omitempty"`
	// Class and Condition name the stop that ended the run, Reason says it
	// in words; Error is the failure that ended it, if one did.
	Class     string  `json:"class,omitempty"`
	Condition string  `json:"condition,omitempty"`
	Reason    string  `json:"reason,omitempty"`
	Error     string  `json:"error,omitempty"`
	Iteration int     `json:"iteration"`
	CostUSD   float64 `json:"cost_usd"`
	Tokens    int64   `json:"tokens"`
	// ChainSkipped counts the messages on the run's chain subject that are
	// not part of its chain (garbage, lines out of order or after the end
	// line), which its workers skipped; ChainNote says why for the first.
	ChainSkipped uint64 `json:"chain_skipped,omitempty"`
	ChainNote    string `json:"chain_note,omitempty"`
	// Deliveries is the job's delivery count when the worker that wrote
	// this state took it (JetStream's NumDelivered): it orders the workers
	// a run has had, so a worker that lost the run cannot overwrite the
	// state of the one that has it now.
	Deliveries int       `json:"deliveries"`
	Submitted  time.Time `json:"submitted"`
	Started    time.Time `json:"started,omitzero"`
	Updated    time.Time `json:"updated"`
}

// Record is the run's state as a store's run record (what `ralph mcp`
// lists for a fleet).
func (s RunState) Record() loop.RunRecord {
	r := loop.RunRecord{ID: s.RunID, State: s.State, Goal: s.Goal, Class: s.Class, Condition: s.Condition, Reason: s.Reason,
		Iterations: s.Iteration, CostUSD: s.CostUSD, Tokens: s.Tokens}
	if !s.Started.IsZero() {
		r.Started = s.Started.UTC().Format(time.RFC3339)
	}
	return r
}

// ErrStale is PutState's error when the run's state was written by a
// later delivery of its job: another worker has the run now, and the
// caller must stop driving it.
var ErrStale = errors.New("another worker has taken the run over")

// ErrRunEnded is PutState's error when the run already has a final state
// and the put would change it.
var ErrRunEnded = errors.New("the run has already ended")

// putTries bounds PutState's compare-and-set retries; each retry means
// another writer put the same run in between, which is rare (a failover
// racing a hand-back, a submit retry racing a worker).
const putTries = 16

// PutState records s in the runs bucket. Writers race only around a
// failover (a worker that lost its run, the one that took it over, a
// retried submit), so PutState reads the current entry and writes with
// kv.Update at that revision (optimistic concurrency), retrying when
// another write came in between. It refuses, with ErrStale, a state from
// an earlier delivery of the job than the one recorded, and, with
// ErrRunEnded, any change to a final state (rewriting the same final
// state from the same delivery is allowed, so a retried put succeeds).
// Updated is set to now when zero.
func PutState(ctx context.Context, kv jetstream.KeyValue, s RunState) error {
	if !validKey(s.RunID) {
		return fmt.Errorf("run id %q cannot be a key of bucket %s (letters, digits and - / _ = . only)", s.RunID, BucketRuns)
	}
	if !knownState(s.State) {
		return fmt.Errorf("run %s: %q is not a run state (queued, running, handed-back, succeeded, failed, limit or aborted)", s.RunID, s.State)
	}
	if s.Updated.IsZero() {
		s.Updated = time.Now().UTC()
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode the state of run %s: %w", s.RunID, err)
	}
	for range putTries {
		e, err := kv.Get(ctx, s.RunID)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = kv.Create(ctx, s.RunID, data)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // written meanwhile: compare with that
			}
		case err != nil:
			return fmt.Errorf("read the state of run %s: %w", s.RunID, err)
		default:
			var cur RunState
			if json.Unmarshal(e.Value(), &cur) == nil {
				if err := admit(cur, s); err != nil {
					return err
				}
			} // an entry that does not decode is replaced
			_, err = kv.Update(ctx, s.RunID, data, e.Revision())
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("record the state of run %s in bucket %s: %w", s.RunID, BucketRuns, err)
		}
		return nil
	}
	return fmt.Errorf("record the state of run %s: %d other writers came in between; try again", s.RunID, putTries)
}

// admit says whether next may replace cur.
func admit(cur, next RunState) error {
	if next.Deliveries < cur.Deliveries {
		return fmt.Errorf("run %s: delivery %d of its job (worker %q) is newer than this one's (%d): %w",
			cur.RunID, cur.Deliveries, cur.Worker, next.Deliveries, ErrStale)
	}
	if Final(cur.State) && (cur.State != next.State || cur.Deliveries != next.Deliveries) {
		return fmt.Errorf("run %s ended %s; its state stays: %w", cur.RunID, cur.State, ErrRunEnded)
	}
	return nil
}

// GetState reads a run's state; found is false when the run has none.
func GetState(ctx context.Context, kv jetstream.KeyValue, runID string) (s RunState, found bool, err error) {
	if !validKey(runID) {
		return RunState{}, false, fmt.Errorf("run id %q is not a run id (letters, digits and - / _ = . only)", runID)
	}
	e, err := kv.Get(ctx, runID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return RunState{}, false, nil
	}
	if err != nil {
		return RunState{}, false, fmt.Errorf("read the state of run %s: %w", runID, err)
	}
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return RunState{}, false, fmt.Errorf("the state of run %s in bucket %s (revision %d) is not a run state: %w", runID, BucketRuns, e.Revision(), err)
	}
	return s, true, nil
}

// ListStates reads every run's state, oldest submitted first (then by run
// id). An entry that does not decode is an error naming it.
func ListStates(ctx context.Context, kv jetstream.KeyValue) ([]RunState, error) {
	var out []RunState
	err := readAll(ctx, kv, func(e jetstream.KeyValueEntry) error {
		var s RunState
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			return fmt.Errorf("the state of run %s in bucket %s (revision %d) is not a run state: %w", e.Key(), BucketRuns, e.Revision(), err)
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, k int) bool {
		if !out[i].Submitted.Equal(out[k].Submitted) {
			return out[i].Submitted.Before(out[k].Submitted)
		}
		return out[i].RunID < out[k].RunID
	})
	return out, nil
}

// WorkerState is a worker's entry in the workers bucket (key: its id),
// put on every heartbeat; it expires when the worker stops.
type WorkerState struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	Slots     int       `json:"slots"`
	Runs      []string  `json:"runs"`
	Heartbeat time.Time `json:"heartbeat"`
	PID       int       `json:"pid"`
}

// PutWorker records w in the workers bucket. Only the worker itself
// writes its entry, so a plain put is enough. Heartbeat is set to now
// when zero.
func PutWorker(ctx context.Context, kv jetstream.KeyValue, w WorkerState) error {
	if !validKey(w.ID) {
		return fmt.Errorf("worker id %q cannot be a key of bucket %s; use letters, digits and - / _ = . only", w.ID, BucketWorkers)
	}
	if w.Heartbeat.IsZero() {
		w.Heartbeat = time.Now().UTC()
	}
	if w.Runs == nil {
		w.Runs = []string{}
	}
	data, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("encode the state of worker %s: %w", w.ID, err)
	}
	if _, err := kv.Put(ctx, w.ID, data); err != nil {
		return fmt.Errorf("record worker %s in bucket %s: %w", w.ID, BucketWorkers, err)
	}
	return nil
}

// ListWorkers reads every live worker's entry, by id.
func ListWorkers(ctx context.Context, kv jetstream.KeyValue) ([]WorkerState, error) {
	var out []WorkerState
	err := readAll(ctx, kv, func(e jetstream.KeyValueEntry) error {
		var w WorkerState
		if err := json.Unmarshal(e.Value(), &w); err != nil {
			return fmt.Errorf("the entry of worker %s in bucket %s is not a worker state: %w", e.Key(), BucketWorkers, err)
		}
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out, nil
}

// readAll calls fn for the latest value of every key in the bucket: one
// watcher delivers them all, then a nil entry marks the end of what the
// bucket held.
func readAll(ctx context.Context, kv jetstream.KeyValue, fn func(jetstream.KeyValueEntry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("read bucket %s: %w", kv.Bucket(), err)
	}
	defer w.Stop() // the error of stopping a finished read changes nothing
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("read bucket %s: the watch ended early", kv.Bucket())
			}
			if e == nil {
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("read bucket %s: %w", kv.Bucket(), ctx.Err())
		}
	}
}

// validKey says whether k can be a KV key: JetStream's key alphabet
// (letters, digits, '-', '/', '_', '=', '.'), no leading or trailing dot
// and no empty token.
func validKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '/', c == '_', c == '=':
		case c == '.':
			if k[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}
