package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// Run states, persisted with each run.
const (
	StateRunning = "running"
	StateDone    = "done"    // a success-class stop
	StateFailed  = "failed"  // a failure-class stop
	StateStopped = "stopped" // a limit-class stop
	StateAborted = "aborted" // the user aborted
)

// Exit codes of DESIGN §3, by stop class.
const (
	ExitSuccess = 0
	ExitFailure = 1
	ExitUsage   = 2 // the provider cannot serve the run (bad key, unknown model)
	ExitLimit   = 3
	ExitAborted = 4
)

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	Config       *config.Config
	Store        *ledger.Store
	Orchestrator *Orchestrator
	Provider     arbiter.Provider
	Conditions   []*stop.Condition     // from stop.FromConfig
	Predicates   []CompletionPredicate // success-class predicates watched after every action
	Intent       arbiter.Intent
	// Approve, when set, is asked before each plan runs; false skips the iteration.
	Approve func(ctx context.Context, iteration int, plan string) (bool, error)
	// OnIterationEnd, when set, is called once per counted iteration, after
	// its plan ran (or was skipped, refused or cut short) and before its
	// IterationCompleted is recorded: a fleet worker commits and pushes the
	// iteration's workspace there. The metadata it returns goes on
	// IterationCompleted (the runner's own keys win). An error ends the run as
	// a failure (condition "iteration_end") after that IterationCompleted,
	// which carries the error.
	//
	// It is called for an iteration an abort, a signal, a hand-back or
	// max_duration cut short too, with a context those do not cancel: the
	// iteration counts on the chain (a resume continues after it), so what it
	// left in the workspace is recorded with it. It is not called for an
	// iteration stopped at an agent's usage limit, which is not counted and
	// runs again under its number.
	OnIterationEnd func(ctx context.Context, iteration int) (map[string]rtfs.Value, error)
	// SubmittedBy names who submitted the run (a fleet member, §17); it is
	// recorded on RunStarted as submitted_by.
	SubmittedBy string
	// Batch is the id of the batch run this run is a task of (DESIGN
	// §23), "" for a run of its own: RunStarted records it as batch, and
	// the run's record (RunRecord.Batch) names it.
	Batch string
	// Follow, when set, is given the run's events from its start
	// ([[notify]]); it must end by itself after the run's closing action,
	// or when its context ends. Run returns once the channel it returned
	// is closed.
	Follow func(ctx context.Context, events <-chan Event) <-chan struct{}
	// Sandbox confines every process the run starts (nil: off): Run puts
	// it on the run's context (sandbox.With), which every call, command
	// condition, hook and notify command is started with; RunStarted
	// records its mechanism as sandbox. The caller closes it.
	Sandbox *sandbox.Sandbox
	// StoreMoved: the default store was moved out of the workdir for the
	// sandbox; RunStarted records where it is as store_moved.
	StoreMoved bool
	// Resume continues RunID from its last completed iteration.
	RunID  string
	Resume bool
	Now    func() time.Time
	Logger *slog.Logger // nil: slog.Default()
}

// CompletionPredicate is a success-class predicate stop condition, evaluated
// after every action of the run rather than once per iteration.
type CompletionPredicate struct {
	Name string
	Pred *stop.Predicate
}

// Outcome is how a run ended, with the condition that ended it.
type Outcome struct {
	RunID       string
	State       string
	Class       stop.Class
	TriggeredBy string // the condition's name
	Reason      string
	Evidence    string
	Iterations  int
	CostUSD     float64
	Tokens      int64
	ExitCode    int
	FinalSeq    uint64 // the Run* action that closed the run
	// StillFailing is, for a run that did not end in success, each success
	// condition that did not hold at its last stop evaluation, with why
	// (a run stopped by max_iterations while its tests fail).
	StillFailing []stop.Unmet

	trigger   *ledger.Action // the action after which a completion predicate held
	usageExit bool           // the run could not work at all (exit 2)
}

