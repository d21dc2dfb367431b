package rtfs

import (
	"context"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// Limits bound one evaluation. Zero fields take the defaults.
type Limits struct {
	Fuel     int64 // evaluation steps (calls, loop passes, produced elements); default 10,000,000
	MaxDepth int   // nested function calls; default 512
}

// Default limits.
const (
	DefaultFuel     = 10_000_000
	DefaultMaxDepth = 512
)

func (l Limits) withDefaults() Limits {
	if l.Fuel <= 0 {
		l.Fuel = DefaultFuel
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// fuelChunk is how much fuel a machine draws from its budget at a time;
// cancellation is checked on every draw.
const fuelChunk = 1024

// Machine is the state of one evaluation: fuel, call depth, the plan
// context and a stack of value slots reused across calls. A Machine is
// used by one goroutine at a time; parallel branches get their own.
type Machine struct {
	ctx        context.Context
	host       Host
	file       string
	fuel       int64         // local fuel left in the current chunk
	budget     *atomic.Int64 // shared remaining budget (parallel branches share it)
	ownBudget  atomic.Int64
	total      int64
	depth      int
	maxDepth   int
	planCtx    Value
	logw       io.Writer // where println and friends write when the host records nothing
	callPos    Pos       // the position of the positioned builtin being called
	recurFrame *frame    // the frame a recur rebound, when its target's frames are on the heap

	stack  valueStack
	frames []*frame
	fsp    int
}

var machinePool = sync.Pool{New: func() any { return new(Machine) }}

func newMachine(ctx context.Context, host Host, file string, lim Limits, budget *atomic.Int64) *Machine {
	lim = lim.withDefaults()
	m := machinePool.Get().(*Machine)
	m.ctx, m.host, m.file = ctx, host, file
	m.maxDepth = lim.MaxDepth
	m.depth = 0
	m.fuel = 0
	m.total = lim.Fuel
	if budget == nil {
		m.budget = &m.ownBudget
		m.ownBudget.Store(lim.Fuel)
	} else {
		m.budget = budget
	}
	return m
}

func (m *Machine) release() {
	m.stack.reset()
	for i := range m.frames[:m.fsp] {
		*m.frames[i] = frame{}
	}
	m.fsp = 0
	m.ctx, m.host, m.planCtx, m.budget, m.logw, m.recurFrame = nil, nil, Nil, nil, nil, nil
	machinePool.Put(m)
}

// child returns a machine for a concurrent branch sharing m's fuel budget.
func (m *Machine) child() *Machine {
	c := newMachine(m.ctx, m.host, m.file, Limits{Fuel: m.total, MaxDepth: m.maxDepth}, m.budget)
	c.depth = m.depth
	c.planCtx = m.planCtx
	c.logw = m.logw
	return c
}

// Context returns the context the evaluation runs under.
func (m *Machine) Context() context.Context { return m.ctx }

// tick charges one unit of fuel.
func (m *Machine) tick() error {
	m.fuel--
	if m.fuel < 0 {
		return m.refill()
	}
	return nil
}

// Charge consumes n units of fuel; builtins call it in proportion to the
// work they do or the size of what they produce.
func (m *Machine) Charge(n int64) error {
	m.fuel -= n
	if m.fuel < 0 {
		return m.refill()
	}
	return nil
}

func (m *Machine) refill() error {
	if err := m.poll(); err != nil {
		return err
	}
	for {
		cur := m.budget.Load()
		debt := -m.fuel
		if cur < debt {
			return &Error{Type: ErrFuel, Msg: "evaluation ran out of fuel (limit " + itoa(m.total) + " steps); simplify the program or raise the fuel limit"}
		}
		grant := min(cur, debt+fuelChunk)
		if m.budget.CompareAndSwap(cur, cur-grant) {
			m.fuel += grant
			return nil
		}
	}
}

// settle returns unused local fuel to the shared budget.
func (m *Machine) settle() {
	if m.fuel > 0 {
		m.budget.Add(m.fuel)
		m.fuel = 0
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// frame holds the slots of one function activation.
type frame struct {
	slots  []Value
	parent *frame
}

// pushFrame takes a frame of n slots from the machine stack.
func (m *Machine) pushFrame(n int, parent *frame) (*frame, stackMark) {
	mark := m.stack.mark()
	if m.fsp == len(m.frames) {
		m.frames = append(m.frames, new(frame))
	}
	f := m.frames[m.fsp]
	m.fsp++
	f.slots = m.stack.alloc(n)
	f.parent = parent
	return f, mark
}

func (m *Machine) popFrame(mark stackMark) {
	m.fsp--
	f := m.frames[m.fsp]
	f.slots, f.parent = nil, nil
	m.stack.release(mark)
}

// valueStack hands out slot slices in stack order from fixed chunks, so a
// slice never moves once handed out.
type valueStack struct {
	chunks [][]Value
	ci     int // current chunk
	off    int // next free slot in it
}

type stackMark struct{ ci, off int }

const stackChunk = 1024

func (s *valueStack) mark() stackMark { return stackMark{s.ci, s.off} }

func (s *valueStack) alloc(n int) []Value {
	if n == 0 {
		return nil
	}
	if len(s.chunks) == 0 {
		s.chunks = append(s.chunks, make([]Value, max(stackChunk, n)))
	}
	for s.off+n > len(s.chunks[s.ci]) {
		s.ci++
		s.off = 0
		if s.ci == len(s.chunks) {
			s.chunks = append(s.chunks, make([]Value, max(stackChunk, n)))
		}
	}
	out := s.chunks[s.ci][s.off : s.off+n : s.off+n]
	s.off += n
	return out
}

func (s *valueStack) release(mk stackMark) {
	// Clear what is released so the pool does not keep garbage alive.
	for s.ci > mk.ci || (s.ci == mk.ci && s.off > mk.off) {
		from := 0
		if s.ci == mk.ci {
			from = mk.off
		}
		clear(s.chunks[s.ci][from:s.off])
		if s.ci == mk.ci {
			break
		}
		s.ci--
		s.off = len(s.chunks[s.ci])
	}
	s.ci, s.off = mk.ci, mk.off
}

// reset empties the stack. Everything handed out was released (and so
// cleared) by its owner, so only the cursor moves.
func (s *valueStack) reset() {
	s.ci, s.off = 0, 0
}
