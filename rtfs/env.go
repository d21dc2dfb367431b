package rtfs

import (
	"context"
	"fmt"
	"sync"
)

// Builtin is a Go function callable from RTFS. Builtins must be pure: no
// I/O and no shared mutable state. Fn must not keep args after returning
// (the slice is reused); errors it returns are positioned at the call site.
type Builtin struct {
	Name string
	Min  int // fewest arguments
	Max  int // most arguments; -1 for any number
	Fn   func(m *Machine, args []Value) (Value, error)

	positioned bool // calls set Machine.callPos first (println, prn, log)
	once       sync.Once
	fn         *Fn
}

func (b *Builtin) value() Value {
	b.once.Do(func() { b.fn = &Fn{name: b.Name, builtin: b} })
	return FnValue(b.fn)
}

func (b *Builtin) arityError(n int) *Error {
	want := fmt.Sprintf("%d", b.Min)
	switch {
	case b.Max < 0:
		want = fmt.Sprintf("at least %d", b.Min)
	case b.Max != b.Min:
		want = fmt.Sprintf("%d to %d", b.Min, b.Max)
	}
	return &Error{Type: ErrArity, Msg: fmt.Sprintf("%s takes %s argument%s, got %d", b.Name, want, plural(b.Min, b.Max), n)}
}

func plural(lo, hi int) string {
	if lo == 1 && hi == 1 {
		return ""
	}
	return "s"
}

// Env is the set of builtins a program can name. NewEnv gives the core
// library; Register adds more (the stop package adds audit.* this way).
// An Env is safe for concurrent use once registration is finished.
type Env struct {
	extra map[string]*Builtin
}

// NewEnv returns an environment with the core builtins.
func NewEnv() *Env { return &Env{extra: map[string]*Builtin{}} }

// Register adds a pure builtin. Names of special forms and core builtins
// cannot be replaced.
func (e *Env) Register(b *Builtin) error {
	switch {
	case b == nil || b.Name == "" || b.Fn == nil:
		return fmt.Errorf("register builtin: name and Fn are required")
	case specialForms[b.Name] || b.Name == "ctx":
		return fmt.Errorf("register builtin %q: it is a special form", b.Name)
	case coreBuiltins[b.Name] != nil:
		return fmt.Errorf("register builtin %q: a core builtin has that name", b.Name)
	case b.Max >= 0 && b.Max < b.Min:
		return fmt.Errorf("register builtin %q: Max %d < Min %d", b.Name, b.Max, b.Min)
	}
	e.extra[b.Name] = b
	return nil
}

// Lookup finds a builtin by name.
func (e *Env) Lookup(name string) *Builtin {
	if b := coreBuiltins[name]; b != nil {
		return b
	}
	if e != nil {
		return e.extra[name]
	}
	return nil
}

// Fn is a callable value: a builtin or a closure.
type Fn struct {
	name    string
	builtin *Builtin
	lam     *lambda
	env     *frame
	pre     Value // defn contracts, already evaluated fns (or nil)
	post    Value
}

// Name returns the function's name ("fn" for anonymous ones).
func (f *Fn) Name() string {
	if f.name == "" {
		return "fn"
	}
	return f.name
}

// CallFn applies f to args on a fresh machine under the given limits. It is
// how hosts run contract predicates and until-conditions: pure, bounded.
//
// The machine's host refuses every call and step, so a contract that
// reaches an effect through a function defined in the plan fails with
// ErrImpure instead of performing it.
func CallFn(ctx context.Context, f Value, args []Value, lim Limits) (Value, error) {
	file := ""
	if fn := f.AsFn(); fn != nil && fn.lam != nil {
		file = fn.lam.file
	}
	m := newMachine(ctx, pureHost{}, file, lim, nil)
	defer m.release()
	v, err := m.Apply(f, args...)
	if err != nil {
		return Nil, m.errAt(err, Pos{})
	}
	return v, nil
}

// Apply calls f (a function, keyword, map or vector) with args.
func (m *Machine) Apply(f Value, args ...Value) (Value, error) {
	mark := m.stack.mark()
	buf := m.stack.alloc(len(args))
	copy(buf, args)
	v, err := m.apply(f, buf, Pos{})
	m.stack.release(mark)
	return v, err
}

