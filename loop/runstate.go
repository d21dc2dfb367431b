package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// RunKVPrefix is where run records live in the store's kv table: the
// namespace ledger.KVRun of the store's layout.
const RunKVPrefix = ledger.KVRun

// RecordTime is the layout of a run record's times: RFC 3339 in UTC with
// milliseconds, so that a run's duration is known to the millisecond and
// the times sort as strings.
const RecordTime = "2006-01-02T15:04:05.000Z07:00"

// saveState persists the run's state and counters.
func (r *Runner) saveState(ctx context.Context, st *runState, state string, out *Outcome) error {
	return r.o.Store.KV().Put(context.WithoutCancel(ctx), ledger.RunKVKey(st.id), runRecord(st, r.o.Config.Intent.Goal, state, out, r.o.Now()))
}

// runRecord is the record of a run kept under ledger.RunKVKey(id): its state
// and counters, and how it ended (out, nil while it has not).
func runRecord(st *runState, goal, state string, out *Outcome, updated time.Time) rtfs.Value {
	rec := RunRecord{ID: st.id, State: state, Goal: goal, Iterations: st.iteration, CostUSD: st.cost, Tokens: st.tokens,
		Started: st.started.UTC().Format(RecordTime), Updated: updated.UTC().Format(RecordTime), Batch: st.batch}
	evidence := ""
	if out != nil {
		rec.Class, rec.Condition, rec.Reason, evidence = string(out.Class), out.TriggeredBy, out.Reason, out.Evidence
	}
	return recordValue(rec, evidence)
}

// recordValue is rec as the kv table keeps it; the class, condition,
// reason and evidence only once the run has ended (rec.Class set).
func recordValue(rec RunRecord, evidence string) rtfs.Value {
	b := rtfs.NewMapBuilder(14)
	b.Set(rtfs.Keyword("id"), rtfs.String(rec.ID))
	b.Set(rtfs.Keyword("state"), rtfs.Keyword(rec.State))
	b.Set(rtfs.Keyword("goal"), rtfs.String(rec.Goal))
	b.Set(rtfs.Keyword("iterations"), rtfs.Int(int64(rec.Iterations)))
	b.Set(rtfs.Keyword("cost"), rtfs.Float(rec.CostUSD))
	b.Set(rtfs.Keyword("tokens"), rtfs.Int(rec.Tokens))
	b.Set(rtfs.Keyword("started"), rtfs.String(rec.Started))
	b.Set(rtfs.Keyword("updated"), rtfs.String(rec.Updated))
	if rec.Batch != "" {
		b.Set(rtfs.Keyword("batch"), rtfs.String(rec.Batch))
	}
	if rec.Tasks > 0 {
		b.Set(rtfs.Keyword("tasks"), rtfs.Int(int64(rec.Tasks)))
	}
	if rec.Class != "" {
		b.Set(rtfs.Keyword("class"), rtfs.Keyword(rec.Class))
		b.Set(rtfs.Keyword("condition"), rtfs.String(rec.Condition))
		b.Set(rtfs.Keyword("reason"), rtfs.String(rec.Reason))
		b.Set(rtfs.Keyword("evidence"), rtfs.String(evidence))
	}
	return rtfs.MapValue(b.Map())
}

// PutRunRecord writes rec as the record of run rec.ID, in the form a
// Runner keeps its own (times in RecordTime): for a record that no Runner
// keeps, a batch's (DESIGN §23), so `ralph runs` lists it beside its
// tasks' runs.
func PutRunRecord(ctx context.Context, st *ledger.Store, rec RunRecord) error {
	return st.KV().Put(context.WithoutCancel(ctx), ledger.RunKVKey(rec.ID), recordValue(rec, ""))
}

// ErrCannotResume marks a resume request for a run this store cannot
// continue: there is no such run, or it already ended. It is the caller's
// mistake (exit status 2), not a run-time failure.
var ErrCannotResume = errors.New("cannot resume")

// resumeState rebuilds a run's state from the chain: the iteration count
// carries on, and an iteration the crash interrupted runs again under its
// own number.
func (r *Runner) resumeState(ctx context.Context, st *runState) (*runState, error) {
	rec, ok, err := r.o.Store.KV().Get(ctx, ledger.RunKVKey(st.id))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no run %s in this store; `ralph runs` lists them%w", st.id, errSilent{ErrCannotResume})
	}
	state := rec.AsMap().GetKey("state").Str()
	if state != StateRunning && state != StateAborted && state != StatePaused {
		return nil, fmt.Errorf("run %s already ended (%s); start a new run instead%w", st.id, state, errSilent{ErrCannotResume})
	}
	acts, err := r.o.Store.ByRun(st.id)
	if err != nil {
		return nil, err
	}
	lastFrom, lastTo := tally(st, acts)
	if state != StateAborted {
		st.limited = limitedOnResume(acts)
	}
	// A crash between IterationCompleted and StopConditionsEvaluated left
	// that iteration unevaluated. (An abort skips the evaluation on purpose.)
	if state != StateAborted && lastFrom >= 0 && (st.lastEval == nil || st.lastEval.Iteration < st.iteration) {
		st.unevaluated = slices.Clone(acts[lastFrom : lastTo+1])
	}
	if st.startedID == "" {
		return nil, fmt.Errorf("run %s has no RunStarted on the chain", st.id)
	}
	return st, r.saveState(ctx, st, StateRunning, nil)
}

