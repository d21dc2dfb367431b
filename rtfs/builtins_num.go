package rtfs

import (
	"cmp"
	"math"
)

// coreBuiltins is the registration table of the core library, filled by
// the builtins_*.go files. It is never modified after package init.
var coreBuiltins = map[string]*Builtin{}

func def(name string, min, max int, fn func(m *Machine, args []Value) (Value, error)) {
	if coreBuiltins[name] != nil {
		panic("rtfs: builtin defined twice: " + name)
	}
	coreBuiltins[name] = &Builtin{Name: name, Min: min, Max: max, Fn: fn}
}

func typeErr(fn string, want string, got Value) *Error {
	return &Error{Type: ErrType, Msg: fn + " expects " + want + ", got " + got.Kind().String() + " " + PrintLimit(got, 40)}
}

func needNumber(fn string, v Value) error {
	if !v.IsNumber() {
		return typeErr(fn, "a number", v)
	}
	return nil
}

func addInt(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

func mulInt(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	r := a * b
	if r/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return r, true
}

func abs64(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

// arith folds a binary numeric op over args: int op int stays int
// (overflow is an error), any float makes the result float.
func arith(name string, args []Value, ident int64, iop func(a, b int64) (int64, bool), fop func(a, b float64) float64) (Value, error) {
	if len(args) == 0 {
		return Int(ident), nil
	}
	acc := args[0]
	if err := needNumber(name, acc); err != nil {
		return Nil, err
	}
	if len(args) == 1 && (name == "-") {
		args = []Value{Int(0), acc}
		acc = args[0]
	}
	for _, b := range args[1:] {
		if err := needNumber(name, b); err != nil {
			return Nil, err
		}
		if acc.k == KindInt && b.k == KindInt {
			r, ok := iop(acc.AsInt(), b.AsInt())
			if !ok {
				return Nil, &Error{Type: ErrArith, Msg: "integer overflow in " + name}
			}
			acc = Int(r)
			continue
		}
		acc = Float(fop(acc.AsFloat(), b.AsFloat()))
	}
	return acc, nil
}

func divide(args []Value) (Value, error) {
	for _, a := range args {
		if err := needNumber("/", a); err != nil {
			return Nil, err
		}
	}
	acc := args[0]
	rest := args[1:]
	if len(args) == 1 {
		acc, rest = Int(1), args
	}
	for _, b := range rest {
		if b.AsFloat() == 0 {
			return Nil, &Error{Type: ErrArith, Msg: "division by zero"}
		}
		if acc.k == KindInt && b.k == KindInt {
			x, y := acc.AsInt(), b.AsInt()
			if x == math.MinInt64 && y == -1 {
				return Nil, &Error{Type: ErrArith, Msg: "integer overflow in /"}
			}
			if x%y == 0 {
				acc = Int(x / y)
				continue
			}
		}
		acc = Float(acc.AsFloat() / b.AsFloat())
	}
	return acc, nil
}

// compareNum orders two numbers (ints and floats mix).
func compareNum(a, b Value) int {
	if a.k == KindInt && b.k == KindInt {
		return cmp.Compare(a.AsInt(), b.AsInt())
	}
	// Not cmp.Compare for floats: it orders NaN before every number, where
	// here NaN compares as 0 with anything (as it always has for sort).
	x, y := a.AsFloat(), b.AsFloat()
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func compareChain(name string, ok func(c int) bool) func(*Machine, []Value) (Value, error) {
	return func(_ *Machine, args []Value) (Value, error) {
		for _, a := range args {
			if err := needNumber(name, a); err != nil {
				return Nil, err
			}
		}
		for i := 0; i+1 < len(args); i++ {
			if math.IsNaN(args[i].AsFloat()) || math.IsNaN(args[i+1].AsFloat()) || !ok(compareNum(args[i], args[i+1])) {
				return False, nil
			}
		}
		return True, nil
	}
}

func numPred(name string, ok func(v Value) bool) func(*Machine, []Value) (Value, error) {
	return func(_ *Machine, args []Value) (Value, error) {
		if err := needNumber(name, args[0]); err != nil {
			return Nil, err
		}
		return Bool(ok(args[0])), nil
	}
}

func needInt(name string, v Value) error {
	if v.k != KindInt {
		return typeErr(name, "an int", v)
	}
	return nil
}

func init() {
	def("+", 0, -1, func(_ *Machine, a []Value) (Value, error) {
		return arith("+", a, 0, addInt, func(x, y float64) float64 { return x + y })
	})
	def("-", 1, -1, func(_ *Machine, a []Value) (Value, error) {
		return arith("-", a, 0, func(x, y int64) (int64, bool) {
			if y == math.MinInt64 {
				return 0, false
			}
			return addInt(x, -y)
		}, func(x, y float64) float64 { return x - y })
	})
	def("*", 0, -1, func(_ *Machine, a []Value) (Value, error) {
		return arith("*", a, 1, mulInt, func(x, y float64) float64 { return x * y })
	})
	def("/", 1, -1, func(_ *Machine, a []Value) (Value, error) { return divide(a) })
	def("mod", 2, 2, modNum)
	def("inc", 1, 1, func(_ *Machine, a []Value) (Value, error) {
		return arith("inc", []Value{a[0], Int(1)}, 0, addInt, func(x, y float64) float64 { return x + y })
	})
	def("dec", 1, 1, func(_ *Machine, a []Value) (Value, error) {
		return arith("dec", []Value{a[0], Int(-1)}, 0, addInt, func(x, y float64) float64 { return x + y })
	})
	def("min", 1, -1, minmax("min", func(c int) bool { return c < 0 }))
	def("max", 1, -1, minmax("max", func(c int) bool { return c > 0 }))
	def("abs", 1, 1, absNum)
	def("pos?", 1, 1, numPred("pos?", func(v Value) bool { return v.AsFloat() > 0 }))
	def("neg?", 1, 1, numPred("neg?", func(v Value) bool { return v.AsFloat() < 0 }))
	def("zero?", 1, 1, numPred("zero?", func(v Value) bool { return v.AsFloat() == 0 }))
	def("even?", 1, 1, func(_ *Machine, a []Value) (Value, error) {
		if err := needInt("even?", a[0]); err != nil {
			return Nil, err
		}
		return Bool(a[0].AsInt()%2 == 0), nil
	})
	def("odd?", 1, 1, func(_ *Machine, a []Value) (Value, error) {
		if err := needInt("odd?", a[0]); err != nil {
			return Nil, err
		}
		return Bool(a[0].AsInt()%2 != 0), nil
	})
	def("<", 1, -1, compareChain("<", func(c int) bool { return c < 0 }))
	def("<=", 1, -1, compareChain("<=", func(c int) bool { return c <= 0 }))
	def(">", 1, -1, compareChain(">", func(c int) bool { return c > 0 }))
	def(">=", 1, -1, compareChain(">=", func(c int) bool { return c >= 0 }))
	def("=", 1, -1, func(m *Machine, a []Value) (Value, error) {
		for i := 0; i+1 < len(a); i++ {
			if eq, err := m.equal(a[i], a[i+1]); !eq || err != nil {
				return False, err
			}
		}
		return True, nil
	})
	def("not=", 1, -1, func(m *Machine, a []Value) (Value, error) {
		for i := 0; i+1 < len(a); i++ {
			if eq, err := m.equal(a[i], a[i+1]); !eq || err != nil {
				return True, err
			}
		}
		return False, nil
	})
	def("not", 1, 1, func(_ *Machine, a []Value) (Value, error) { return Bool(!a[0].Truthy()), nil })
}

// modNum is (mod x y): the remainder with the sign of y, as Clojure's mod.
func modNum(_ *Machine, a []Value) (Value, error) {
	if err := needNumber("mod", a[0]); err != nil {
		return Nil, err
	}
	if err := needNumber("mod", a[1]); err != nil {
		return Nil, err
	}
	if a[1].AsFloat() == 0 {
		return Nil, &Error{Type: ErrArith, Msg: "division by zero in mod"}
	}
	if a[0].k == KindInt && a[1].k == KindInt {
		x, y := a[0].AsInt(), a[1].AsInt()
		if y == -1 {
			return Int(0), nil
		}
		r := x % y
		if r != 0 && (r < 0) != (y < 0) {
			r += y
		}
		return Int(r), nil
	}
	x, y := a[0].AsFloat(), a[1].AsFloat()
	r := math.Mod(x, y)
	if r != 0 && (r < 0) != (y < 0) {
		r += y
	}
	return Float(r), nil
}

// minmax is min or max: the number better than every other.
func minmax(name string, better func(c int) bool) func(*Machine, []Value) (Value, error) {
	return func(_ *Machine, a []Value) (Value, error) {
		best := a[0]
		if err := needNumber(name, best); err != nil {
			return Nil, err
		}
		for _, v := range a[1:] {
			if err := needNumber(name, v); err != nil {
				return Nil, err
			}
			if better(compareNum(v, best)) {
				best = v
			}
		}
		return best, nil
	}
}

// absNum is (abs x); the absolute of the least int overflows.
func absNum(_ *Machine, a []Value) (Value, error) {
	if err := needNumber("abs", a[0]); err != nil {
		return Nil, err
	}
	if a[0].k == KindInt {
		x := a[0].AsInt()
		if x == math.MinInt64 {
			return Nil, &Error{Type: ErrArith, Msg: "integer overflow in abs"}
		}
		return Int(abs64(x)), nil
	}
	return Float(math.Abs(a[0].AsFloat())), nil
}