// abortOutcome says who aborted the run: Abort (the UI), a signal, or a
// batch whose other attempt merged first.
func abortOutcome(ctx context.Context) *Outcome {
	c := cancelledBy(ctx)
	if c != nil && c.By == CancelAbort {
		return &Outcome{Class: stop.ClassAbort, TriggeredBy: "user_abort", Reason: "aborted by the user"}
	}
	if c != nil && c.By == CancelSuperseded {
		return &Outcome{Class: stop.ClassAbort, TriggeredBy: CancelSuperseded, Reason: c.Error()}
	}
	out := &Outcome{Class: stop.ClassAbort, TriggeredBy: "user_signal", Reason: "interrupted by the user"}
	if c != nil && c.Reason != "" {
		out.Evidence = c.Reason
	}
	return out
}

// Runner runs one Ralph loop: plan, admit, execute, record, evaluate the
// stop conditions, repeat.
type Runner struct {
	o    RunnerOptions
	eval *stop.Evaluator
	bus  *Bus
	log  *slog.Logger
	ctl  control
	// started is the run's state once RunStarted is recorded (or found),
	// for the requests recorded from other goroutines (RecordRequest).
	started atomic.Pointer[runState]
	// reqMu orders recorded requests with the closing action: ended is
	// set under it once the closing action is recorded, after which no
	// request is recorded.
	reqMu sync.Mutex
	ended bool
	ckpt  checkpoints
}

// NewRunner checks the options and builds the evaluator.
func NewRunner(o RunnerOptions) (*Runner, error) {
	if o.Config == nil || o.Store == nil || o.Orchestrator == nil || o.Provider == nil {
		return nil, errors.New("runner needs a config, a store, an orchestrator and a provider")
	}
	if len(o.Conditions) == 0 && len(o.Predicates) == 0 {
		return nil, errors.New("a run needs at least one stop condition; add a [[stop]] such as max_iterations")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Resume && o.RunID == "" {
		return nil, errors.New("resume needs the run id")
	}
	if o.RunID == "" {
		o.RunID = NewID()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := CheckHooks(o.Config); err != nil {
		return nil, err
	}
	return &Runner{o: o, bus: NewBus(o.Store, o.RunID), log: o.Logger.With("run", o.RunID),
		ctl: control{pauseReq: make(chan struct{}, 1)}}, nil
}

// RunID is the run's id, known before Run starts.
func (r *Runner) RunID() string { return r.o.RunID }

// Events is the run's event bus.
func (r *Runner) Events() *Bus { return r.bus }

type runState struct {
	id, intentID, startedID string
	batch                   string // the batch the run is a task of ("" for none)
	started                 time.Time
	iteration               int
	cost                    float64
	tokens                  int64
	doneIters               int     // completed iterations, whose mean spend preflight projects
	doneCost                float64 // their cost
	doneTokens              int64   // their tokens
	failures                int
	feedback                arbiter.Feedback
	abort                   string             // set when the run cannot go on (approval impossible)
	fatal                   string             // a provider error no retry can fix: the run stops with exit 2
	denied                  *capability.Denial // the agent was refused a tool it needed: the run stops after this iteration
	lastEval                *stop.Evaluation   // the last stop evaluation (on resume, the last recorded one)
	unevaluated             []ledger.Action    // resume: the last completed iteration, when it was never evaluated
	closed                  bool               // the closing action is recorded
	limited                 *limitWait         // the last iteration stopped at an account limit: wait, then run it again
	limitWaits              int                // consecutive limit waits, for the backoff when no reset is known
	endFailed               string             // OnIterationEnd failed: the run ends as a failure
	refusals                refusalStreak      // the sandbox's refusals, by consecutive iterations that met them
	sandboxDenied           *sandbox.Denial    // met in SandboxDeniedStreak iterations in a row: the run ends after this one
}

// Run runs iterations until a stop condition fires, a predicate holds, or
// ctx is cancelled (an abort: the running plan's compensations run).
func (r *Runner) Run(ctx context.Context) (out *Outcome, err error) {
	ctx = sandbox.With(ctx, r.o.Sandbox)
	endFollow := r.follow(ctx)
	defer func() { endFollow(err == nil && out != nil) }()
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	defer r.watchStore(abort)()
	defer func() {
		// A store found lost ends the run with what happened to it: what
		// failed on the way (a cancelled call, a refused record) follows
		// from it.
		if lost := r.o.Store.LostErr(); lost != nil {
			out, err = nil, lost
		}
	}()
	r.ctl.mu.Lock()
	r.ctl.abort = abort
	if r.ctl.aborted {
		abort(&Cancelled{By: CancelAbort})
	}
	r.ctl.mu.Unlock()
	st, err := r.start(ctx)
	if err != nil {
		return nil, err
	}
	r.started.Store(st)
	out, err = r.loop(ctx, st)
	if err != nil {
		return r.closeOnError(ctx, st, err)
	}
	return out, nil
}

// watchStore cancels the run (abort) when its store is found lost, so a
// run waiting on a long call learns of it at once; it returns the function
// that stops watching.
func (r *Runner) watchStore(abort context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-r.o.Store.Lost():
			abort(&Cancelled{By: CancelStoreLost, Reason: r.o.Store.LostErr().Error()})
		case <-done:
		}
	}()
	return func() { close(done) }
}

