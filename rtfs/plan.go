package rtfs

import (
	"context"
	"fmt"
)

// MaxLoopPasses bounds :max of step-loop.
const MaxLoopPasses = 10000

func (c *compiler) planForm(name string, n *Node) (code, error) {
	switch name {
	case "call":
		return c.callForm(n)
	case FormStep:
		return c.step(n)
	case FormStepParallel:
		return c.parallel(n)
	case FormStepLoop:
		return c.stepLoop(n)
	case FormWithCompensation:
		return c.compensated(n)
	case "plan":
		return c.plan(n)
	}
	return nil, c.errf(n.Pos, "unknown plan form %s", name)
}

// CapabilityID returns the id of a (call :id …) node's capability, or "".
func CapabilityID(n *Node) string {
	if n.Head() != "call" || len(n.Items) < 2 {
		return ""
	}
	id := n.Items[1]
	if id.Kind == NodeAtom && (id.Val.Kind() == KindKeyword || id.Val.Kind() == KindString) {
		return id.Val.Str()
	}
	return ""
}

func (c *compiler) callForm(n *Node) (code, error) {
	if err := c.arity(n, "call", 1, -1); err != nil {
		return nil, err
	}
	id := CapabilityID(n)
	if id == "" {
		return nil, c.errf(n.Items[1].Pos, "call needs a literal capability id such as :ccos.echo, got %s", describe(n.Items[1]))
	}
	args, _, err := c.exprs(n.Items[2:])
	if err != nil {
		return nil, err
	}
	pos := n.Pos
	return func(m *Machine, f *frame) (Value, error) {
		vals := make([]Value, len(args))
		for i, a := range args {
			v, err := a(m, f)
			if err != nil {
				return Nil, err
			}
			vals[i] = v
		}
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
		v, err := m.host.Call(m.ctx, &CallRequest{ID: id, Args: vals, Pos: pos, File: m.file})
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		return v, nil
	}, nil
}

// noMeta is the metadata of a form written without any.
func noMeta(*Machine, *frame) (*Map, error) { return emptyMap, nil }

// metaCode compiles a metadata map node, pure; nil gives an empty map.
func (c *compiler) metaCode(meta *Node) (func(m *Machine, f *frame) (*Map, error), error) {
	if meta == nil {
		return noMeta, nil
	}
	c.pure++
	mc, err := c.expr(meta)
	c.pure--
	if err != nil {
		return nil, err
	}
	return func(m *Machine, f *frame) (*Map, error) {
		v, err := mc(m, f)
		if err != nil {
			return nil, err
		}
		return v.AsMap(), nil
	}, nil
}

// StepName returns the literal name of a (step "Name" …) node, or "".
func StepName(n *Node) string {
	if (n.Head() != FormStep && n.Head() != FormStepLoop) || len(n.Items) < 2 {
		return ""
	}
	if nm := n.Items[1]; nm.Kind == NodeAtom && nm.Val.Kind() == KindString {
		return nm.Val.Str()
	}
	return ""
}

// StepMeta returns the metadata node of a step: written on its name or on
// the first form after it ((step "Name" ^{…} body…)).
func StepMeta(n *Node) *Node {
	if len(n.Items) < 2 {
		return nil
	}
	if n.Items[1].Meta != nil {
		return n.Items[1].Meta
	}
	if len(n.Items) > 2 {
		return n.Items[2].Meta
	}
	return nil
}

func (c *compiler) step(n *Node) (code, error) {
	name := StepName(n)
	if name == "" {
		return nil, c.errf(n.Pos, "step needs a literal name: (step \"Name\" body…)")
	}
	metaC, err := c.metaCode(StepMeta(n))
	if err != nil {
		return nil, err
	}
	body, err := c.body(n.Items[2:], n.Pos)
	if err != nil {
		return nil, err
	}
	return stepCode(name, StepPlain, 0, 0, metaC, n.Pos, body), nil
}

