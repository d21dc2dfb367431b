package rtfs

import (
	"context"
	"fmt"
	"slices"
)

// This file holds loop/recur and the iteration forms dotimes, doseq and
// for. Their bodies run in a block scope with one frame for the whole
// form, reused from pass to pass (so a pass allocates nothing) unless a
// closure keeps it, in which case each pass gets a copy.

// recurTarget is what a recur in tail position rebinds: the bindings of
// the enclosing loop or the parameters of the enclosing fn.
type recurTarget struct {
	scope *scope // recur must be compiled directly in this scope
	binds []binder
	slots []int  // when every binding is a plain name: their slots
	what  string // "loop" or "fn name", for messages
	used  bool
}

// recurSignal is returned by a recur's code once it has rebound its
// target; the loop or fn it targets runs its body again. It never
// escapes them: recur is only compiled in tail position, where every
// enclosing form returns the error unchanged.
type recurSignal struct{}

func (recurSignal) Error() string { return "recur outside its loop" }

var errRecur error = recurSignal{}

// recurForm: (recur x…) in tail position of a loop or fn.
func (c *compiler) recurForm(n *Node) (code, error) {
	tail, t := c.inTail, c.recur
	switch {
	case t == nil:
		return nil, c.errf(n.Pos, "recur outside loop or fn; write (loop [x init] … (recur (next x)))")
	case !tail || t.scope != c.sc:
		return nil, c.errf(n.Pos, "recur must be in tail position; make it the last form of the %s body, not an argument or inside a try or a step", t.what)
	case len(n.Items)-1 != len(t.binds):
		return nil, c.errf(n.Pos, "recur needs %d argument%s to rebind %s, got %d", len(t.binds), plural(len(t.binds), len(t.binds)), t.what, len(n.Items)-1)
	}
	t.used = true
	args, _, err := c.exprs(n.Items[1:])
	if err != nil {
		return nil, err
	}
	binds, sc := t.binds, t.scope
	if len(args) == 2 && t.slots != nil {
		a0, a1, s0, s1 := args[0], args[1], t.slots[0], t.slots[1]
		return func(m *Machine, f *frame) (Value, error) {
			v0, err := a0(m, f)
			if err != nil {
				return Nil, err
			}
			v1, err := a1(m, f)
			if err != nil {
				return Nil, err
			}
			if sc.heap {
				f = m.nextPass(f)
			}
			f.slots[s0], f.slots[s1] = v0, v1
			return Nil, errRecur
		}, nil
	}
	if len(args) == 1 {
		a0, b0 := args[0], binds[0]
		return func(m *Machine, f *frame) (Value, error) {
			v, err := a0(m, f)
			if err != nil {
				return Nil, err
			}
			if sc.heap {
				f = m.nextPass(f)
			}
			if err := b0(m, f, v); err != nil {
				return Nil, err
			}
			return Nil, errRecur
		}, nil
	}
	return func(m *Machine, f *frame) (Value, error) {
		buf, mark, err := evalOnStack(m, f, args)
		if err != nil {
			return Nil, err
		}
		if sc.heap {
			f = m.nextPass(f)
		}
		for i, b := range binds {
			if err := b(m, f, buf[i]); err != nil {
				m.stack.release(mark)
				return Nil, err
			}
		}
		m.stack.release(mark)
		return Nil, errRecur
	}, nil
}

// plainSlots returns the slots of the names at every step-th place of
// pats when each is a plain symbol (just declared, so the latest binding
// of that name), else nil.
func (c *compiler) plainSlots(pats []*Node, step int) []int {
	var slots []int
	for i := 0; i < len(pats); i += step {
		if pats[i].Kind != NodeSymbol {
			return nil
		}
		_, slot, ok := c.resolveLocalHere(pats[i].Val.Str())
		if !ok {
			return nil
		}
		slots = append(slots, slot)
	}
	return slots
}

// resolveLocalHere finds name among the current scope's own names.
func (c *compiler) resolveLocalHere(name string) (int, int, bool) {
	for i := len(c.sc.names) - 1; i >= 0; i-- {
		if c.sc.names[i].name == name {
			return 0, c.sc.names[i].slot, true
		}
	}
	return 0, 0, false
}