// closeOnError closes a run that cannot go on because of err (the store
// failed, a completion predicate could not be fed): no run ends without its
// closing action. When even that cannot be recorded, err is returned and
// the run stays open for resume.
func (r *Runner) closeOnError(ctx context.Context, st *runState, err error) (*Outcome, error) {
	if st.closed {
		return nil, err
	}
	out := &Outcome{Class: stop.ClassFailure, TriggeredBy: "error", Reason: err.Error()}
	if ctx.Err() != nil {
		out = abortOutcome(ctx)
		out.Evidence = err.Error()
	}
	if _, ferr := r.finish(ctx, st, out); ferr != nil {
		if errors.Is(ferr, ErrHandedBack) {
			return nil, ferr
		}
		return nil, err
	}
	return out, nil
}

// loop runs iterations of a started run until it ends.
func (r *Runner) loop(ctx context.Context, st *runState) (*Outcome, error) {
	r.eval = stop.NewEvaluator(r.o.Conditions, stop.Options{Ledger: deferredRecorder{r.o.Store}, RunID: st.id, Now: r.o.Now, Logger: r.log})
	if st.lastEval != nil {
		r.eval.Restore(*st.lastEval) // no_progress counts carry on across the crash
	}
	defer r.releaseMapped(ctx)()
	index := stop.NewIndex()
	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFeed()
	fed, err := r.feedIndex(feedCtx, st.id, index)
	if err != nil {
		return nil, err
	}

	runCtx := ctx
	if d := r.maxDuration(); d > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithDeadlineCause(ctx, st.started.Add(d),
			&Cancelled{By: CancelMaxDuration, Reason: fmt.Sprintf("max_duration %s reached", d)})
		defer cancel()
	}
	out, err := r.resumeUnfinished(ctx, runCtx, st, index)
	for out == nil && err == nil {
		out, err = r.nextIteration(ctx, runCtx, st, fed, index)
	}
	if err != nil {
		return nil, err
	}
	return r.finish(ctx, st, out)
}

// delay waits d between iterations. An abort or max_duration ends it; a
// pause takes effect at once (no step is executing) and the wait goes on
// after Resume, wall-clock like max_duration.
func (r *Runner) delay(runCtx context.Context, st *runState, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	now := r.o.Now()
	r.bus.delaying(Event{Kind: EventDelay, Iteration: st.iteration, Until: now.Add(d), Time: now,
		Text: fmt.Sprintf("[loop].delay %s before iteration %d", d, st.iteration+1)})
	defer r.bus.delaying(Event{})
	for {
		select {
		case <-t.C:
			return nil
		case <-runCtx.Done():
			return nil
		case <-r.ctl.pauseReq:
			if err := r.gate(runCtx, st); err != nil && runCtx.Err() == nil {
				return err
			}
		}
	}
}

