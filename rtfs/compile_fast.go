package rtfs

// Fast paths for the hot numeric builtins: a call of + - * < <= > >= with
// two arguments, or inc and dec with one, computes int results inline
// and falls back to the builtin for anything else (floats, overflow,
// type errors), so results, errors and fuel are the same either way.

type intOp2 func(a, b int64) (Value, bool) // ok false: let the builtin decide

var fastOps2 = map[string]intOp2{
	"+": func(a, b int64) (Value, bool) {
		s, ok := addInt(a, b)
		return Int(s), ok
	},
	"-": func(a, b int64) (Value, bool) {
		s := a - b
		return Int(s), (s < a) == (b > 0)
	},
	"*": func(a, b int64) (Value, bool) {
		r, ok := mulInt(a, b)
		return Int(r), ok
	},
	"<":  func(a, b int64) (Value, bool) { return Bool(a < b), true },
	"<=": func(a, b int64) (Value, bool) { return Bool(a <= b), true },
	">":  func(a, b int64) (Value, bool) { return Bool(a > b), true },
	">=": func(a, b int64) (Value, bool) { return Bool(a >= b), true },
	"=":  func(a, b int64) (Value, bool) { return Bool(a == b), true },
}

type intOp1 func(a int64) (Value, bool) // ok false: let the builtin decide

var fastOps1 = map[string]intOp1{
	"inc": func(a int64) (Value, bool) { return Int(a + 1), a != 1<<63-1 },
	"dec": func(a int64) (Value, bool) { return Int(a - 1), a != -1<<63 },
}

// operand says where a fast call's argument comes from when it needs no
// code of its own: a slot of the current frame or a constant.
type operand struct {
	kind  uint8 // 0 code, 1 slot of the current frame, 2 constant
	slot  int
	value Value
}

func (c *compiler) operandOf(n *Node) operand {
	switch {
	case n.Kind == NodeAtom:
		return operand{kind: 2, value: n.Val}
	case n.Kind == NodeSymbol:
		if depth, slot, ok := c.resolve(n.Val.Str()); ok && depth == 0 {
			return operand{kind: 1, slot: slot}
		}
	}
	return operand{}
}

// fastCall returns inline code for a core numeric builtin call, or nil.
func (c *compiler) fastCall(b *Builtin, args []code, nodes []*Node, pos Pos) code {
	if coreBuiltins[b.Name] != b {
		return nil
	}
	switch len(args) {
	case 1:
		if op := fastOps1[b.Name]; op != nil {
			return c.fastCall1(b, op, args[0], nodes[0], pos)
		}
	case 2:
		if op := fastOps2[b.Name]; op != nil {
			return c.fastCall2(b, op, args, nodes, pos)
		}
	}
	return nil
}

// fastCall1 is the inline code of a one-argument call of b: its argument
// read from the frame's slot if it is a local of this frame, else
// computed by a0.
func (c *compiler) fastCall1(b *Builtin, op intOp1, a0 code, node *Node, pos Pos) code {
	if o := c.operandOf(node); o.kind == 1 {
		s0 := o.slot
		return func(m *Machine, f *frame) (Value, error) {
			v0 := f.slots[s0]
			if err := m.tick(); err != nil {
				return Nil, m.errAt(err, pos)
			}
			if v0.k == KindInt {
				if r, ok := op(int64(v0.n)); ok {
					return r, nil
				}
			}
			return m.callBuiltin(b, pos, v0)
		}
	}
	return func(m *Machine, f *frame) (Value, error) {
		v0, err := a0(m, f)
		if err != nil {
			return Nil, err
		}
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
		if v0.k == KindInt {
			if r, ok := op(int64(v0.n)); ok {
				return r, nil
			}
		}
		return m.callBuiltin(b, pos, v0)
	}
}

// fastCall2 is the inline code of a two-argument call of b: fastSlot2's
// when the first argument is a local of this frame and the second one too
// or a constant, else code computing both with args.
func (c *compiler) fastCall2(b *Builtin, op intOp2, args []code, nodes []*Node, pos Pos) code {
	a0, a1 := args[0], args[1]
	o0, o1 := c.operandOf(nodes[0]), c.operandOf(nodes[1])
	if o0.kind == 1 && o1.kind != 0 {
		return fastSlot2(b, op, o0.slot, o1, pos)
	}
	return func(m *Machine, f *frame) (Value, error) {
		v0, err := a0(m, f)
		if err != nil {
			return Nil, err
		}
		v1, err := a1(m, f)
		if err != nil {
			return Nil, err
		}
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
		if v0.k == KindInt && v1.k == KindInt {
			if r, ok := op(int64(v0.n), int64(v1.n)); ok {
				return r, nil
			}
		}
		return m.callBuiltin(b, pos, v0, v1)
	}
}

// fastSlot2 is a two-argument fast call whose first argument is a slot
// of the current frame and whose second is a slot or a constant.
func fastSlot2(b *Builtin, op intOp2, s0 int, o1 operand, pos Pos) code {
	if o1.kind == 1 {
		s1 := o1.slot
		return func(m *Machine, f *frame) (Value, error) {
			v0, v1 := f.slots[s0], f.slots[s1]
			if err := m.tick(); err != nil {
				return Nil, m.errAt(err, pos)
			}
			if v0.k == KindInt && v1.k == KindInt {
				if r, ok := op(int64(v0.n), int64(v1.n)); ok {
					return r, nil
				}
			}
			return m.callBuiltin(b, pos, v0, v1)
		}
	}
	v1 := o1.value
	return func(m *Machine, f *frame) (Value, error) {
		v0 := f.slots[s0]
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, pos)
		}
		if v0.k == KindInt && v1.k == KindInt {
			if r, ok := op(int64(v0.n), int64(v1.n)); ok {
				return r, nil
			}
		}
		return m.callBuiltin(b, pos, v0, v1)
	}
}

// callBuiltin runs b on already evaluated arguments (fuel already
// charged), positioning its error at pos.
func (m *Machine) callBuiltin(b *Builtin, pos Pos, args ...Value) (Value, error) {
	mark := m.stack.mark()
	buf := m.stack.alloc(len(args))
	copy(buf, args)
	v, err := b.Fn(m, buf)
	m.stack.release(mark)
	if err != nil {
		return Nil, m.errAt(err, pos)
	}
	return v, nil
}
