package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/stop"
)

// decide evaluates the stop conditions after an iteration whose actions are
// last, and returns how the run ends, or nil to go on. trig is the action
// after which a completion predicate held, if one did; failed holds the
// completion predicates that could not be evaluated during the iteration,
// whose results are those errors (and their error_class).
func (r *Runner) decide(ctx, runCtx context.Context, st *runState, index *stop.Index, last []ledger.Action,
	trig *ledger.Action, trigName string, failed map[string]error) (*Outcome, error) {
	// Command checks are effects too: everything before them is already
	// durable (iterate syncs after its last record; a resumed run's
	// actions are on disk and resume records nothing before this).
	// Checks run under the run's deadline too: a slow command check
	// cannot carry the run past max_duration.
	if _, err := r.runHooks(ctx, st, st.startedID, HookEvent{At: "before_stop_check"}); err != nil {
		return nil, err
	}
	ev, err := r.eval.Evaluate(runCtx, stop.Input{RunID: st.id, Iteration: st.iteration, Started: st.started,
		Now: r.o.Now(), CostUSD: st.cost, Tokens: st.tokens, ConsecutiveFailures: st.failures, LastActions: last,
		Audit: index, Workdir: r.o.Config.Loop.Workdir, StoreDir: r.o.Store.Dir(), HeadSeq: r.o.Store.Head().Seq, Failed: failed,
		EchoesStored: r.o.Orchestrator.EchoesStored})
	if ctx.Err() != nil {
		return abortOutcome(ctx), nil
	}
	if err != nil {
		if runCtx.Err() != nil {
			return r.durationOutcome(), nil
		}
		return nil, err
	}
	st.lastEval = &ev
	st.feedback.Conditions = conditionStatus(ev.Results)
	strong := ev.ShouldStop && (ev.Class == stop.ClassAbort || ev.Class == stop.ClassFailure)
	switch {
	case trig != nil && !strong: // a completion predicate held; failure still beats it
		return &Outcome{Class: stop.ClassSuccess, TriggeredBy: trigName,
			Reason:   fmt.Sprintf("the completion predicate held after %s %s (seq %d)", trig.Type, trig.FunctionName, trig.Seq),
			Evidence: fmt.Sprintf("trigger action %s", trig.ActionID), trigger: trig}, nil
	case ev.ShouldStop:
		out := &Outcome{Class: ev.Class, TriggeredBy: ev.TriggeredBy, Reason: ev.Reason}
		if t := ev.Trigger(); t != nil {
			out.Evidence = t.Evidence
		}
		return out, nil
	case runCtx.Err() != nil: // the deadline passed during the checks
		return r.durationOutcome(), nil
	}
	return nil, nil
}

// deferredRecorder records the stop evaluations deferred: each is made
// durable with the next iteration's first records, or by the run's end.
type deferredRecorder struct{ s *ledger.Store }

func (d deferredRecorder) Append(ctx context.Context, a *ledger.Action) (ledger.Receipt, error) {
	_, err := d.s.AppendDeferred(ctx, a)
	return ledger.Receipt{}, err
}

// preflight stops the run before an iteration that a budget forbids:
// cost and tokens by the mean of previous iterations, so no limit is
// overshot.
func (r *Runner) preflight(runCtx, ctx context.Context, st *runState) *Outcome {
	if ctx.Err() != nil {
		return abortOutcome(ctx)
	}
	if runCtx.Err() != nil {
		return r.durationOutcome()
	}
	f := stop.BeforeIteration(r.o.Conditions, stop.Spent{Iteration: st.iteration, Cost: st.cost, Tokens: st.tokens,
		DoneIters: st.doneIters, DoneCost: st.doneCost, DoneTokens: st.doneTokens})
	if f == nil {
		return nil
	}
	return &Outcome{Class: f.Class, TriggeredBy: f.Cond.Name, Reason: f.Reason, Evidence: f.Evidence}
}

// durationOutcome is the outcome of the run's time limit passing: the
// condition with the soonest deadline, by its class.
func (r *Runner) durationOutcome() *Outcome {
	c, d := stop.Deadline(r.o.Conditions)
	name, class := "max_duration", stop.ClassLimit
	if c != nil {
		name, class = c.Name, c.Class
	}
	return &Outcome{Class: class, TriggeredBy: name, Reason: fmt.Sprintf("max_duration %s reached", d)}
}

// maxDuration is the run's time limit (0: none), asked of its conditions.
func (r *Runner) maxDuration() time.Duration {
	_, d := stop.Deadline(r.o.Conditions)
	return d
}

// conditionStatus is what the provider sees of each stop condition.
func conditionStatus(rs []stop.Result) []arbiter.ConditionStatus {
	out := make([]arbiter.ConditionStatus, len(rs))
	for i, r := range rs {
		out[i] = arbiter.ConditionStatus{Name: r.Name, Kind: r.Kind, Class: string(r.Class), Met: r.Met,
			Progress: r.Progress, Detail: r.Detail, Reason: r.Reason, Evidence: r.Evidence}
	}
	return out
}