// start records RunStarted (or, on resume, finds it) and the run's state.
func (r *Runner) start(ctx context.Context) (*runState, error) {
	st := &runState{id: r.o.RunID, started: r.o.Now(), batch: r.o.Batch}
	if r.o.Resume {
		st, err := r.resumeState(ctx, st)
		if err != nil {
			return nil, err
		}
		// A replaying provider (script) continues after the answers the
		// completed iterations used; an interrupted iteration gets its answer again.
		if s, ok := r.o.Provider.(interface{ Skip(n int) }); ok {
			s.Skip(st.iteration)
		}
		r.bus.setState(StateRunning, r.o.Now())
		return st, nil
	}
	st.intentID = st.id
	cfg := r.o.Config
	meta := map[string]rtfs.Value{
		"config":   rtfs.String(cfg.Snapshot()),
		"provider": rtfs.String(cfg.Model.Provider),
		"model":    rtfs.String(cfg.Model.Model),
		"goal":     rtfs.String(cfg.Intent.Goal),
	}
	if r.o.SubmittedBy != "" {
		meta["submitted_by"] = rtfs.String(r.o.SubmittedBy)
	}
	if r.o.Batch != "" {
		meta["batch"] = rtfs.String(r.o.Batch)
	}
	if r.o.Sandbox != nil {
		meta["sandbox"] = rtfs.String(r.o.Sandbox.Mechanism())
	}
	if r.o.StoreMoved {
		meta["store_moved"] = rtfs.String(r.o.Store.Dir())
	}
	r.checkpoint(ctx, st.id, 0, meta)
	id, err := r.record(ctx, st, &ledger.Action{Type: ledger.RunStarted, FunctionName: cfg.Intent.Goal, Success: true, Metadata: meta, Timestamp: st.started})
	if err != nil {
		return nil, err
	}
	st.startedID = id
	if err := r.durable(ctx); err != nil {
		return nil, err
	}
	err = r.saveState(ctx, st, StateRunning, nil)
	r.bus.setState(StateRunning, r.o.Now())
	return st, err
}

func (r *Runner) record(ctx context.Context, st *runState, a *ledger.Action) (string, error) {
	if a.ActionID == "" {
		a.ActionID = NewID()
	}
	a.RunID, a.IntentID = st.id, st.intentID
	r.o.Orchestrator.RedactAction(a)
	if a.ParentActionID == "" && a.Type != ledger.RunStarted {
		a.ParentActionID = st.startedID
	}
	if a.Timestamp.IsZero() {
		a.Timestamp = r.o.Now()
	}
	// Bookkeeping rides in the ledger's next group commit; durable makes
	// it durable before anything it records can have an effect.
	if _, err := r.o.Store.AppendDeferred(context.WithoutCancel(ctx), a); err != nil {
		return "", fmt.Errorf("record %s: %w", a.Type, err)
	}
	return a.ActionID, nil
}

// durable makes every action the run recorded so far durable (and
// visible to readers and subscribers). The runner calls it before any
// effect outside the ledger (the plan's capability calls sync themselves),
// before the stop conditions run their checks, before it asks a person to
// approve a plan, and before the run record says what happened.
func (r *Runner) durable(ctx context.Context) error {
	if err := r.o.Store.Sync(context.WithoutCancel(ctx)); err != nil {
		if lost := r.o.Store.LostErr(); lost != nil {
			return lost // says it all
		}
		return fmt.Errorf("make the run's actions durable: %w", err)
	}
	return nil
}

// iterate runs one iteration and returns the seq its actions start after.
func (r *Runner) iterate(ctx context.Context, st *runState) (uint64, error) {
	it := &iteration{begin: r.o.Store.Head().Seq, t0: r.o.Now(), status: ledger.StatusOK}
	var err error
	it.id, err = r.record(ctx, st, &ledger.Action{Type: ledger.IterationStarted, FunctionName: fmt.Sprintf("iteration %d", st.iteration),
		Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(st.iteration))}})
	if err != nil {
		return 0, err
	}
	ictx, skip := context.WithCancelCause(ctx)
	defer skip(nil)
	r.ctl.mu.Lock()
	r.ctl.skip = skip
	r.ctl.mu.Unlock()
	defer func() {
		r.ctl.mu.Lock()
		r.ctl.skip = nil
		r.ctl.mu.Unlock()
	}()
	it.ctx = ictx

	if fail, err := r.runHooks(ctx, st, it.id, HookEvent{At: "before_iteration"}); err != nil {
		return 0, err
	} else if fail != "" { // on_failure = "fail_iteration": the plan is not asked for
		return r.hookFailedIteration(ctx, st, it.id, it.begin, it.t0, fail)
	}
	if err := r.askPlan(ctx, st, it); err != nil {
		return 0, err
	}
	if err := r.admit(ctx, st, it); err != nil {
		return 0, err
	}
	if it.status == ledger.StatusOK {
		if err := r.executePlan(ctx, st, it); err != nil {
			return 0, err
		}
	}
	if err := r.afterIterationHooks(ctx, st, it); err != nil {
		return 0, err
	}
	it.refused, it.refusedMore = r.iterationRefusals(it.refused)
	r.account(st, it)
	if err := r.closeIteration(ctx, st, r.completedAction(st, it)); err != nil {
		return 0, err
	}
	return it.begin, nil
}

