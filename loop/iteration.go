package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// resumeUnfinished picks up what a dead process left undone: an iteration
// whose stop conditions were never evaluated, or a wait for an agent's
// limit to lift. It returns nil, nil when the loop goes on.
func (r *Runner) resumeUnfinished(ctx, runCtx context.Context, st *runState, index *stop.Index) (*Outcome, error) {
	if st.unevaluated != nil {
		// The dead process completed an iteration but died before its stop
		// conditions were evaluated: evaluate them now, so a stop that
		// iteration earned is not missed by running another.
		out, err := r.decide(ctx, runCtx, st, index, st.unevaluated, nil, "", nil)
		if err != nil || out != nil {
			return out, err
		}
	}
	if st.limited != nil { // the dead process was waiting for an agent's limit to lift
		return r.waitLimit(runCtx, ctx, st)
	}
	return nil, nil
}

// nextIteration runs one pass of the loop: the gate, the preflight, the
// iteration, the stop decision, the saved state and the delay. It returns
// the outcome when the run ends, nil, nil when it goes on.
func (r *Runner) nextIteration(ctx, runCtx context.Context, st *runState, fed *indexFeed, index *stop.Index) (*Outcome, error) {
	if err := r.gate(runCtx, st); err != nil && runCtx.Err() == nil {
		return nil, err
	}
	if out := r.preflight(runCtx, ctx, st); out != nil {
		return out, nil
	}
	st.iteration++
	iterSeq, err := r.iterate(runCtx, st)
	if err != nil {
		return nil, err
	}
	fed.waitFor(r.o.Store.Head().Seq)
	trig, trigName, failed := fed.triggered(func(i int) string { return r.o.Predicates[i].Name })
	if out := r.cutShort(ctx, runCtx, st); out != nil {
		return out, nil
	}
	if st.limited != nil { // the iteration runs again once the limit lifts; nothing was decided
		return r.waitLimit(runCtx, ctx, st)
	}
	last, err := r.actionsSince(st.id, iterSeq)
	if err != nil {
		return nil, err
	}
	if out, err := r.decide(ctx, runCtx, st, index, last, trig, trigName, failed); out != nil || err != nil {
		return out, err
	}
	if err := r.saveState(ctx, st, StateRunning, nil); err != nil {
		return nil, err
	}
	if d := r.o.Config.Loop.Delay.Duration; d > 0 {
		if err := r.delay(runCtx, st, d); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// cutShort is the outcome of a run that must end after this iteration
// whatever its stop conditions say (the iteration's end failed, approval
// became impossible, the provider failed for good, a tool was denied, an
// abort, max_duration), or nil.
func (r *Runner) cutShort(ctx, runCtx context.Context, st *runState) *Outcome {
	switch {
	case st.endFailed != "":
		return &Outcome{Class: stop.ClassFailure, TriggeredBy: "iteration_end", Reason: st.endFailed}
	case st.abort != "":
		return &Outcome{Class: stop.ClassAbort, TriggeredBy: "approve", Reason: st.abort}
	case st.fatal != "":
		return &Outcome{Class: stop.ClassFailure, TriggeredBy: "provider", Reason: st.fatal, usageExit: true}
	case st.denied != nil && ctx.Err() == nil:
		return deniedOutcome(st.denied)
	case st.sandboxDenied != nil && ctx.Err() == nil:
		return sandboxDeniedOutcome(*st.sandboxDenied)
	case ctx.Err() != nil:
		return abortOutcome(ctx)
	case runCtx.Err() != nil:
		return r.durationOutcome()
	}
	return nil
}

// iteration is one iteration in progress: its opening action, the context
// a skip cancels, the plan it was given and how it has gone so far.
type iteration struct {
	id     string    // its IterationStarted action
	begin  uint64    // the head seq before it
	t0     time.Time // when it started
	ctx    context.Context
	resp   arbiter.PlanResponse
	perr   error // the provider's error
	status ledger.IterationStatus
	// failures go into the closing action and the next prompt.
	failures   []string
	planCost   float64
	planTokens int64
	// refused are what the sandbox refused in the iteration: its calls'
	// (from the plan), then those that came while no call was in flight;
	// refusedMore counts those left out past sandbox.MaxRefusals.
	refused     []sandbox.Denial
	refusedMore int
	cost        float64 // the plan's and the provider's, once accounted
	tokens      int64
}

// skipped reports whether the user skipped the iteration.
func (it *iteration) skipped() bool {
	c := cancelledBy(it.ctx)
	return c != nil && c.By == CancelSkip
}

// askPlan asks the provider for the iteration's plan and records its answer.
func (r *Runner) askPlan(ctx context.Context, st *runState, it *iteration) error {
	obs := &observer{r: r, ctx: ctx, st: st, parent: it.id, iteration: st.iteration}
	it.resp, it.perr = r.o.Provider.Plan(it.ctx, arbiter.PlanRequest{Intent: r.o.Intent, Iteration: st.iteration, Feedback: st.feedback, Observer: obs})
	if obs.err != nil {
		return obs.err
	}
	_, err := r.record(ctx, st, planAction(it.id, it.resp, it.perr))
	return err
}

// admit decides whether the plan runs: not when the iteration was skipped
// or the provider failed, nor when a person must approve it and does not.
func (r *Runner) admit(ctx context.Context, st *runState, it *iteration) error {
	switch {
	case it.skipped():
		it.status = ledger.StatusSkipped
	case it.perr != nil && cancelledBy(it.ctx) != nil: // an abort or a signal while the plan was asked for
		it.status, it.failures = ledger.StatusCancelled, []string{it.perr.Error()}
	case it.perr != nil:
		it.status, it.failures = ledger.StatusProviderError, []string{it.perr.Error()}
		if errors.Is(it.perr, arbiter.ErrFatal) {
			st.fatal = it.perr.Error()
		}
	case r.o.Approve != nil:
		return r.approvePlan(ctx, st, it)
	}
	return nil
}

// approvePlan asks a person to approve the plan; the iteration is skipped
// unless they do, and the run ends when nobody can answer any more.
func (r *Runner) approvePlan(ctx context.Context, st *runState, it *iteration) error {
	resp := it.resp
	info := PlanInfo{Iteration: st.iteration, Source: resp.Source, Provider: resp.Provider, Model: resp.Model,
		Mode: resp.Mode, Repairs: resp.Repairs, OK: true}
	if err := r.durable(ctx); err != nil {
		return err
	}
	r.bus.awaitApproval(Event{Kind: EventApprove, Iteration: st.iteration, Plan: &info, Time: r.o.Now()})
	ok, err := r.o.Approve(it.ctx, st.iteration, resp.Source)
	r.bus.awaitApproval(Event{})
	switch {
	case it.skipped():
		it.status = ledger.StatusSkipped
	case err != nil: // nobody can approve any more: close the iteration, then the run
		it.status, it.failures, st.abort = ledger.StatusSkipped, []string{err.Error()}, err.Error()
	case !ok:
		it.status = ledger.StatusSkipped
	}
	return nil
}

// executePlan runs the admitted plan and sets the status from how it
// ended; an account limit or a denied tool is noted on st.
func (r *Runner) executePlan(ctx context.Context, st *runState, it *iteration) error {
	res, err := r.o.Orchestrator.Execute(it.ctx, PlanInput{File: fmt.Sprintf("iteration-%d.rtfs", st.iteration), Source: it.resp.Source,
		RunID: st.id, IntentID: st.intentID, ParentActionID: it.id, Ctx: r.planCtx(st), Deferred: true,
		BeforeStep: func(ctx context.Context) error { return r.gate(ctx, st) }, Stream: r.streamAgent(st.iteration)})
	if res != nil {
		it.planCost, it.planTokens = res.Cost, res.Tokens
		if res.Limit != nil && !it.skipped() && ctx.Err() == nil {
			st.limited = &limitWait{limit: *res.Limit, parent: it.id}
		}
		if res.Denial != nil && st.limited == nil {
			st.denied = res.Denial
		}
		it.refused = res.Refused
	}
	switch {
	case err != nil && errors.Is(err, ErrRefused):
		it.status, it.failures = ledger.StatusRefused, []string{err.Error()}
	case err != nil:
		return err
	case res.Err == nil: // completed: a skip that came after the last step undoes nothing
	case it.skipped():
		it.status = ledger.StatusSkipped
	case cancelledBy(it.ctx) != nil: // an abort, a signal, max_duration
		it.status, it.failures = ledger.StatusCancelled, []string{res.Err.Error()}
	default:
		it.status, it.failures = ledger.StatusFailed, []string{res.Err.Error()}
	}
	return nil
}

// afterIterationHooks runs the after_iteration hooks of an iteration that
// counts; a failing hook fails an iteration that succeeded.
func (r *Runner) afterIterationHooks(ctx context.Context, st *runState, it *iteration) error {
	if st.limited != nil {
		return nil
	}
	ev := HookEvent{At: "after_iteration", Status: string(it.status), Error: strings.Join(it.failures, "; ")}
	fail, err := r.runHooks(ctx, st, it.id, ev)
	if err != nil {
		return err
	}
	if fail != "" && it.status.Succeeded() {
		it.status, it.failures = ledger.StatusFailed, append(it.failures, fail)
	}
	return nil
}

// account adds the iteration's spend to the run and, when the iteration
// counts, its outcome to the failure count and the next prompt's feedback.
func (r *Runner) account(st *runState, it *iteration) {
	usage := it.resp.Usage
	it.cost, it.tokens = it.planCost+usage.CostUSD, it.planTokens+usage.Tokens()
	st.cost += it.cost
	st.tokens += it.tokens
	if st.limited != nil {
		// Spent, but not an iteration: it runs again once the limit lifts, and
		// its feedback, failure count and budget projection stay as they were.
		it.status = ledger.StatusUsageLimit
		return
	}
	st.refusals = st.refusals.next(it.refused)
	if d, ok := st.refusals.held(it.refused); ok {
		st.sandboxDenied = &d
	}
	st.doneIters, st.doneCost, st.doneTokens = st.doneIters+1, st.doneCost+it.cost, st.doneTokens+it.tokens
	st.limitWaits = 0
	if it.status.Succeeded() {
		st.failures = 0
	} else {
		st.failures++
	}
	fed := make([]string, len(it.failures)) // they go into the next prompt: no secret may travel with them
	for i, f := range it.failures {
		fed[i] = r.o.Orchestrator.Redact(f)
	}
	st.feedback = arbiter.Feedback{Iteration: st.iteration, Status: string(it.status), LastPlan: r.o.Orchestrator.Redact(it.resp.Source), Failures: fed}
}

// completedAction is the iteration's closing IterationCompleted action.
func (r *Runner) completedAction(st *runState, it *iteration) *ledger.Action {
	dur := r.o.Now().Sub(it.t0).Milliseconds()
	summary := rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("status"), rtfs.Keyword(string(it.status)), rtfs.Keyword("cost"), rtfs.Float(it.cost),
		rtfs.Keyword("tokens"), rtfs.Int(it.tokens), rtfs.Keyword("duration-ms"), rtfs.Int(dur)))
	done := &ledger.Action{Type: ledger.IterationCompleted, ParentActionID: it.id, FunctionName: fmt.Sprintf("iteration %d", st.iteration),
		Success: it.status.Succeeded(), Result: summary, Cost: it.cost, DurationMS: dur,
		Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(st.iteration)), "status": rtfs.String(string(it.status))}}
	if len(it.failures) > 0 {
		done.ErrorMessage = strings.Join(it.failures, "; ")
	}
	if len(it.refused) > 0 || it.refusedMore > 0 {
		putRefusals(done.Metadata, it.refused, it.refusedMore)
	}
	if c := cancelledBy(it.ctx); c != nil && (it.status == ledger.StatusSkipped || it.status == ledger.StatusCancelled) {
		done.Metadata["stopped"], done.Metadata["cancelled_by"] = rtfs.String("cancelled"), rtfs.String(c.By)
	}
	return done
}

// closeIteration ends the iteration: OnIterationEnd, a checkpoint, the
// closing action recorded and made durable, then the on_error hooks. An
// iteration stopped at an account limit is not counted.
func (r *Runner) closeIteration(ctx context.Context, st *runState, done *ledger.Action) error {
	if err := r.endIteration(ctx, st, done); err != nil {
		return err
	}
	if st.limited == nil {
		r.checkpoint(ctx, st.id, st.iteration, done.Metadata)
	}
	if _, err := r.record(ctx, st, done); err != nil {
		return err
	}
	if err := r.durable(ctx); err != nil { // the completion feed, the stop conditions and readers see it all
		return err
	}
	if err := r.onError(ctx, st, done); err != nil {
		return err
	}
	if st.limited != nil {
		st.iteration-- // not counted: the loop runs it again under its number
	}
	return nil
}
