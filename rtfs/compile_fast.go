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

var fastOps1 = map[string]func(a int64) (Value, bool){
	"inc": func(a int64) (Value, bool) { return Int(a + 1), a != 1<<63-1 },
	"dec": func(a int64) (Value, bool) { return Int(a - 1), a != -1<<63 },
}

// fastCall returns inline code for a core numeric builtin call, or nil.
func fastCall(b *Builtin, args []code, pos Pos) code {
	if coreBuiltins[b.Name] != b {
		return nil
	}
	switch len(args) {
	case 1:
		op := fastOps1[b.Name]
		if op == nil {
			return nil
		}
		a0 := args[0]
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
	case 2:
		op := fastOps2[b.Name]
		if op == nil {
			return nil
		}
		a0, a1 := args[0], args[1]
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
	return nil
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