// endIteration calls OnIterationEnd for a counted iteration whose closing
// action is done, and puts what it returns (or its error) on done.
func (r *Runner) endIteration(ctx context.Context, st *runState, done *ledger.Action) error {
	if r.o.OnIterationEnd == nil || st.limited != nil {
		return nil
	}
	// The hook's effects (a pushed commit) come after the iteration's
	// actions are durable, like every effect outside the ledger.
	if err := r.durable(ctx); err != nil {
		return err
	}
	meta, err := r.o.OnIterationEnd(context.WithoutCancel(ctx), st.iteration)
	for k, v := range meta {
		if _, ok := done.Metadata[k]; !ok {
			done.Metadata[k] = v
		}
	}
	if err != nil {
		msg := fmt.Sprintf("the end of iteration %d failed: %v", st.iteration, err)
		st.endFailed = msg
		done.Success = false
		if done.ErrorMessage != "" {
			msg = done.ErrorMessage + "; " + msg
		}
		done.ErrorMessage = msg
	}
	return nil
}

// planCtx is the plan context: params plus :iteration, :run-id and :last.
func (r *Runner) planCtx(st *runState) rtfs.Value {
	m := r.o.Intent.Params.AsMap()
	if m == nil {
		m = rtfs.NewMap()
	}
	last := rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("iteration"), rtfs.Int(int64(st.feedback.Iteration)),
		rtfs.Keyword("failures"), stringsValue(st.feedback.Failures)))
	m = m.Assoc(rtfs.Keyword("iteration"), rtfs.Int(int64(st.iteration))).
		Assoc(rtfs.Keyword("run-id"), rtfs.String(st.id)).
		Assoc(rtfs.Keyword("last"), last)
	return rtfs.MapValue(m)
}

