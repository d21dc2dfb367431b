package loop

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// Ledger is where the orchestrator records what happens.
type Ledger interface {
	Append(ctx context.Context, a *ledger.Action) (ledger.Receipt, error)
}

// DeferringLedger is a Ledger that can take appends without waiting for
// their commit, and make everything taken so far durable on demand;
// *ledger.Store is one. See PlanInput.Deferred.
type DeferringLedger interface {
	Ledger
	AppendDeferred(ctx context.Context, a *ledger.Action) (*ledger.Pending, error)
	Sync(ctx context.Context) error
}

// OrchestratorOptions configure an Orchestrator.
type OrchestratorOptions struct {
	Registry   *capability.Registry
	Governance *governance.Kernel
	Ledger     Ledger
	// KV keeps idempotency records (and kv.* values) across restarts.
	KV builtin.KV
	// Env holds extra pure builtins plans may name; nil for the core library.
	Env *rtfs.Env
	// Limits bound plan evaluation; ContractLimits and ContractTimeout bound
	// each contract predicate.
	Limits          rtfs.Limits
	ContractLimits  rtfs.Limits
	ContractTimeout time.Duration
	// CompensationTimeout bounds each compensation when the plan was aborted.
	CompensationTimeout time.Duration
	// SignalGrace bounds all the compensations of a plan whose run a signal
	// (SIGTERM, Ctrl-C) aborted, together: past it they are cut off and
	// recorded as cut off. Default SignalCompensationGrace.
	SignalGrace time.Duration
	// Secrets are values (API keys) that must never be recorded: any
	// occurrence in an action is replaced by [REDACTED] before it is appended.
	Secrets []string
	Now     func() time.Time
	// LogDir is where calls write their whole output (an agent's
	// printout), one directory per run: <LogDir>/<run-id>/<step-id>.out.
	// Empty: <store>/logs when the Ledger is a store on disk, else none.
	LogDir string
	// Denials gather what the run's sandbox refused (the sink whose Deny
	// the run gave sandbox.New): each call's refusals are recorded on it
	// (:sandbox_denied) and shown live; nil when the run is not sandboxed.
	Denials *sandbox.Sink
}

// Orchestrator runs admitted plans: it is the rtfs.Host that records steps,
// calls, contracts and compensations on the ledger.
type Orchestrator struct {
	o            OrchestratorOptions
	attestations sync.Map // *capability.Spec → attestation id
	storeDir     string   // the store's directory, when the Ledger is a store on disk
}

