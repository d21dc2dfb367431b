package stop

import (
	"fmt"
	"sync"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// Metadata keys of the RunCompleted action that a completion predicate
// ended: the action after which the predicate first held.
const (
	MetaTriggerActionID = "trigger_action_id"
	MetaTriggerSeq      = "trigger_seq"
)

// Evaluation is the outcome of evaluating every condition once.
type Evaluation struct {
	Iteration   int              `json:"iteration"`
	ShouldStop  bool             `json:"should_stop"`
	Class       Class            `json:"class,omitempty"` // the trigger's class
	TriggeredBy string           `json:"triggered_by,omitempty"`
	Reason      string           `json:"reason,omitempty"`
	Results     []Result         `json:"results"` // priority order
	Progressed  []ProgressChange `json:"progressed,omitempty"`
	At          time.Time        `json:"at"`
	Duration    time.Duration    `json:"duration_ns"`
}

// Trigger returns the result that decided the stop, or nil.
func (ev *Evaluation) Trigger() *Result {
	for i := range ev.Results {
		if ev.ShouldStop && ev.Results[i].Name == ev.TriggeredBy {
			return &ev.Results[i]
		}
	}
	return nil
}

// ProgressChange is a condition whose progress moved since the previous
// evaluation.
type ProgressChange struct {
	Condition string  `json:"condition"`
	Previous  float64 `json:"previous"`
	Current   float64 `json:"current"`
	First     bool    `json:"first,omitempty"` // no previous evaluation had it
}

// EventKind names an evaluator event.
type EventKind string

// Events, in the order one evaluation emits them: Started; then per
// condition ConditionTimeout (if it timed out) and ConditionEvaluated, in
// completion order; then ConditionProgressed per change, StopTriggered when
// it stops, and Completed.
const (
	EventStarted             EventKind = "started"
	EventConditionEvaluated  EventKind = "condition_evaluated"
	EventConditionProgressed EventKind = "condition_progressed"
	EventStopTriggered       EventKind = "stop_triggered"
	EventCompleted           EventKind = "completed"
	EventConditionTimeout    EventKind = "condition_timeout"
)

// Event is one evaluator event; which fields are set depends on Kind.
type Event struct {
	Kind       EventKind
	Iteration  int
	Count      int           // Started: conditions to evaluate
	Condition  string        // the condition's name
	Result     Result        // ConditionEvaluated, ConditionTimeout, StopTriggered
	Previous   float64       // ConditionProgressed
	Current    float64       // ConditionProgressed
	Class      Class         // StopTriggered, Completed
	Reason     string        // StopTriggered
	ShouldStop bool          // Completed
	Duration   time.Duration // Completed: the evaluation; ConditionTimeout: the timeout
}

// ring keeps the last n evaluations.
type ring struct {
	mu    sync.Mutex
	items []Evaluation
	next  int
	full  bool
}

func newRing(n int) *ring { return &ring{items: make([]Evaluation, n)} }

func (r *ring) add(ev Evaluation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items[r.next] = ev
	r.next = (r.next + 1) % len(r.items)
	if r.next == 0 {
		r.full = true
	}
}

func (r *ring) all() []Evaluation {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]Evaluation(nil), r.items[:r.next]...)
	}
	return append(append([]Evaluation(nil), r.items[r.next:]...), r.items[:r.next]...)
}

// The ledger form of an evaluation: a StopConditionsEvaluated action whose
// result is a map with the fields of Evaluation (kebab-case keywords) and
// whose metadata carries iteration, should_stop, class and triggered_by.