// tally reads a run's counters from its actions into st: where it
// started, the iterations it completed, what it spent, its consecutive
// failures and its last stop evaluation. It returns the bounds of the last
// completed iteration's actions in acts (-1, -1 when none completed).
func tally(st *runState, acts []ledger.Action) (lastFrom, lastTo int) {
	// Spend is summed from what was actually spent (calls and plan
	// generation), so an iteration the crash interrupted still counts. A
	// PlanGenerated sums its iteration's LlmConsultations, so those count
	// only while no PlanGenerated has closed them: the consultations of a
	// plan generation the crash interrupted.
	var spent, pendingCost float64
	var tokens, pendingTokens int64
	iterStart := -1
	lastFrom, lastTo = -1, -1 // the last completed iteration's actions
	for i := range acts {
		a := &acts[i]
		switch a.Type {
		case ledger.RunStarted:
			st.startedID, st.intentID, st.started = a.ActionID, a.IntentID, a.Timestamp
			st.batch = a.Metadata["batch"].Str()
		case ledger.IterationStarted:
			iterStart = i
			spent, tokens = spent+pendingCost, tokens+pendingTokens
			pendingCost, pendingTokens = 0, 0
		case ledger.LlmConsultation:
			pendingCost += a.Cost
			pendingTokens += metaTokens(a.Metadata)
		case ledger.CapabilityCall:
			spent += a.Cost
			tokens += metaTokens(a.Metadata)
		case ledger.PlanGenerated:
			pendingCost, pendingTokens = 0, 0
			spent += a.Cost
			tokens += metaTokens(a.Metadata)
		case ledger.StopConditionsEvaluated:
			if ev, err := stop.EvaluationFromAction(a); err == nil {
				st.lastEval = &ev
			}
		case ledger.IterationCompleted:
			if ledger.StatusOf(a) == ledger.StatusUsageLimit {
				continue // not counted: it runs again once the limit lifts
			}
			st.iteration = int(a.Metadata["iteration"].AsInt())
			lastFrom, lastTo = iterStart, i
			st.doneIters, st.doneCost = st.doneIters+1, st.doneCost+a.Cost
			st.doneTokens += a.Result.AsMap().GetKey("tokens").AsInt()
			if a.Success {
				st.failures = 0
			} else {
				st.failures++
			}
			st.refusals = st.refusals.next(RefusalsOf(a.Metadata))
		}
	}
	st.cost, st.tokens = spent+pendingCost, tokens+pendingTokens
	return lastFrom, lastTo
}

// RunRecord is one run as `ralph runs` lists it; the tags are the field
// names of `ralph runs --json`.
type RunRecord struct {
	ID         string  `json:"id"`
	State      string  `json:"state"`
	Goal       string  `json:"goal"`
	Class      string  `json:"class"`
	Condition  string  `json:"condition"`
	Reason     string  `json:"reason"`
	Started    string  `json:"started"`
	Updated    string  `json:"updated"` // when the record was last saved (RFC 3339); for an ended run, when it ended
	Iterations int     `json:"iterations"`
	CostUSD    float64 `json:"cost_usd"`
	Tokens     int64   `json:"tokens"`
	// Batch is the batch run this run is a task of (DESIGN §23), ""
	// for a run of its own; Tasks is, for a batch's own record, how many
	// tasks it runs (0 for any other run).
	Batch string `json:"batch,omitempty"`
	Tasks int    `json:"tasks,omitempty"`
}

// ListRuns reads every run record in the store, oldest first.
func ListRuns(st *ledger.Store) ([]RunRecord, error) {
	var out []RunRecord
	err := st.KV().Scan(RunKVPrefix, func(_ string, v rtfs.Value) bool {
		m := v.AsMap()
		out = append(out, RunRecord{ID: m.GetKey("id").Str(), State: m.GetKey("state").Str(), Goal: m.GetKey("goal").Str(),
			Class: m.GetKey("class").Str(), Condition: m.GetKey("condition").Str(), Reason: m.GetKey("reason").Str(),
			Started: m.GetKey("started").Str(), Updated: m.GetKey("updated").Str(), Iterations: int(m.GetKey("iterations").AsInt()),
			CostUSD: m.GetKey("cost").AsFloat(), Tokens: m.GetKey("tokens").AsInt(),
			Batch: m.GetKey("batch").Str(), Tasks: int(m.GetKey("tasks").AsInt())})
		return true
	})
	return out, err
}

// errSilent wraps a sentinel so errors.Is matches it while its text adds
// nothing to the message.
type errSilent struct{ err error }

func (e errSilent) Error() string { return "" }
func (e errSilent) Unwrap() error { return e.err }
