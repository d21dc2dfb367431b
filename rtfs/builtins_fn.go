package rtfs

import (
	"fmt"
	"slices"
)

// This file holds the builtins that call or build functions. Calls go
// through Machine.Apply, so fuel and depth limits hold inside them.

// applyWith calls f with first followed by extra.
func applyWith(m *Machine, f, first Value, extra []Value) (Value, error) {
	switch len(extra) {
	case 0:
		return m.Apply(f, first)
	case 1:
		return m.Apply(f, first, extra[0])
	}
	call := make([]Value, 0, 1+len(extra))
	call = append(append(call, first), extra...)
	return m.Apply(f, call...)
}

// builtinApply is (apply f x… coll): f called with the xs and then the
// elements of coll.
func builtinApply(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "apply", a[len(a)-1])
	if err != nil {
		return Nil, err
	}
	fixed := a[1 : len(a)-1]
	if err := produce(m, "apply", len(fixed)+len(xs)); err != nil {
		return Nil, err
	}
	if len(fixed) == 0 {
		return m.Apply(a[0], xs...)
	}
	call := make([]Value, 0, len(fixed)+len(xs))
	call = append(append(call, fixed...), xs...)
	return m.Apply(a[0], call...)
}

// goFn wraps a Go closure as an RTFS function value; partial, comp and
// complement build their results this way. The closure must not keep its
// args.
func goFn(name string, fn func(m *Machine, args []Value) (Value, error)) Value {
	return FnValue(&Fn{name: name, builtin: &Builtin{Name: name, Min: 0, Max: -1, Fn: fn}})
}

func builtinPartial(_ *Machine, a []Value) (Value, error) {
	f := a[0]
	pre := slices.Clone(a[1:])
	return goFn("partial", func(m *Machine, args []Value) (Value, error) {
		call := make([]Value, 0, len(pre)+len(args))
		call = append(append(call, pre...), args...)
		return m.Apply(f, call...)
	}), nil
}

// builtinComp is (comp f g …): a function applying the last first.
func builtinComp(_ *Machine, a []Value) (Value, error) {
	fs := slices.Clone(a)
	return goFn("comp", func(m *Machine, args []Value) (Value, error) {
		if len(fs) == 0 {
			if len(args) != 1 {
				return Nil, &Error{Type: ErrArity, Msg: fmt.Sprintf("(comp) takes 1 argument, got %d", len(args))}
			}
			return args[0], nil
		}
		v, err := m.Apply(fs[len(fs)-1], args...)
		for i := len(fs) - 2; i >= 0 && err == nil; i-- {
			v, err = m.Apply(fs[i], v)
		}
		return v, err
	}), nil
}

func builtinComplement(_ *Machine, a []Value) (Value, error) {
	f := a[0]
	return goFn("complement", func(m *Machine, args []Value) (Value, error) {
		v, err := m.Apply(f, args...)
		return Bool(!v.Truthy()), err
	}), nil
}

func init() {
	def("apply", 2, -1, builtinApply)
	def("identity", 1, 1, func(_ *Machine, a []Value) (Value, error) { return a[0], nil })
	def("partial", 1, -1, builtinPartial)
	def("comp", 0, -1, builtinComp)
	def("complement", 1, 1, builtinComplement)
}