// bindingVector checks (form [name value …] …) and returns its pairs.
func (c *compiler) bindingVector(n *Node, form, example string) ([]*Node, error) {
	if len(n.Items) < 2 || n.Items[1].Kind != NodeVector {
		return nil, c.errf(n.Pos, "%s needs a binding vector: %s", form, example)
	}
	bv := n.Items[1]
	if len(bv.Items)%2 != 0 {
		return nil, c.errf(bv.Pos, "%s binding vector needs name/value pairs; %s has no value", form, describe(bv.Items[len(bv.Items)-1]))
	}
	return bv.Items, nil
}

// blockScope starts a block scope for an iteration form; done restores
// the compiler.
func (c *compiler) blockScope() (sc *scope, done func()) {
	outer, outerRecur := c.sc, c.recur
	sc = &scope{kind: scopeBlock, parent: outer}
	c.sc = sc
	return sc, func() { c.sc, c.recur = outer, outerRecur }
}

// enter gives the frame of a block for a whole iteration form.
func (m *Machine) enter(sc *scope, parent *frame) (*frame, stackMark, bool) {
	if sc.heap {
		return &frame{slots: make([]Value, sc.nslots), parent: parent}, stackMark{}, false
	}
	fr, mark := m.pushFrame(sc.nslots, parent)
	return fr, mark, true
}

// nextPass gives a recur whose target's frames are kept by closures a
// fresh frame to rebind, so closures made in the pass that recurs keep
// its bindings; the loop or fn runs its next pass in it.
func (m *Machine) nextPass(f *frame) *frame {
	nf := &frame{slots: slices.Clone(f.slots), parent: f.parent}
	m.recurFrame = nf
	return nf
}

// passFrame is the frame one pass runs in: the block's own, or a copy of
// it when closures keep frames, so a closure made in one pass still sees
// that pass's bindings after the next.
func passFrame(sc *scope, fr *frame) *frame {
	if !sc.heap {
		return fr
	}
	return &frame{slots: slices.Clone(fr.slots), parent: fr.parent}
}

// loopForm: (loop [name init …] body…), with recur in tail position.
func (c *compiler) loopForm(n *Node) (code, error) {
	pairs, err := c.bindingVector(n, "loop", "(loop [i 0 acc []] (if (< i 3) (recur (inc i) (conj acc i)) acc))")
	if err != nil {
		return nil, err
	}
	// Each init sees the names before it, as in let: compile them in the
	// block, where the loop's frame holds every binding.
	sc, done := c.blockScope()
	defer done()
	inits := make([]code, 0, len(pairs)/2)
	binds := make([]binder, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		init, err := c.expr(pairs[i+1])
		if err != nil {
			return nil, err
		}
		b, err := c.pattern(pairs[i])
		if err != nil {
			return nil, err
		}
		inits, binds = append(inits, init), append(binds, b)
	}
	target := &recurTarget{scope: sc, binds: binds, what: "loop", slots: c.plainSlots(pairs, 2)}
	c.recur = target
	body, err := c.bodyT(n.Items[2:], n.Pos, true)
	if err != nil {
		return nil, err
	}
	pos := n.Pos
	var first *Node
	if len(pairs) > 0 {
		first = pairs[0]
	}
	if !c.passesAreSteps(n.Items[2:]) {
		return func(m *Machine, f *frame) (Value, error) {
			fr, mark, onStack := m.enter(sc, f)
			v, err := runLoop(m, sc, fr, inits, binds, body, pos)
			if onStack {
				m.popFrame(mark)
			}
			return v, err
		}, nil
	}
	pass := c.passWrapper("loop", first, n.Items[2:], pos, body)
	return func(m *Machine, f *frame) (Value, error) {
		fr, mark, onStack := m.enter(sc, f)
		i := 0
		v, err := runLoop(m, sc, fr, inits, binds, func(m *Machine, f *frame) (Value, error) {
			i++
			return pass(m, f, i)
		}, pos)
		if onStack {
			m.popFrame(mark)
		}
		return v, err
	}, nil
}