func stepCode(name string, kind StepKind, index, max int, metaC func(*Machine, *frame) (*Map, error), pos Pos, body code) code {
	return func(m *Machine, f *frame) (Value, error) {
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
		meta, err := metaC(m, f)
		if err != nil {
			return Nil, err
		}
		req := &StepRequest{Name: name, Kind: kind, Index: index, Max: max, Meta: meta, Ctx: m.planCtx, Pos: pos, File: m.file}
		req.Body = func(ctx context.Context) (Value, error) {
			saved := m.ctx
			m.ctx = ctx
			v, err := body(m, f)
			m.ctx = saved
			if err != nil {
				return Nil, m.errAt(err, pos) // the host records it: name the file
			}
			return v, nil
		}
		v, err := m.host.Step(m.ctx, req)
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		m.planCtx = NextCtx(m.planCtx, v)
		return v, nil
	}
}

// block compiles forms in a scope of their own that runs while the
// current frame is alive (a loop pass or a parallel branch).
func (c *compiler) block(forms []*Node, pos Pos) (*scope, code, error) {
	outer := c.sc
	sc := &scope{kind: scopeBlock, parent: outer}
	c.sc = sc
	body, err := c.body(forms, pos)
	c.sc = outer
	return sc, body, err
}

func (m *Machine) runBlock(sc *scope, body code, parent *frame) (Value, error) {
	if sc.heap {
		return body(m, &frame{slots: make([]Value, sc.nslots), parent: parent})
	}
	f, mark := m.pushFrame(sc.nslots, parent)
	v, err := body(m, f)
	m.popFrame(mark)
	return v, err
}

func (c *compiler) parallel(n *Node) (code, error) {
	type branch struct {
		name string
		pos  Pos
		sc   *scope
		body code
	}
	branches := make([]branch, 0, len(n.Items)-1)
	for _, it := range n.Items[1:] {
		sc, body, err := c.block([]*Node{it}, it.Pos)
		if err != nil {
			return nil, err
		}
		branches = append(branches, branch{StepName(it), it.Pos, sc, body})
	}
	pos := n.Pos
	return func(m *Machine, f *frame) (Value, error) {
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
		start := m.planCtx
		req := &ParallelRequest{Pos: pos, File: m.file, Branches: make([]Branch, len(branches))}
		for i, b := range branches {
			req.Branches[i] = Branch{Name: b.name, Pos: b.pos, Run: func(ctx context.Context) (Value, error) {
				cm := m.child()
				cm.ctx, cm.planCtx = ctx, start
				v, err := cm.runBlock(b.sc, b.body, f)
				if err != nil {
					err = cm.errAt(err, b.pos)
				}
				cm.settle()
				cm.release()
				return v, err
			}}
		}
		results, err := m.host.Parallel(m.ctx, req)
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		if len(results) != len(branches) {
			return Nil, errorf(ErrHost, pos, "host returned %d results for %d parallel branches", len(results), len(branches))
		}
		out := Vector(results)
		next := start
		for _, r := range results {
			if r.Kind() == KindMap {
				next = NextCtx(next, r)
			}
		}
		m.planCtx = NextCtx(next, out)
		return out, nil
	}, nil
}

// stepLoop: (step-loop "Name" {:max N :until (fn [result] …)} body…).
func (c *compiler) stepLoop(n *Node) (code, error) {
	name := StepName(n)
	if name == "" || len(n.Items) < 3 || n.Items[2].Kind != NodeMap {
		return nil, c.errf(n.Pos, "step-loop needs a name and an options map: (step-loop \"Name\" {:max 5 :until (fn [r] …)} body…)")
	}
	opts := n.Items[2]
	max, untilC, err := c.stepLoopOptions(opts)
	if err != nil {
		return nil, err
	}
	metaNode := n.Items[1].Meta
	if metaNode == nil {
		metaNode = opts.Meta
	}
	metaC, err := c.metaCode(metaNode)
	if err != nil {
		return nil, err
	}
	sc, body, err := c.block(n.Items[3:], n.Pos)
	if err != nil {
		return nil, err
	}
	runPass := func(m *Machine, f *frame) (Value, error) { return m.runBlock(sc, body, f) }
	loop := stepLoopPasses(name, max, untilC, runPass, n.Pos)
	return stepCode(name, StepLoop, 0, max, metaC, n.Pos, loop), nil
}

