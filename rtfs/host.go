package rtfs

import (
	"context"
	"strconv"
	"sync"
)

// Host is how plan forms reach an orchestrator. The evaluator knows nothing
// of capabilities or the ledger: it hands the host each call and step, and
// the host decides when and whether bodies run.
//
// Body and Run functions in requests must be called at most once at a time
// and must have returned before the host method returns (compensation
// runners excepted: they may run later, from any goroutine).
type Host interface {
	// Call invokes capability req.ID with evaluated arguments.
	Call(ctx context.Context, req *CallRequest) (Value, error)
	// Step runs a named step; the host calls req.Body to run it.
	Step(ctx context.Context, req *StepRequest) (Value, error)
	// Parallel runs the branches of step-parallel, concurrently if it
	// chooses, and returns their results in branch order.
	Parallel(ctx context.Context, req *ParallelRequest) ([]Value, error)
	// Compensated runs req.Primary and keeps req.Compensation to undo it
	// if the enclosing scope later fails or is aborted.
	Compensated(ctx context.Context, req *CompensationRequest) (Value, error)
	// Plan runs a (plan …) form's program.
	Plan(ctx context.Context, req *PlanRequest) (Value, error)
}

// CallRequest is one (call :id args…).
type CallRequest struct {
	ID   string  // capability id without the colon, e.g. "ccos.echo"
	Args []Value // evaluated arguments, owned by the request
	Pos  Pos
	File string
}

// StepKind tells plain steps from step-loop parts.
type StepKind uint8

// Step kinds.
const (
	StepPlain    StepKind = iota // (step "Name" …)
	StepLoop                     // the outer step of (step-loop "Name" …)
	StepLoopPass                 // one pass of a step-loop, named Name#i
)

// StepRequest describes one step. Meta holds the evaluated metadata map:
// contract fns (:pre, :post) are values the host may call with CallFn.
type StepRequest struct {
	Name  string
	Kind  StepKind
	Index int // pass number (1-based) for StepLoopPass
	Max   int // :max for StepLoop
	Meta  *Map
	Ctx   Value // the plan context when the step starts
	Pos   Pos
	File  string
	Body  func(ctx context.Context) (Value, error)
}

// ParallelRequest describes (step-parallel branch…).
type ParallelRequest struct {
	Pos      Pos
	File     string
	Branches []Branch
}

// Branch is one branch of step-parallel. Run evaluates it on its own
// machine, so branches may run concurrently.
type Branch struct {
	Name string // the step name when the branch is a (step …) form
	Pos  Pos
	Run  func(ctx context.Context) (Value, error)
}

// CompensationRequest describes (step.with-compensation primary compensation).
type CompensationRequest struct {
	Pos              Pos
	File             string
	PrimaryName      string
	CompensationName string
	Primary          func(ctx context.Context) (Value, error)
	// Compensation runs the compensating step with the plan context as it
	// was after the primary step. It may be called after the plan's
	// evaluation has ended, from any goroutine.
	Compensation func(ctx context.Context, host Host) (Value, error)
}

// PlanRequest describes (plan ^{meta} :program body).
type PlanRequest struct {
	Meta  *Map  // evaluated metadata (:invariant is a fn value)
	Props *Map  // other keyword/value pairs of the plan form
	Ctx   Value // the plan context when the plan starts
	Pos   Pos
	File  string
	Body  func(ctx context.Context) (Value, error)
	// After returns the plan context once Body has returned (for :invariant).
	After func() Value
}

// NextCtx is the plan context after a step returns r:
// (assoc (merge ctx (if (map? r) r {})) :result r).
func NextCtx(ctx, r Value) Value {
	m := ctx.AsMap()
	if m == nil {
		m = emptyMap
	}
	if rm := r.AsMap(); rm != nil {
		b := NewMapBuilder(m.Len() + rm.Len() + 1)
		b.setAll(m)
		b.setAll(rm)
		b.Set(Keyword("result"), r)
		return MapValue(b.Map())
	}
	return MapValue(m.Assoc(Keyword("result"), r))
}

// RunParallel runs branches concurrently and returns results in branch
// order; the first error (by branch order) is returned after all end.
// Hosts without their own scheduling can use it to implement Parallel.
func RunParallel(ctx context.Context, req *ParallelRequest) ([]Value, error) {
	out := make([]Value, len(req.Branches))
	errs := make([]error, len(req.Branches))
	var wg sync.WaitGroup
	for i, b := range req.Branches {
		wg.Go(func() { out[i], errs[i] = b.Run(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ErrImpure is the :type of the error raised when pure code (a contract,
// a predicate, a step-loop :until) reaches a call or a step, for instance
// through a function defined elsewhere in the plan.
const ErrImpure = "rtfs/impure"

// pureHost refuses everything: it is the host of every machine that runs
// contracts and predicates, so purity holds at run time too, not only for
// the forms the compiler can see.
type pureHost struct{}

func impure(what string) error {
	return &Error{Type: ErrImpure, Msg: what + " is not allowed here: contracts, predicates and :until must be pure"}
}

func (pureHost) Call(_ context.Context, req *CallRequest) (Value, error) {
	return Nil, impure("calling :" + req.ID)
}
func (pureHost) Step(_ context.Context, req *StepRequest) (Value, error) {
	return Nil, impure("running step " + strconv.Quote(req.Name))
}
func (pureHost) Parallel(context.Context, *ParallelRequest) ([]Value, error) {
	return nil, impure(FormStepParallel)
}
func (pureHost) Compensated(context.Context, *CompensationRequest) (Value, error) {
	return Nil, impure(FormWithCompensation)
}
func (pureHost) Plan(context.Context, *PlanRequest) (Value, error) { return Nil, impure("plan") }

// applyPure calls f on a child machine whose host refuses effects; it
// shares m's fuel budget.
func (m *Machine) applyPure(f Value, args ...Value) (Value, error) {
	c := m.child()
	c.host = pureHost{}
	v, err := c.Apply(f, args...)
	c.settle()
	c.release()
	return v, err
}