// actionsSince returns the run's actions after seq from its first
// IterationStarted on: the last iteration's, without the previous stop
// evaluation that may have committed with them.
func (r *Runner) actionsSince(runID string, seq uint64) ([]ledger.Action, error) {
	var out []ledger.Action
	// Range reads from seq on, so the cost is the iteration's own actions,
	// not the whole run's.
	err := r.o.Store.Range(seq+1, func(a ledger.Action) error {
		if len(out) == 0 && a.Type != ledger.IterationStarted {
			return nil
		}
		if a.RunID == runID {
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// finish records the run's closing action and state, unless the run was
// handed back (ErrHandedBack): then it has not ended, and records nothing.
func (r *Runner) finish(ctx context.Context, st *runState, out *Outcome) (*Outcome, error) {
	if c := cancelledBy(ctx); c != nil && c.By == CancelHandBack {
		return nil, ErrHandedBack
	}
	out.RunID, out.Iterations, out.CostUSD, out.Tokens = st.id, st.iteration, st.cost, st.tokens
	typ, state := ledger.RunStopped, StateStopped
	switch out.Class {
	case stop.ClassSuccess:
		typ, state, out.ExitCode = ledger.RunCompleted, StateDone, ExitSuccess
	case stop.ClassFailure:
		typ, state, out.ExitCode = ledger.RunFailed, StateFailed, ExitFailure
	case stop.ClassAbort:
		typ, state, out.ExitCode = ledger.RunAborted, StateAborted, ExitAborted
	default:
		out.ExitCode = ExitLimit
	}
	if out.usageExit {
		out.ExitCode = ExitUsage
	}
	out.State = state
	if out.Class != stop.ClassSuccess && st.lastEval != nil {
		out.StillFailing = st.lastEval.Unmet()
	}
	if _, err := r.runHooks(ctx, st, st.startedID, HookEvent{At: "on_stop", Class: string(out.Class), Condition: out.TriggeredBy, Reason: out.Reason}); err != nil {
		return nil, err
	}
	r.closeCheckpoints()
	{
		a := &ledger.Action{Type: typ, FunctionName: out.TriggeredBy, Success: out.Class == stop.ClassSuccess,
			Cost: st.cost, Metadata: map[string]rtfs.Value{
				"condition": rtfs.String(out.TriggeredBy), "class": rtfs.String(string(out.Class)),
				"reason": rtfs.String(out.Reason), "evidence": rtfs.String(out.Evidence),
				"iterations": rtfs.Int(int64(st.iteration)), "tokens": rtfs.Int(st.tokens),
				"inputs_fresh_at": rtfs.String(r.o.Now().UTC().Format(time.RFC3339Nano)),
			}}
		if out.Class != stop.ClassSuccess {
			a.ErrorMessage = out.Reason
		}
		if t := out.trigger; t != nil {
			a.Metadata[stop.MetaTriggerActionID] = rtfs.String(t.ActionID)
			a.Metadata[stop.MetaTriggerSeq] = rtfs.Int(int64(t.Seq))
		}
		r.reqMu.Lock()
		id, err := r.record(ctx, st, a)
		r.ended = err == nil
		r.reqMu.Unlock()
		if err != nil {
			return nil, err
		}
		st.closed = true
		// A deferred append that failed before (a full disk) fails Sync, but
		// a closing action that committed after it still ends the run.
		if err := r.durable(ctx); err != nil {
			if _, gerr := r.o.Store.Get(id); gerr != nil {
				return nil, err
			}
		}
		out.FinalSeq = r.o.Store.Head().Seq
	}
	err := r.saveState(ctx, st, state, out)
	r.bus.setState(state, r.o.Now())
	return out, err
}

// planAction is the PlanGenerated record of a provider's answer.
func planAction(iterID string, resp arbiter.PlanResponse, perr error) *ledger.Action {
	u := resp.Usage
	meta := map[string]rtfs.Value{"mode": rtfs.String(resp.Mode), "repairs": rtfs.Int(int64(resp.Repairs)),
		"model": rtfs.String(resp.Model), "prompt_tokens": rtfs.Int(u.PromptTokens), "completion_tokens": rtfs.Int(u.CompletionTokens)}
	if len(resp.Attempts) > 0 {
		b := rtfs.NewMapBuilder(len(resp.Attempts))
		for mode, n := range resp.Attempts {
			b.Set(rtfs.String(mode), rtfs.Int(int64(n)))
		}
		meta["attempts"] = rtfs.MapValue(b.Map())
	}
	if len(resp.Diagnostics) > 0 {
		var sb strings.Builder
		for _, d := range resp.Diagnostics {
			fmt.Fprintf(&sb, "%s#%d %s", d.Mode, d.Attempt, d.Stage)
			if d.Pos != "" {
				sb.WriteString(" " + d.Pos)
			}
			sb.WriteString(": " + d.Message)
			if d.Fix != "" {
				sb.WriteString(" — " + d.Fix)
			}
			sb.WriteByte('\n')
		}
		meta["diagnostics"] = rtfs.String(strings.TrimSuffix(sb.String(), "\n"))
	}
	if resp.IR != "" {
		meta["ir"] = rtfs.String(resp.IR)
	}
	if resp.IRDiff != "" {
		meta["ir_diff"] = rtfs.String(resp.IRDiff)
	}
	if resp.Raw != "" && resp.Raw != resp.Source {
		meta["raw"] = rtfs.String(resp.Raw)
	}
	gen := &ledger.Action{Type: ledger.PlanGenerated, ParentActionID: iterID, FunctionName: resp.Provider,
		Arguments: []rtfs.Value{rtfs.String(resp.Source)}, Success: perr == nil, Cost: u.CostUSD, Metadata: meta}
	if perr != nil {
		gen.ErrorMessage = perr.Error()
	}
	return gen
}