func evaluationAction(runID string, ev Evaluation) *ledger.Action {
	results := make([]rtfs.Value, len(ev.Results))
	for i, r := range ev.Results {
		kv := []rtfs.Value{
			kw("name"), rtfs.String(r.Name), kw("kind"), rtfs.String(r.Kind), kw("class"), rtfs.String(string(r.Class)),
			kw("priority"), rtfs.Int(int64(r.Priority)), kw("met"), rtfs.Bool(r.Met), kw("reason"), rtfs.String(r.Reason),
			kw("progress"), rtfs.Float(r.Progress), kw("detail"), rtfs.String(r.Detail), kw("evidence"), rtfs.String(r.Evidence),
			kw("duration-us"), rtfs.Int(r.Duration.Microseconds()), kw("cache-hit"), rtfs.Bool(r.CacheHit),
			kw("timed-out"), rtfs.Bool(r.TimedOut),
		}
		if r.Err != "" {
			kv = append(kv, kw("error"), rtfs.String(r.Err))
		}
		results[i] = rtfs.MapValue(rtfs.NewMap(kv...))
	}
	progressed := make([]rtfs.Value, len(ev.Progressed))
	for i, p := range ev.Progressed {
		progressed[i] = rtfs.MapValue(rtfs.NewMap(kw("condition"), rtfs.String(p.Condition),
			kw("previous"), rtfs.Float(p.Previous), kw("current"), rtfs.Float(p.Current), kw("first"), rtfs.Bool(p.First)))
	}
	res := rtfs.MapValue(rtfs.NewMap(
		kw("iteration"), rtfs.Int(int64(ev.Iteration)), kw("should-stop"), rtfs.Bool(ev.ShouldStop),
		kw("class"), rtfs.String(string(ev.Class)), kw("triggered-by"), rtfs.String(ev.TriggeredBy),
		kw("reason"), rtfs.String(ev.Reason), kw("results"), rtfs.Vector(results),
		kw("progressed"), rtfs.Vector(progressed), kw("at"), rtfs.String(ev.At.UTC().Format(time.RFC3339Nano)),
		kw("duration-us"), rtfs.Int(ev.Duration.Microseconds()),
	))
	return &ledger.Action{Type: ledger.StopConditionsEvaluated, RunID: runID, FunctionName: "stop", Success: true,
		Result: res, DurationMS: ev.Duration.Milliseconds(), Metadata: map[string]rtfs.Value{
			"iteration": rtfs.Int(int64(ev.Iteration)), "should_stop": rtfs.Bool(ev.ShouldStop),
			"class": rtfs.String(string(ev.Class)), "triggered_by": rtfs.String(ev.TriggeredBy),
		}}
}

func kw(s string) rtfs.Value { return rtfs.Keyword(s) }

// EvaluationFromAction reads back the evaluation a StopConditionsEvaluated
// action records.
func EvaluationFromAction(a *ledger.Action) (Evaluation, error) {
	if a.Type != ledger.StopConditionsEvaluated {
		return Evaluation{}, fmt.Errorf("seq %d is a %s, not a StopConditionsEvaluated action", a.Seq, a.Type)
	}
	m := a.Result.AsMap()
	if a.Result.Kind() != rtfs.KindMap || m == nil {
		return Evaluation{}, fmt.Errorf("seq %d: the evaluation is not a map", a.Seq)
	}
	ev := Evaluation{
		Iteration: int(m.GetKey("iteration").AsInt()), ShouldStop: m.GetKey("should-stop").Truthy(),
		Class: Class(m.GetKey("class").Str()), TriggeredBy: m.GetKey("triggered-by").Str(),
		Reason: m.GetKey("reason").Str(), Duration: time.Duration(m.GetKey("duration-us").AsInt()) * time.Microsecond,
	}
	ev.At, _ = time.Parse(time.RFC3339Nano, m.GetKey("at").Str()) // a zero time is the honest answer to a bad one
	for _, v := range m.GetKey("results").Items() {
		r := v.AsMap()
		if v.Kind() != rtfs.KindMap || r == nil {
			return Evaluation{}, fmt.Errorf("seq %d: a result is not a map", a.Seq)
		}
		ev.Results = append(ev.Results, Result{
			Name: r.GetKey("name").Str(), Kind: r.GetKey("kind").Str(), Class: Class(r.GetKey("class").Str()),
			Priority: int(r.GetKey("priority").AsInt()), Met: r.GetKey("met").Truthy(), Reason: r.GetKey("reason").Str(),
			Progress: r.GetKey("progress").AsFloat(), Detail: r.GetKey("detail").Str(), Evidence: r.GetKey("evidence").Str(),
			Duration: time.Duration(r.GetKey("duration-us").AsInt()) * time.Microsecond,
			CacheHit: r.GetKey("cache-hit").Truthy(), TimedOut: r.GetKey("timed-out").Truthy(), Err: r.GetKey("error").Str(),
		})
	}
	for _, v := range m.GetKey("progressed").Items() {
		p := v.AsMap()
		if v.Kind() != rtfs.KindMap || p == nil {
			continue
		}
		ev.Progressed = append(ev.Progressed, ProgressChange{Condition: p.GetKey("condition").Str(),
			Previous: p.GetKey("previous").AsFloat(), Current: p.GetKey("current").AsFloat(), First: p.GetKey("first").Truthy()})
	}
	return ev, nil
}
