package serve

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// Info is what GET /v1/info says about the serving process.
type Info struct {
	PID   int    `json:"pid"`
	Store string `json:"store"`
	// StoreID and VerifierKey identify the store (ledger.Store.ID and
	// VerifierKeyString).
	StoreID     string `json:"store_id"`
	VerifierKey string `json:"verifier_key,omitempty"`
	// RunID is the run this process drives ("" when it only holds the
	// store), State its state now, LogFile where its output goes.
	RunID string `json:"run_id,omitempty"`
	// Batch is the batch this process drives ("" for none): the batch's
	// run and its task runs still running are live here.
	Batch   string `json:"batch,omitempty"`
	State   string `json:"state,omitempty"`
	LogFile string `json:"log_file,omitempty"`
	// UIs is how many UIs follow the run now: the process's own (when it
	// shows one) and every attached one.
	UIs int `json:"uis"`
	// Approves says the run waits for plan approvals that a UI answers.
	Approves bool   `json:"approves,omitempty"`
	Head     uint64 `json:"head"`
}

// wireEvent is a loop.Event on the event stream (one JSON object per line).
type wireEvent struct {
	Kind       string           `json:"kind"`
	Time       time.Time        `json:"time"`
	RunID      string           `json:"run_id,omitempty"`
	Iteration  int              `json:"iteration,omitempty"`
	Action     *ledger.Action   `json:"action,omitempty"`
	Plan       *loop.PlanInfo   `json:"plan,omitempty"`
	Evaluation *stop.Evaluation `json:"evaluation,omitempty"`
	State      string           `json:"state,omitempty"`
	Text       string           `json:"text,omitempty"`
	Until      *time.Time       `json:"until,omitempty"`
	Log        *wireLog         `json:"log,omitempty"`
	Dropped    int              `json:"dropped,omitempty"`
	Agent      *agent.Event     `json:"agent,omitempty"`
	CallID     string           `json:"call_id,omitempty"`
}

type wireLog struct {
	Level slog.Level `json:"level"`
	Msg   string     `json:"msg"`
	Attrs string     `json:"attrs,omitempty"`
}

// kindNamed maps a wire kind back to its loop.EventKind.
func kindNamed(name string) (loop.EventKind, bool) {
	for k := loop.EventAction; !strings.HasPrefix(k.String(), "EventKind("); k++ { // every kind loop names
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

func toWire(e *loop.Event) wireEvent {
	w := wireEvent{Kind: e.Kind.String(), Time: e.Time, RunID: e.RunID, Iteration: e.Iteration, Action: e.Action,
		Plan: e.Plan, Evaluation: e.Evaluation, State: e.State, Text: e.Text, Dropped: e.Dropped, Agent: e.Agent, CallID: e.CallID}
	if !e.Until.IsZero() {
		u := e.Until
		w.Until = &u
	}
	if e.Kind == loop.EventLog {
		w.Log = &wireLog{Level: e.Log.Level, Msg: e.Log.Msg, Attrs: e.Log.Attrs}
	}
	return w
}

func fromWire(b []byte) (loop.Event, error) {
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		return loop.Event{}, fmt.Errorf("read an event from the store's server: %w", err)
	}
	k, ok := kindNamed(w.Kind)
	if !ok {
		return loop.Event{}, fmt.Errorf("the store's server sent an event of unknown kind %q", w.Kind)
	}
	e := loop.Event{Kind: k, Time: w.Time, RunID: w.RunID, Iteration: w.Iteration, Action: w.Action, Plan: w.Plan,
		Evaluation: w.Evaluation, State: w.State, Text: w.Text, Dropped: w.Dropped, Agent: w.Agent, CallID: w.CallID}
	if w.Until != nil {
		e.Until = *w.Until
	}
	if w.Log != nil {
		e.Log = loop.LogLine{Level: w.Log.Level, Msg: w.Log.Msg, Attrs: w.Log.Attrs}
	}
	return e, nil
}

// wireReport is a ledger.VerifyReport on the wire (Problem's order rank
// is the server's business).
type wireReport struct {
	Actions      uint64                   `json:"actions"`
	Checkpoints  uint64                   `json:"checkpoints"`
	IndexEntries uint64                   `json:"index_entries"`
	HeadSeq      uint64                   `json:"head_seq"`
	HeadChain    ledger.Hash              `json:"head_chain_hash"`
	TrustedKey   string                   `json:"trusted_key"`
	Pinned       bool                     `json:"pinned"`
	Root         ledger.Hash              `json:"root"`
	Consistent   []ledger.SavedCheckpoint `json:"consistent"`
	Problems     []wireProblem            `json:"problems"`
	Err          string                   `json:"error,omitempty"` // verification could not run
}

// verifyRequest is the body of POST /v1/verify: ledger.VerifyOptions
// without the progress callback.
type verifyRequest struct {
	Key   string                   `json:"key,omitempty"`
	Since []ledger.SavedCheckpoint `json:"since,omitempty"`
}

type wireProblem struct {
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

// errorBody is every error answer: one sentence.
type errorBody struct {
	Error string `json:"error"`
}

// control is the body of POST /v1/control.
type control struct {
	Do        string `json:"do"` // pause, resume, skip, abort, approve, decline
	Iteration int    `json:"iteration,omitempty"`
}
