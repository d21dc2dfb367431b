package loop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// frame is the orchestration context of running code: the action its
// records hang under, the compensation scope it pushes onto, and (for the
// primary step of a saga) where to report that step's action id.
type frame struct {
	parent  string
	scope   *scope
	primary *primarySlot
	// Where calls in this frame run, for the run-time governance check:
	// inside a step with a contract, inside the primary step of a saga.
	contracted, compensated bool
}

// primarySlot is where the primary step of a saga reports its action id
// and whether its own :post failed (which compensates it at once).
type primarySlot struct {
	id         string
	postFailed bool
	idemKey    string // the primary's idempotency record, cleared when it is compensated
}

type frameKey struct{}

func withFrame(ctx context.Context, f *frame) context.Context {
	return context.WithValue(ctx, frameKey{}, f)
}

func frameOf(ctx context.Context) *frame {
	if f, ok := ctx.Value(frameKey{}).(*frame); ok {
		return f
	}
	return &frame{scope: &scope{}}
}

// scope is a compensation stack: entries run LIFO when the scope fails.
type scope struct {
	mu      sync.Mutex
	entries []compEntry
}

type compEntry struct {
	name      string // the compensating step's name
	primary   string // the primary step's PlanStepStarted action id
	primaryNm string
	idemKey   string
	run       func(ctx context.Context, host rtfs.Host) (rtfs.Value, error)
}

func (s *scope) push(e compEntry) {
	s.mu.Lock()
	s.entries = append(s.entries, e)
	s.mu.Unlock()
}

// take empties the scope and returns its entries in push order.
func (s *scope) take() []compEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries
	s.entries = nil
	return e
}

// mergeInto hands a finished child scope's entries to its parent, so a later
// failure of the parent compensates them too.
func (s *scope) mergeInto(parent *scope) {
	for _, e := range s.take() {
		parent.push(e)
	}
}

// compensate runs the scope's compensations LIFO. It runs even when ctx was
// cancelled (an abort), bounded by CompensationTimeout each.
func (r *run) compensate(ctx context.Context, s *scope) {
	entries := s.take()
	for i := len(entries) - 1; i >= 0; i-- {
		r.runCompensation(ctx, entries[i])
	}
}

func (r *run) runCompensation(ctx context.Context, e compEntry) {
	base := context.WithoutCancel(ctx)
	meta := map[string]rtfs.Value{"primary_action_id": rtfs.String(e.primary), "primary_step": rtfs.String(e.primaryNm)}
	started, err := r.record(base, &ledger.Action{Type: ledger.CompensationStarted, ParentActionID: e.primary,
		FunctionName: e.name, Success: true, Metadata: meta})
	if err != nil {
		r.noteFailedCompensation(e.name)
		return
	}
	cctx, cancel, cut := r.compensationContext(ctx, withFrame(base, &frame{parent: started, scope: &scope{}}))
	start := r.now()
	v, runErr := e.run(cctx, r)
	cutOff := context.Cause(cctx) == cut
	cancel()
	end := &ledger.Action{ParentActionID: started, FunctionName: e.name, Metadata: maps.Clone(meta),
		DurationMS: r.now().Sub(start).Milliseconds()}
	switch {
	case cutOff:
		end.Type, end.ErrorMessage = ledger.CompensationFailed, cut.Reason
		end.Metadata[MetaCutOff] = rtfs.Bool(true)
		r.noteFailedCompensation(e.name)
	case runErr != nil:
		end.Type, end.ErrorMessage = ledger.CompensationFailed, runErr.Error()
		r.noteFailedCompensation(e.name)
	default:
		end.Type, end.Success, end.Result = ledger.CompensationCompleted, true, dataOnly(v)
		if e.idemKey != "" && r.kv != nil {
			// The primary's effect is undone: a rerun must perform it again.
			// The record is cleared with the CompensationCompleted that says so.
			sctx, staged := ledger.StageKV(base)
			if err := r.kv.Put(sctx, e.idemKey, rtfs.Nil); err != nil {
				end.ErrorMessage = "compensated, but clearing the idempotency record failed: " + err.Error()
			} else {
				end.Metadata[MetaIdempotencyCleared] = rtfs.String(e.idemKey)
				end.KV = staged.Writes()
			}
		}
	}
	if _, err := r.record(base, end); err != nil {
		r.noteFailedCompensation(e.name)
	}
}

// SignalCompensationGrace is how long the compensations of a plan whose
// run a signal aborted may take together: ralph ends within 5 s of a
// signal (DESIGN §18), and the last second is for recording the abort,
// the last notifications and closing the store.
const SignalCompensationGrace = 4 * time.Second

// MetaCutOff marks a CompensationFailed that a signal's grace cut off.
const MetaCutOff = "cut_off"