func (m *Machine) apply(f Value, args []Value, pos Pos) (Value, error) {
	switch f.k {
	case KindFn:
		fn := f.AsFn()
		if b := fn.builtin; b != nil {
			if len(args) < b.Min || (b.Max >= 0 && len(args) > b.Max) {
				return Nil, withPos(b.arityError(len(args)), pos)
			}
			if err := m.tick(); err != nil {
				return Nil, m.errAt(err, pos)
			}
			v, err := b.Fn(m, args)
			if err != nil {
				return Nil, m.errAt(err, pos)
			}
			return v, nil
		}
		return m.callLambda(fn, args, pos)
	case KindKeyword:
		if len(args) < 1 || len(args) > 2 {
			return Nil, errorf(ErrArity, pos, "keyword %s called with %d arguments; use (%s m) or (%s m default)", Print(f), len(args), Print(f), Print(f))
		}
		return getOr(args[0], f, args[1:]), nil
	case KindMap:
		if len(args) < 1 || len(args) > 2 {
			return Nil, errorf(ErrArity, pos, "map called with %d arguments; use (m key) or (m key default)", len(args))
		}
		if err := m.probe(f, args[0]); err != nil {
			return Nil, m.errAt(err, pos)
		}
		return getOr(f, args[0], args[1:]), nil
	case KindSet:
		if len(args) < 1 || len(args) > 2 {
			return Nil, errorf(ErrArity, pos, "set called with %d arguments; use (s member) or (s member default)", len(args))
		}
		if err := m.probe(f, args[0]); err != nil {
			return Nil, m.errAt(err, pos)
		}
		return getOr(f, args[0], args[1:]), nil
	case KindVector:
		if len(args) != 1 || args[0].k != KindInt {
			return Nil, errorf(ErrArity, pos, "vector called as a function needs one int index")
		}
		items := f.Items()
		i := args[0].AsInt()
		if i < 0 || i >= int64(len(items)) {
			return Nil, errorf(ErrIndex, pos, "index %d out of range for vector of %d", i, len(items))
		}
		return items[i], nil
	}
	return Nil, errorf(ErrType, pos, "cannot call a %s (%s) as a function", f.k, PrintLimit(f, 40))
}

func getOr(coll, key Value, def []Value) Value {
	v, ok := get(coll, key)
	if !ok && len(def) > 0 {
		return def[0]
	}
	return v
}

func withPos(e *Error, pos Pos) *Error {
	if e.Pos.Line == 0 {
		e.Pos = pos
	}
	return e
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (m *Machine) callLambda(fn *Fn, args []Value, pos Pos) (Value, error) {
	l := fn.lam
	if len(args) < l.nfixed || (!l.variadic && len(args) > l.nfixed) {
		want := fmt.Sprintf("%d", l.nfixed)
		if l.variadic {
			want = fmt.Sprintf("at least %d", l.nfixed)
		}
		return Nil, errorf(ErrArity, pos, "%s takes %s argument%s, got %d", fn.Name(), want, plural(l.nfixed, l.nfixed), len(args))
	}
	if err := m.tick(); err != nil {
		return Nil, m.errAt(err, pos)
	}
	if m.depth >= m.maxDepth {
		return Nil, errorf(ErrDepth, pos, "call depth exceeded %d (runaway recursion in %s?)", m.maxDepth, fn.Name())
	}
	if !fn.pre.IsNil() {
		if err := m.checkContract(fn, fn.pre, args, Nil, false, pos); err != nil {
			return Nil, err
		}
	}
	m.depth++
	var f *frame
	var mark stackMark
	heap := l.scope.heap
	if heap {
		f = &frame{slots: make([]Value, l.scope.nslots), parent: fn.env}
	} else {
		f, mark = m.pushFrame(l.scope.nslots, fn.env)
	}
	v, err := l.run(m, f, fn, args)
	if !heap {
		m.popFrame(mark)
	}
	m.depth--
	if err != nil {
		return Nil, err
	}
	if !fn.post.IsNil() {
		if err := m.checkContract(fn, fn.post, args, v, true, pos); err != nil {
			return Nil, err
		}
	}
	return v, nil
}

func (m *Machine) checkContract(fn *Fn, pred Value, args []Value, result Value, post bool, pos Pos) error {
	cargs := make([]Value, len(args), len(args)+1)
	copy(cargs, args)
	typ, what := "contract/precondition-failed", "precondition"
	if post {
		cargs = append(cargs, result)
		typ, what = "contract/postcondition-failed", "postcondition"
	}
	ok, err := m.applyPure(pred, cargs...)
	if err != nil {
		return m.errAt(err, pos)
	}
	if !ok.Truthy() {
		return &Error{Type: typ, Pos: pos, Msg: fmt.Sprintf("%s of %s failed for arguments %s", what, fn.Name(), PrintLimit(Vector(cargs[:len(args)]), 120))}
	}
	return nil
}