// stepLoopOptions compiles step-loop's {:max N :until f}; :max is required.
func (c *compiler) stepLoopOptions(opts *Node) (max int, untilC code, err error) {
	for i := 0; i+1 < len(opts.Items); i += 2 {
		k, v := opts.Items[i], opts.Items[i+1]
		key := ""
		if k.Kind == NodeAtom && k.Val.Kind() == KindKeyword {
			key = k.Val.Str()
		}
		switch key {
		case "max":
			if v.Kind != NodeAtom || v.Val.Kind() != KindInt || v.Val.AsInt() < 1 || v.Val.AsInt() > MaxLoopPasses {
				return 0, nil, c.errf(v.Pos, "step-loop :max must be a literal int from 1 to %d", MaxLoopPasses)
			}
			max = int(v.Val.AsInt())
		case "until":
			c.pure++
			uc, err := c.expr(v)
			c.pure--
			if err != nil {
				return 0, nil, err
			}
			untilC = uc
		default:
			return 0, nil, c.errf(k.Pos, "unknown step-loop option %s; use :max and :until", describe(k))
		}
	}
	if max == 0 {
		return 0, nil, c.errf(opts.Pos, "step-loop needs :max, the most passes it may run (1 to %d)", MaxLoopPasses)
	}
	return max, untilC, nil
}

// stepLoopPasses runs the loop's passes, each a step of its own, until
// :until holds of a pass's result or :max passes have run.
func stepLoopPasses(name string, max int, untilC, runPass code, pos Pos) code {
	return func(m *Machine, f *frame) (Value, error) {
		var until Value
		if untilC != nil {
			var err error
			if until, err = untilC(m, f); err != nil {
				return Nil, err
			}
		}
		last := Nil
		for i := 1; i <= max; i++ {
			pass := stepCode(fmt.Sprintf("%s#%d", name, i), StepLoopPass, i, max, noMeta, pos, runPass)
			r, err := pass(m, f)
			if err != nil {
				return Nil, err
			}
			last = r
			if until.IsNil() {
				continue
			}
			done, err := m.applyPure(until, r)
			if err != nil {
				return Nil, m.errAt(err, pos)
			}
			if done.Truthy() {
				return r, nil
			}
		}
		if !until.IsNil() {
			return Nil, &Error{Type: "rtfs/loop-exhausted", Pos: pos,
				Msg: fmt.Sprintf("step-loop %q ran :max %d passes without :until holding", name, max)}
		}
		return last, nil
	}
}

// compensated: (step.with-compensation (step "Do" …) (step "Undo" …)).
func (c *compiler) compensated(n *Node) (code, error) {
	if len(n.Items) != 3 || n.Items[1].Head() != FormStep || n.Items[2].Head() != FormStep {
		return nil, c.errf(n.Pos, "step.with-compensation needs two steps: (step.with-compensation (step \"Do\" …) (step \"Undo\" …))")
	}
	primary, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	outer := c.sc
	sc := &scope{kind: scopeFn, parent: outer}
	c.sc = sc
	comp, err := c.expr(n.Items[2])
	c.sc = outer
	if err != nil {
		return nil, err
	}
	pos := n.Pos
	pName, cName := StepName(n.Items[1]), StepName(n.Items[2])
	return func(m *Machine, f *frame) (Value, error) {
		req := &CompensationRequest{Pos: pos, File: m.file, PrimaryName: pName, CompensationName: cName}
		after := m.planCtx
		req.Primary = func(ctx context.Context) (Value, error) {
			saved := m.ctx
			m.ctx = ctx
			v, err := primary(m, f)
			m.ctx = saved
			after = m.planCtx
			return v, err
		}
		var env *frame
		if sc.needsEnv {
			env = f
		}
		lim, file := Limits{Fuel: m.total, MaxDepth: m.maxDepth}, m.file
		req.Compensation = func(ctx context.Context, host Host) (Value, error) {
			cm := newMachine(ctx, host, file, lim, nil)
			cm.planCtx = after
			v, err := comp(cm, &frame{slots: make([]Value, sc.nslots), parent: env})
			if err != nil {
				err = cm.errAt(err, pos)
			}
			cm.release()
			return v, err
		}
		v, err := m.host.Compensated(m.ctx, req)
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		return v, nil
	}, nil
}