func runLoop(m *Machine, sc *scope, fr *frame, inits []code, binds []binder, body code, pos Pos) (Value, error) {
	for i, init := range inits {
		v, err := init(m, fr)
		if err != nil {
			return Nil, err
		}
		if err := binds[i](m, fr, v); err != nil {
			return Nil, err
		}
	}
	for {
		v, err := body(m, fr)
		if err != errRecur {
			return v, err
		}
		if sc.heap {
			fr, m.recurFrame = m.recurFrame, nil
		}
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
	}
}

// passesAreSteps reports whether passes over bodyNodes are recorded as
// steps of their own.
func (c *compiler) passesAreSteps(bodyNodes []*Node) bool {
	return c.mode == PlanMode && c.pure == 0 && hasStepForm(bodyNodes)
}

// stepForms are the forms whose presence in a plan's loop body makes each
// pass a step of its own.
var stepForms = map[string]bool{FormStep: true, FormStepLoop: true, FormStepParallel: true, FormWithCompensation: true, FormCall: true}

func hasStepForm(nodes []*Node) bool {
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if stepForms[n.Head()] || hasStepForm(n.Items) {
			return true
		}
	}
	return false
}

// passWrapper returns how one pass of an iteration form runs its body. In
// a plan, when the body holds steps or calls, each pass is a child step
// "<form> <name>#i" (as step-loop's passes are), so the chain groups what
// each pass did; otherwise the body runs as it is.
func (c *compiler) passWrapper(form string, first *Node, bodyNodes []*Node, pos Pos, body code) func(*Machine, *frame, int) (Value, error) {
	if !c.passesAreSteps(bodyNodes) {
		return func(m *Machine, f *frame, _ int) (Value, error) { return body(m, f) }
	}
	label := form
	if first != nil && first.Kind == NodeSymbol {
		label += " " + first.Val.Str()
	}
	return func(m *Machine, f *frame, i int) (Value, error) {
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
		recurred := false
		req := &StepRequest{Name: fmt.Sprintf("%s#%d", label, i), Kind: StepLoopPass, Index: i, Meta: emptyMap,
			Ctx: m.planCtx, Pos: pos, File: m.file}
		req.Body = func(ctx context.Context) (Value, error) {
			saved := m.ctx
			m.ctx = ctx
			v, err := body(m, f)
			m.ctx = saved
			if err == errRecur {
				recurred = true
				return Nil, nil
			}
			if err != nil {
				return Nil, m.errAt(err, pos)
			}
			return v, nil
		}
		v, err := m.host.Step(m.ctx, req)
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		if recurred {
			return Nil, errRecur
		}
		return v, nil
	}
}

// dotimes: (dotimes [i n] body…) runs body n times with i from 0; nil.
func (c *compiler) dotimes(n *Node) (code, error) {
	pairs, err := c.bindingVector(n, "dotimes", "(dotimes [i 3] body…)")
	if err != nil {
		return nil, err
	}
	if len(pairs) != 2 || pairs[0].Kind != NodeSymbol {
		return nil, c.errf(n.Items[1].Pos, "dotimes takes one name and a count: (dotimes [i 3] body…)")
	}
	count, err := c.expr(pairs[1])
	if err != nil {
		return nil, err
	}
	sc, done := c.blockScope()
	defer done()
	c.recur = nil
	bind, err := c.pattern(pairs[0])
	if err != nil {
		return nil, err
	}
	body, err := c.body(n.Items[2:], n.Pos)
	if err != nil {
		return nil, err
	}
	pos := n.Pos
	pass := c.passWrapper("dotimes", pairs[0], n.Items[2:], pos, body)
	return func(m *Machine, f *frame) (Value, error) {
		nv, err := count(m, f)
		if err != nil {
			return Nil, err
		}
		if !nv.IsNumber() {
			return Nil, errorf(ErrType, pos, "dotimes expects a number of passes, got a %s", nv.Kind())
		}
		times := int64(nv.AsFloat())
		fr, mark, onStack := m.enter(sc, f)
		defer func() {
			if onStack {
				m.popFrame(mark)
			}
		}()
		for i := int64(0); i < times; i++ {
			if err := m.tick(); err != nil {
				return Nil, m.errAt(err, pos)
			}
			pf := passFrame(sc, fr)
			if err := bind(m, pf, Int(i)); err != nil {
				return Nil, err
			}
			if _, err := pass(m, pf, int(i)+1); err != nil {
				return Nil, err
			}
		}
		return Nil, nil
	}, nil
}