// NewOrchestrator returns an orchestrator; Registry, Governance and Ledger are required.
func NewOrchestrator(o OrchestratorOptions) (*Orchestrator, error) {
	if o.Registry == nil || o.Governance == nil || o.Ledger == nil {
		return nil, errors.New("orchestrator needs a registry, a governance kernel and a ledger")
	}
	if o.ContractLimits.Fuel == 0 {
		o.ContractLimits.Fuel = 100_000
	}
	if o.ContractTimeout == 0 {
		o.ContractTimeout = 2 * time.Second
	}
	if o.CompensationTimeout == 0 {
		o.CompensationTimeout = time.Minute
	}
	if o.SignalGrace == 0 {
		o.SignalGrace = SignalCompensationGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	storeDir := ""
	if s, ok := o.Ledger.(*ledger.Store); ok {
		storeDir = s.Dir()
	}
	if o.LogDir == "" && storeDir != "" {
		o.LogDir = filepath.Join(storeDir, LogsDir)
	}
	return &Orchestrator{o: o, storeDir: storeDir}, nil
}

// PlanInput is one plan to run.
type PlanInput struct {
	File           string     // names the plan in positions
	Source         string     // RTFS text
	RunID          string     // optional
	IntentID       string     // optional; scopes :intent idempotency
	PlanID         string     // optional; generated when empty
	ParentActionID string     // e.g. the IterationStarted action
	Ctx            rtfs.Value // the plan context map
	// BeforeStep, when set, runs before each step starts; the runner pauses
	// there. An error fails the step.
	BeforeStep func(ctx context.Context) error
	// Stream, when set, receives the transient events running calls
	// publish (an agent's streamed output). It must not block.
	Stream func(CallStream)
	// Deferred records the plan's actions without waiting for each commit
	// when the Ledger is a DeferringLedger: they share group commits, and
	// everything recorded so far is made durable before each capability
	// handler runs (write-ahead). The caller syncs after Execute before
	// relying on the plan's closing records.
	Deferred bool
}

// PlanResult is the outcome of Execute.
type PlanResult struct {
	PlanID              string
	PlanActionID        string // the PlanStarted action
	Admission           *governance.Decision
	Value               rtfs.Value
	Err                 error    // run-time failure (nil on success)
	FailedCompensations []string // names of compensating steps that failed
	Steps               int      // steps that completed
	Cost                float64
	Tokens              int64 // model tokens the plan's calls reported (llm.ask, agent.run)
	// Limit is the first account limit a call stopped at (an agent's usage
	// limit): the loop waits for it to lift and runs the iteration again.
	Limit *capability.Limit
	// Denial is the first tool a call was refused for want of permission:
	// the loop stops the run after this iteration.
	Denial *capability.Denial
	// Refused are what the run's sandbox refused the plan's calls, each
	// once, in the order they came.
	Refused []sandbox.Denial
}

// ErrRefused marks a plan refused at admission or that could not be read;
// errors.Is matches it for every RefusedError.
var ErrRefused = errors.New("plan refused")

// RefusedError is a plan that could not be read or was refused at
// admission; Err says why, with positions.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string        { return e.Err.Error() }
func (e *RefusedError) Unwrap() error        { return e.Err }
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// NewID returns a new UUID v7 string.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// run is the state of one plan execution, shared by its steps. It is
// given what it works with when it is made (newRun), so its steps read
// fields of their own, never the orchestrator's options.
type run struct {
	o          *Orchestrator // its attestations and Redact
	in         PlanInput
	registry   *capability.Registry
	gov        *governance.Kernel
	ledger     Ledger
	kv         builtin.KV // nil: no idempotency records
	now        func() time.Time
	contract   rtfs.Limits   // bounds each contract predicate
	contractTO time.Duration // bounds each contract predicate's time
	compTO     time.Duration // bounds each compensation after an abort
	sigGrace   time.Duration // bounds all the compensations after a signal
	logDir     string        // where calls write their whole output ("" for none)
	storeDir   string        // the store's directory, when the Ledger is a store on disk
	secrets    []string      // handed to calls' output files, which redact them
	planID     string
	decisionID string // the admission GovernanceDecision action
	stats      *runStats

	outMu    sync.Mutex
	outCalls map[string]int // calls that were given an output file, by step

	graceMu  sync.Mutex
	graceEnd time.Time // when a signal's compensations are cut off (zero until the first)
}

type runStats struct {
	mu        sync.Mutex
	steps     int
	cost      float64
	tokens    int64
	failedCmp []string
	limit     *capability.Limit
	denial    *capability.Denial
	refused   []sandbox.Denial
}

// newRun makes the run of plan in with what the orchestrator was given.
func (o *Orchestrator) newRun(in PlanInput) *run {
	return &run{o: o, in: in, planID: in.PlanID, stats: &runStats{},
		registry: o.o.Registry, gov: o.o.Governance, ledger: o.o.Ledger, kv: o.o.KV, now: o.o.Now,
		contract: o.o.ContractLimits, contractTO: o.o.ContractTimeout, compTO: o.o.CompensationTimeout,
		sigGrace: o.o.SignalGrace, logDir: o.o.LogDir, storeDir: o.storeDir, secrets: o.o.Secrets}
}

// Redact returns s with every secret the orchestrator was given (8 bytes
// or longer) replaced by [REDACTED]: what the loop prints, feeds back or
// streams passes through it, as every recorded action passes through
// RedactAction.
func (o *Orchestrator) Redact(s string) string { return arbiter.Redact(s, o.o.Secrets) }

// RedactAction redacts the secrets the orchestrator was given from a
// (see Redact, the function).
func (o *Orchestrator) RedactAction(a *ledger.Action) { Redact(a, o.o.Secrets) }

// EchoesStored says whether capability id's results only echo stored
// text, by its spec in the orchestrator's registry (stop.Input's
// EchoesStored).
func (o *Orchestrator) EchoesStored(id string) bool {
	c := o.o.Registry.Get(id)
	return c != nil && c.Spec.EchoesStored
}

// Execute reads, admits and runs one plan. A plan that cannot be read or
// is refused returns an error wrapping ErrRefused (and records why); a plan
// that fails at run time returns a result whose Err is set.
func (o *Orchestrator) Execute(ctx context.Context, in PlanInput) (*PlanResult, error) {
	r := o.newRun(in)
	if r.planID == "" {
		r.planID = NewID()
	}
	res := &PlanResult{PlanID: r.planID}
	forms, err := rtfs.Read(in.Source, in.File)
	if err != nil {
		if _, rerr := r.record(ctx, &ledger.Action{Type: ledger.GovernanceDecision, ParentActionID: in.ParentActionID,
			FunctionName: "admission", Success: false, ErrorMessage: err.Error(),
			Metadata: map[string]rtfs.Value{ledger.MetaConstitutionalRuleID: rtfs.String(governance.RuleCompiles)}}); rerr != nil {
			return nil, rerr
		}
		return res, &RefusedError{Err: err}
	}
	d := r.gov.Admit(in.File, forms)
	res.Admission = d
	decision, err := r.record(ctx, decisionAction(d, in.ParentActionID))
	if err != nil {
		return nil, err
	}
	r.decisionID = decision
	if !d.Allowed {
		return res, &RefusedError{Err: d.Err()}
	}
	prog, err := rtfs.Compile(forms, rtfs.Options{File: in.File, Mode: rtfs.PlanMode, Env: o.o.Env, Limits: o.o.Limits})
	if err != nil { // admission compiled it already; this cannot differ
		return res, &RefusedError{Err: err}
	}
	planAction, err := r.record(ctx, &ledger.Action{Type: ledger.PlanStarted, ParentActionID: in.ParentActionID,
		FunctionName: in.File, Arguments: []rtfs.Value{rtfs.String(in.Source)}, Success: true,
		Metadata: map[string]rtfs.Value{ledger.MetaDelegationDecisionID: rtfs.String(r.decisionID)}})
	if err != nil {
		return nil, err
	}
	res.PlanActionID = planAction
	top := &scope{}
	pctx := withFrame(ctx, &frame{parent: planAction, scope: top})
	start := r.now()
	v, runErr := prog.Run(pctx, r, in.Ctx)
	if runErr != nil {
		r.compensate(ctx, top)
	}
	r.stats.mu.Lock()
	res.Steps, res.Cost, res.Tokens, res.FailedCompensations = r.stats.steps, r.stats.cost, r.stats.tokens, r.stats.failedCmp
	res.Limit, res.Denial, res.Refused = r.stats.limit, r.stats.denial, r.stats.refused
	r.stats.mu.Unlock()
	end := &ledger.Action{ParentActionID: planAction, FunctionName: in.File, Cost: res.Cost,
		DurationMS: r.now().Sub(start).Milliseconds(), Metadata: map[string]rtfs.Value{}}
	if len(res.FailedCompensations) > 0 {
		end.Metadata["failed_compensations"] = stringsValue(res.FailedCompensations)
	}
	if runErr != nil {
		end.Type, end.ErrorMessage = ledger.PlanAborted, runErr.Error()
		res.Err = runErr
		if stopped, by := stopReason(ctx); stopped == "cancelled" {
			end.Metadata["stopped"], end.Metadata["cancelled_by"] = rtfs.String(stopped), rtfs.String(by)
		}
	} else {
		end.Type, end.Success, end.Result = ledger.PlanCompleted, true, dataOnly(v)
		res.Value = v
	}
	if _, err := r.record(context.WithoutCancel(ctx), end); err != nil {
		return nil, err
	}
	return res, nil
}

func decisionAction(d *governance.Decision, parent string) *ledger.Action {
	a := &ledger.Action{Type: ledger.GovernanceDecision, ParentActionID: parent, FunctionName: "admission",
		Success: d.Allowed, Metadata: map[string]rtfs.Value{
			ledger.MetaConstitutionalRuleID: rtfs.String(strings.Join(d.RuleIDs, ",")),
			"capabilities":                  stringsValue(d.Capabilities),
			"effects":                       stringsValue(d.Effects),
			"allowed":                       rtfs.Bool(d.Allowed),
		}}
	if !d.Allowed {
		a.ErrorMessage = strings.Join(d.Reasons, "; ")
		a.Metadata["reasons"] = stringsValue(d.Reasons)
	}
	return a
}

func stringsValue(ss []string) rtfs.Value {
	out := make([]rtfs.Value, len(ss))
	for i, s := range ss {
		out[i] = rtfs.String(s)
	}
	return rtfs.Vector(out)
}

// record fills the ids and time of a and appends it; it returns the action id.
func (r *run) record(ctx context.Context, a *ledger.Action) (string, error) {
	if a.ActionID == "" {
		a.ActionID = NewID()
	}
	a.RunID, a.PlanID, a.IntentID = r.in.RunID, r.planID, r.in.IntentID
	if a.Timestamp.IsZero() {
		a.Timestamp = r.now()
	}
	r.o.RedactAction(a)
	if d, ok := r.ledger.(DeferringLedger); ok && r.in.Deferred {
		if _, err := d.AppendDeferred(context.WithoutCancel(ctx), a); err != nil {
			return "", fmt.Errorf("record %s: %w", a.Type, err)
		}
		return a.ActionID, nil
	}
	if _, err := r.ledger.Append(context.WithoutCancel(ctx), a); err != nil {
		return "", fmt.Errorf("record %s: %w", a.Type, err)
	}
	return a.ActionID, nil
}

// durable makes every action recorded so far durable before an effect
// outside the ledger begins (a no-op unless the plan records deferred).
func (r *run) durable(ctx context.Context) error {
	if d, ok := r.ledger.(DeferringLedger); ok && r.in.Deferred {
		if err := d.Sync(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("make the plan's actions durable before a capability runs: %w", err)
		}
	}
	return nil
}

// maxRecordedNodes bounds a value the ledger records.
const maxRecordedNodes = 1 << 20

// dataOnly replaces function values (which the ledger cannot hold) by
// their printed names, recursively.
func dataOnly(v rtfs.Value) rtfs.Value {
	if n, ok := rtfs.Size(v, maxRecordedNodes); !ok {
		return rtfs.String(fmt.Sprintf("#<value too large to record: more than %d nodes (at least %d)>", maxRecordedNodes, n))
	}
	if !hasFn(v) {
		return v
	}
	switch v.Kind() {
	case rtfs.KindFn:
		return rtfs.String(rtfs.Print(v))
	case rtfs.KindList, rtfs.KindVector:
		out := make([]rtfs.Value, len(v.Items()))
		for i, it := range v.Items() {
			out[i] = dataOnly(it)
		}
		if v.Kind() == rtfs.KindList {
			return rtfs.List(out)
		}
		return rtfs.Vector(out)
	case rtfs.KindMap:
		b := rtfs.NewMapBuilder(v.Len())
		v.AsMap().Range(func(k, x rtfs.Value) bool { b.Set(dataOnly(k), dataOnly(x)); return true })
		return rtfs.MapValue(b.Map())
	case rtfs.KindSet:
		members := v.AsSet().Members()
		for i, x := range members {
			members[i] = dataOnly(x)
		}
		return rtfs.SetValue(rtfs.NewSet(members...))
	}
	return v
}

func hasFn(v rtfs.Value) bool {
	switch v.Kind() {
	case rtfs.KindFn:
		return true
	case rtfs.KindList, rtfs.KindVector:
		for _, it := range v.Items() {
			if hasFn(it) {
				return true
			}
		}
	case rtfs.KindMap:
		found := false
		v.AsMap().Range(func(k, x rtfs.Value) bool { found = hasFn(k) || hasFn(x); return !found })
		return found
	case rtfs.KindSet:
		return slices.ContainsFunc(v.AsSet().Members(), hasFn)
	}
	return false
}

// Plan handles a (plan ^{:invariant …} :program …) form inside a program:
// the invariant is checked on entry and exit states, like a postcondition.
func (r *run) Plan(ctx context.Context, req *rtfs.PlanRequest) (rtfs.Value, error) {
	inv := req.Meta.GetKey("invariant")
	v, err := req.Body(ctx)
	if err != nil || inv.IsNil() {
		return v, err
	}
	f := frameOf(ctx)
	after := req.After()
	if cerr := r.checkContract(ctx, f.parent, "invariant", inv, []rtfs.Value{req.Ctx, after}, req.Pos, req.File); cerr != nil {
		return rtfs.Nil, cerr
	}
	return v, nil
}

// Redact replaces every occurrence of a secret in a's text and values by
// [REDACTED]. Secrets shorter than 8 bytes are ignored (they would match
// ordinary text).
func Redact(a *ledger.Action, secrets []string) {
	for _, sec := range secrets {
		if len(sec) < 8 {
			continue
		}
		a.ErrorMessage = strings.ReplaceAll(a.ErrorMessage, sec, "[REDACTED]")
		a.FunctionName = strings.ReplaceAll(a.FunctionName, sec, "[REDACTED]")
		for i, v := range a.Arguments {
			a.Arguments[i] = redactValue(v, sec)
		}
		a.Result = redactValue(a.Result, sec)
		for k, v := range a.Metadata {
			a.Metadata[k] = redactValue(v, sec)
		}
	}
}

// redactValue returns v with sec replaced in its strings, at any depth; a
// value with nothing to replace is returned as it is, not rebuilt.
func redactValue(v rtfs.Value, sec string) rtfs.Value {
	r, _ := redactIn(v, sec)
	return r
}

// redactIn is redactValue, also reporting whether anything changed. It
// walks the value rather than searching its printed form, which escapes
// characters a secret may contain.
func redactIn(v rtfs.Value, sec string) (rtfs.Value, bool) {
	switch v.Kind() {
	case rtfs.KindString:
		if strings.Contains(v.Str(), sec) {
			return rtfs.String(strings.ReplaceAll(v.Str(), sec, "[REDACTED]")), true
		}
	case rtfs.KindMap:
		type kv struct{ k, v rtfs.Value }
		var pairs []kv
		changed := false
		v.AsMap().Range(func(k, x rtfs.Value) bool {
			k, ck := redactIn(k, sec)
			x, cx := redactIn(x, sec)
			changed = changed || ck || cx
			pairs = append(pairs, kv{k, x})
			return true
		})
		if !changed {
			return v, false
		}
		b := rtfs.NewMapBuilder(len(pairs))
		for _, p := range pairs {
			b.Set(p.k, p.v)
		}
		return rtfs.MapValue(b.Map()), true
	case rtfs.KindList, rtfs.KindVector:
		var out []rtfs.Value // allocated at the first change
		for i, it := range v.Items() {
			r, c := redactIn(it, sec)
			if c && out == nil {
				out = slices.Clone(v.Items())
			}
			if out != nil {
				out[i] = r
			}
		}
		if out == nil {
			return v, false
		}
		if v.Kind() == rtfs.KindList {
			return rtfs.List(out), true
		}
		return rtfs.Vector(out), true
	case rtfs.KindSet:
		members := v.AsSet().Members()
		changed := false
		for i, x := range members {
			r, c := redactIn(x, sec)
			members[i], changed = r, changed || c
		}
		if !changed {
			return v, false
		}
		return rtfs.SetValue(rtfs.NewSet(members...)), true
	}
	return v, false
}