// compensationContext is the context a compensation runs in: bounded by
// CompensationTimeout, and, once a signal aborts the run (ctx) — before
// the compensation started or while it runs — by the signal's grace
// shared by all of the plan's compensations, whose end cancels it with
// cut as the cause.
func (r *run) compensationContext(ctx, base context.Context) (context.Context, context.CancelFunc, *Cancelled) {
	cctx, cancel := context.WithTimeout(base, r.compTO)
	cut := &Cancelled{By: CancelSignal, Reason: fmt.Sprintf("cut off: ralph ends within 5s of a signal, and its compensations get %s of them in all", r.sigGrace)}
	gctx, gcancel := context.WithCancelCause(cctx)
	var mu sync.Mutex
	var timer *time.Timer
	stopWatch := context.AfterFunc(ctx, func() {
		if c := cancelledBy(ctx); c == nil || c.By != CancelSignal {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(time.Until(r.signalGraceEnd()), func() { gcancel(cut) })
	})
	return gctx, func() {
		stopWatch()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		gcancel(nil)
		cancel()
	}, cut
}

// signalGraceEnd is when a signal's grace for the plan's compensations
// ends: sigGrace after the first compensation that saw the signal.
func (r *run) signalGraceEnd() time.Time {
	r.graceMu.Lock()
	defer r.graceMu.Unlock()
	if r.graceEnd.IsZero() {
		r.graceEnd = time.Now().Add(r.sigGrace)
	}
	return r.graceEnd
}

func (r *run) noteFailedCompensation(name string) {
	r.stats.mu.Lock()
	r.stats.failedCmp = append(r.stats.failedCmp, name)
	r.stats.mu.Unlock()
}

// Compensated runs the primary step and keeps the compensation on the
// current scope. A postcondition failure of the primary compensates at once.
func (r *run) Compensated(ctx context.Context, req *rtfs.CompensationRequest) (rtfs.Value, error) {
	f := frameOf(ctx)
	slot := &primarySlot{}
	v, err := req.Primary(withFrame(ctx, &frame{parent: f.parent, scope: f.scope, primary: slot}))
	e := compEntry{name: req.CompensationName, primary: slot.id, primaryNm: req.PrimaryName, run: req.Compensation, idemKey: slot.idemKey}
	if err != nil {
		if slot.postFailed {
			r.runCompensation(ctx, e)
		}
		return v, err
	}
	f.scope.push(e)
	return v, nil
}

func contractType(err error) string {
	var e *rtfs.Error
	if errors.As(err, &e) && strings.HasPrefix(e.Type, "contract/") {
		return e.Type
	}
	return ""
}

// Parallel runs branches concurrently; the first failure cancels the
// others. Each branch has its own compensation scope: a failed branch
// compensates itself, completed branches join the parent scope.
func (r *run) Parallel(ctx context.Context, req *rtfs.ParallelRequest) ([]rtfs.Value, error) {
	f := frameOf(ctx)
	out := make([]rtfs.Value, len(req.Branches))
	scopes := make([]*scope, len(req.Branches))
	ok := make([]bool, len(req.Branches))
	g, gctx := errgroup.WithContext(ctx)
	for i, b := range req.Branches {
		scopes[i] = &scope{}
		g.Go(func() error {
			v, err := b.Run(withFrame(gctx, &frame{parent: f.parent, scope: scopes[i]}))
			if err != nil {
				r.compensate(ctx, scopes[i])
				return err
			}
			out[i], ok[i] = v, true
			return nil
		})
	}
	err := g.Wait()
	for i, sc := range scopes {
		if ok[i] {
			sc.mergeInto(f.scope)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Call checks one capability call against governance, runs it and records
// a CapabilityCall under the current step.
func (r *run) Call(ctx context.Context, req *rtfs.CallRequest) (rtfs.Value, error) {
	f := frameOf(ctx)
	a := &ledger.Action{Type: ledger.CapabilityCall, ParentActionID: f.parent, FunctionName: req.ID,
		Arguments: dataArgs(req.Args), Metadata: map[string]rtfs.Value{
			ledger.MetaDelegationDecisionID: rtfs.String(r.decisionID),
			"position":                      rtfs.String(fmt.Sprintf("%s:%d:%d", req.File, req.Pos.Line, req.Pos.Col)),
		}}
	c := r.registry.Get(req.ID)
	if c == nil {
		return r.failCall(ctx, a, fmt.Errorf("unknown capability :%s", req.ID))
	}
	a.Metadata[ledger.MetaCapabilityAttestationID] = rtfs.String(r.o.attestation(c.Spec))
	input, err := c.Spec.InputFrom(req.Args)
	if err != nil {
		return r.failCall(ctx, a, err)
	}
	d := r.gov.CheckCall(req.ID, input)
	if d.Allowed {
		if p := r.gov.CheckPlacement(req.ID, f.contracted, f.compensated); !p.Allowed {
			d = p
		}
	}
	a.Metadata[ledger.MetaConstitutionalRuleID] = rtfs.String(strings.Join(d.RuleIDs, ","))
	if !d.Allowed {
		return r.refuseCall(ctx, req, f, a, d)
	}
	hctx, refs, err := r.callContext(ctx, req, f, a)
	if err != nil {
		refs.Close()
		return rtfs.Nil, err
	}
	res, err := r.runHandler(ctx, hctx, c, input, a)
	r.closeRefusals(refs, a)
	if _, rerr := r.record(ctx, a); rerr != nil {
		return rtfs.Nil, rerr
	}
	r.stats.mu.Lock()
	r.stats.cost += res.Cost
	r.stats.tokens += metaTokens(a.Metadata)
	r.stats.mu.Unlock()
	if err != nil {
		return rtfs.Nil, err
	}
	return res.Value, nil
}

// failCall records the call a as failed with err before it ran, and
// returns err (or the error recording it).
func (r *run) failCall(ctx context.Context, a *ledger.Action, err error) (rtfs.Value, error) {
	a.ErrorMessage = err.Error()
	if _, rerr := r.record(ctx, a); rerr != nil {
		return rtfs.Nil, rerr
	}
	return rtfs.Nil, err
}

// refuseCall records governance's refusal of the call, then the call as
// failed with the refusal.
func (r *run) refuseCall(ctx context.Context, req *rtfs.CallRequest, f *frame, a *ledger.Action, d *governance.Decision) (rtfs.Value, error) {
	decision := decisionAction(d, f.parent)
	decision.FunctionName = req.ID
	if _, err := r.record(ctx, decision); err != nil {
		return rtfs.Nil, err
	}
	return r.failCall(ctx, a, d.Err())
}

// callContext names the call's action and gives the handler a context that
// reports under it, gathers what the sandbox refuses it (refs, which the
// caller closes) and, when the step has one, writes its output file; it
// makes everything before the call durable first.
func (r *run) callContext(ctx context.Context, req *rtfs.CallRequest, f *frame, a *ledger.Action) (context.Context, *sandbox.Refusals, error) {
	a.ActionID = NewID() // known now: what the call reports while it runs is recorded under it
	rep := &callReporter{r: r, callID: a.ActionID, capID: req.ID}
	refs := r.openRefusals(rep)
	hctx := sandbox.WithRefusals(capability.WithReporter(ctx, rep), refs)
	if of, ok := r.outputFile(f.parent); ok {
		hctx = capability.WithOutputFile(hctx, of)
	}
	// Write-ahead: the step and the plan that led here are on the chain
	// before the handler can change anything.
	if err := r.durable(ctx); err != nil {
		return nil, refs, err
	}
	return hctx, refs, nil
}

// runHandler runs the capability's handler and puts its result, cost,
// staged kv writes, metadata and error on a.
func (r *run) runHandler(ctx, hctx context.Context, c *capability.Capability, input rtfs.Value, a *ledger.Action) (capability.Result, error) {
	// The call's writes to ralph's kv commit with its CapabilityCall, so a
	// kill between the two leaves neither (DESIGN §18).
	hctx, staged := ledger.StageKV(hctx)
	start := r.now()
	res, err := c.Handler(hctx, input)
	a.DurationMS = r.now().Sub(start).Milliseconds()
	a.Result, a.Cost, a.Success = dataOnly(res.Value), res.Cost, err == nil
	if err == nil {
		a.KV = staged.Writes()
	}
	for k, v := range res.Metadata {
		a.Metadata[k] = rtfs.String(v)
	}
	if err != nil {
		a.ErrorMessage = err.Error()
		// Cut short from outside: say so, and who asked, whatever words
		// the handler found for it (DESIGN §13: never a timeout of its own).
		if stopped, by := stopReason(ctx); stopped != "" {
			a.Metadata["stopped"] = rtfs.String(stopped)
			if by != "" {
				a.Metadata["cancelled_by"] = rtfs.String(by)
			}
		}
	}
	return res, err
}

// Log records a line that println, prn or log printed in a plan as an
// InternalStep action named "log", under the step that printed it.
func (r *run) Log(ctx context.Context, req *rtfs.LogRequest) error {
	f := frameOf(ctx)
	_, err := r.record(ctx, &ledger.Action{Type: ledger.InternalStep, ParentActionID: f.parent, FunctionName: "log",
		Arguments: []rtfs.Value{rtfs.String(req.Text)}, Success: true, Metadata: map[string]rtfs.Value{
			"fn":       rtfs.String(req.Fn),
			"position": rtfs.String(fmt.Sprintf("%s:%d:%d", req.File, req.Pos.Line, req.Pos.Col)),
		}})
	return err
}

func dataArgs(args []rtfs.Value) []rtfs.Value {
	out := make([]rtfs.Value, len(args))
	for i, a := range args {
		out[i] = dataOnly(a)
	}
	return out
}

// checkContract runs a contract predicate pure, with fuel and a timeout,
// and records a ContractCheck (and a ContractViolation when it fails).
func (r *run) checkContract(ctx context.Context, parent, kind string, fn rtfs.Value, args []rtfs.Value, pos rtfs.Pos, file string) error {
	cctx, cancel := context.WithTimeout(ctx, r.contractTO)
	ok, err := rtfs.CallFn(cctx, fn, args, r.contract)
	cancel()
	passed := err == nil && ok.Truthy()
	check := &ledger.Action{Type: ledger.ContractCheck, ParentActionID: parent, FunctionName: kind,
		Result: dataOnly(ok), Success: passed}
	if err != nil {
		check.ErrorMessage = err.Error()
	}
	if _, rerr := r.record(ctx, check); rerr != nil {
		return rerr
	}
	if passed {
		return nil
	}
	what := map[string]string{"pre": "precondition", "post": "postcondition", "invariant": "invariant"}[kind]
	msg := fmt.Sprintf("%s failed", what)
	if err != nil {
		msg = fmt.Sprintf("%s could not be evaluated: %v", what, err)
	}
	if _, rerr := r.record(ctx, &ledger.Action{Type: ledger.ContractViolation, ParentActionID: parent,
		FunctionName: kind, ErrorMessage: msg}); rerr != nil {
		return rerr
	}
	return &rtfs.Error{Type: "contract/" + what + "-failed", Msg: msg, Pos: pos, File: file}
}

// stepOptions are the orchestration settings of a step's metadata.
type stepOptions struct {
	retries   int
	backoff   time.Duration
	timeout   time.Duration
	idemKey   string
	idemScope string
}

func parseStepOptions(meta *rtfs.Map) (stepOptions, error) {
	var o stepOptions
	if rt := meta.GetKey("retry"); !rt.IsNil() {
		m := rt.AsMap()
		if m == nil || m.GetKey("max").Kind() != rtfs.KindInt || m.GetKey("max").AsInt() < 0 || m.GetKey("max").AsInt() > 100 {
			return o, errors.New(":retry must be {:max n :backoff-ms m} with 0 <= n <= 100")
		}
		o.retries = int(m.GetKey("max").AsInt())
		o.backoff = time.Duration(m.GetKey("backoff-ms").AsInt()) * time.Millisecond
	}
	if t := meta.GetKey("timeout-ms"); !t.IsNil() {
		if t.Kind() != rtfs.KindInt || t.AsInt() <= 0 {
			return o, errors.New(":timeout-ms must be a positive int")
		}
		o.timeout = time.Duration(t.AsInt()) * time.Millisecond
	}
	if id := meta.GetKey("idempotency"); !id.IsNil() {
		m := id.AsMap()
		if m == nil || m.GetKey("key").Kind() != rtfs.KindString || m.GetKey("key").Str() == "" {
			return o, errors.New(":idempotency must be {:key \"…\" :scope :plan|:intent|:global}")
		}
		o.idemKey, o.idemScope = m.GetKey("key").Str(), "plan"
		if sc := m.GetKey("scope"); !sc.IsNil() {
			switch sc.Str() {
			case "plan", "intent", "global":
				o.idemScope = sc.Str()
			default:
				return o, fmt.Errorf(":idempotency :scope must be :plan, :intent or :global, got %s", rtfs.Print(sc))
			}
		}
	}
	return o, nil
}

func (r *run) idemKVKey(o stepOptions) string {
	id := ""
	switch o.idemScope {
	case "plan":
		id = r.planID
	case "intent":
		id = r.in.IntentID
		if id == "" {
			id = r.in.RunID
		}
	}
	return ledger.IdemKVKey(o.idemScope, id, o.idemKey)
}

// metaTokens is the model tokens an action reports in its metadata:
// prompt_tokens plus completion_tokens, as llm.ask calls, LlmConsultation
// and PlanGenerated record them. A call's tokens count toward max_tokens
// like the plan generation's, and resume sums all three the same way.
func metaTokens(meta map[string]rtfs.Value) int64 {
	var n int64
	for _, k := range [...]string{"prompt_tokens", "completion_tokens"} {
		switch v := meta[k]; v.Kind() {
		case rtfs.KindInt:
			n += v.AsInt()
		case rtfs.KindString:
			if x, err := strconv.ParseInt(v.Str(), 10, 64); err == nil && x > 0 {
				n += x
			}
		}
	}
	return n
}