// plan: (plan ^{meta} :program body) with optional other :key value pairs,
// or (plan body…). CCOS's (plan :name "…" :language rtfs20 :body (do …))
// is the same: :body is :program, and :language is data, not evaluated.
func (c *compiler) plan(n *Node) (code, error) {
	metaNode, bodyNodes, props := n.Meta, n.Items[1:], []*Node(nil)
	if items := n.Items[1:]; len(items) > 0 && items[0].Kind == NodeAtom && items[0].Val.Kind() == KindKeyword {
		var err error
		if metaNode, bodyNodes, props, err = c.planPairs(n, items); err != nil {
			return nil, err
		}
	}
	metaC, err := c.metaCode(metaNode)
	if err != nil {
		return nil, err
	}
	propsC, err := c.metaCode(&Node{Kind: NodeMap, Pos: n.Pos, Items: props})
	if err != nil {
		return nil, err
	}
	body, err := c.body(bodyNodes, n.Pos)
	if err != nil {
		return nil, err
	}
	return planCode(metaC, propsC, body, n.Pos), nil
}

// planPairs reads the :key value pairs of (plan :program body …): the
// metadata (on the plan, else on the first key or the program that has
// some), the program, and the other pairs as a map's items, :language's
// value quoted.
func (c *compiler) planPairs(n *Node, items []*Node) (metaNode *Node, bodyNodes, props []*Node, err error) {
	if len(items)%2 != 0 {
		return nil, nil, nil, c.errf(n.Pos, "plan needs :key value pairs, as in (plan :program (do …))")
	}
	metaNode = n.Meta
	for i := 0; i < len(items); i += 2 {
		k, v := items[i], items[i+1]
		if k.Kind != NodeAtom || k.Val.Kind() != KindKeyword {
			return nil, nil, nil, c.errf(k.Pos, "plan needs :key value pairs; %s is not a keyword", describe(k))
		}
		if k.Meta != nil && metaNode == nil {
			metaNode = k.Meta
		}
		switch k.Val.Str() {
		case "program", "body": // :body is CCOS's name for it
			if bodyNodes != nil {
				return nil, nil, nil, c.errf(k.Pos, "plan has both :program and :body; keep one")
			}
			bodyNodes = []*Node{v}
			if v.Meta != nil && metaNode == nil {
				metaNode = v.Meta
			}
			continue
		case "language": // read, not evaluated: (plan :language rtfs20 …)
			v = &Node{Kind: NodeQuote, Pos: v.Pos, Items: []*Node{v}}
		}
		props = append(props, k, v)
	}
	if bodyNodes == nil {
		return nil, nil, nil, c.errf(n.Pos, "plan has no :program (or :body); write (plan :program (do …))")
	}
	return metaNode, bodyNodes, props, nil
}

// planCode is a compiled plan: it evaluates the metadata and the other
// pairs and hands the host a PlanRequest whose Body runs the program.
func planCode(metaC, propsC func(*Machine, *frame) (*Map, error), body code, pos Pos) code {
	return func(m *Machine, f *frame) (Value, error) {
		meta, err := metaC(m, f)
		if err != nil {
			return Nil, err
		}
		propsM, err := propsC(m, f)
		if err != nil {
			return Nil, err
		}
		req := &PlanRequest{Meta: meta, Props: propsM, Ctx: m.planCtx, Pos: pos, File: m.file}
		after := m.planCtx
		req.Body = func(ctx context.Context) (Value, error) {
			saved := m.ctx
			m.ctx = ctx
			v, err := body(m, f)
			m.ctx = saved
			after = m.planCtx
			return v, err
		}
		req.After = func() Value { return after }
		v, err := m.host.Plan(m.ctx, req)
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		return v, nil
	}
}
