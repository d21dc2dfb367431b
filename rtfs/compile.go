package rtfs

import (
	"context"
	"errors"
	"io"
)

// Mode selects which forms a program may use.
type Mode uint8

const (
	// Pure programs (contracts, predicates, ralph eval) have no call or step forms.
	Pure Mode = iota
	// PlanMode programs may call capabilities and run steps through a Host.
	PlanMode
)

// Options configure compilation.
type Options struct {
	File   string // name used in error positions
	Mode   Mode
	Env    *Env   // builtins; nil means the core library only
	Limits Limits // evaluation limits baked into the program
	Read   ReadOptions
	// Log receives the lines println, prn and log print when the program
	// runs without a host that records them (pure mode); nil drops them.
	Log io.Writer
}

// Program is compiled RTFS: a tree of Go closures with every name resolved
// to a slot or builtin. A Program is immutable and safe for concurrent use.
type Program struct {
	file   string
	mode   Mode
	body   code
	scope  *scope
	limits Limits
	forms  []*Node
	log    io.Writer
}

// Forms returns the source forms the program was compiled from.
func (p *Program) Forms() []*Node { return p.forms }

// code is one compiled expression.
type code func(m *Machine, f *frame) (Value, error)

// CompileString reads and compiles src.
func CompileString(src string, opts Options) (*Program, error) {
	ro := opts.Read
	ro.File = opts.File
	forms, err := ReadWith(src, ro)
	if err != nil {
		return nil, err
	}
	return Compile(forms, opts)
}

// Compile turns read forms into a program. Errors name file:line:col.
func Compile(forms []*Node, opts Options) (*Program, error) {
	c := &compiler{env: opts.Env, file: opts.File, mode: opts.Mode}
	if c.env == nil {
		c.env = NewEnv()
	}
	c.sc = &scope{kind: scopeTop}
	body, err := c.body(forms, Pos{1, 1})
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.File == "" {
			e.File = opts.File
		}
		return nil, err
	}
	return &Program{file: opts.File, mode: opts.Mode, body: body, scope: c.sc, limits: opts.Limits.withDefaults(), forms: forms, log: opts.Log}, nil
}

// Eval runs a pure program and returns the value of its last form.
func (p *Program) Eval(ctx context.Context) (Value, error) {
	return p.run(ctx, nil, Nil, p.limits)
}

// EvalWith runs a pure program under other limits.
func (p *Program) EvalWith(ctx context.Context, lim Limits) (Value, error) {
	return p.run(ctx, nil, Nil, lim.withDefaults())
}

// Run executes a plan-mode program: call and step* forms reach host, and
// the symbol ctx starts as planCtx.
func (p *Program) Run(ctx context.Context, host Host, planCtx Value) (Value, error) {
	if host == nil && p.mode == PlanMode {
		return Nil, errors.New("rtfs: Run needs a host for a plan-mode program")
	}
	return p.run(ctx, host, planCtx, p.limits)
}

func (p *Program) run(ctx context.Context, host Host, planCtx Value, lim Limits) (Value, error) {
	m := newMachine(ctx, host, p.file, lim, nil)
	m.planCtx = planCtx
	m.logw = p.log
	var f *frame
	var mark stackMark
	if p.scope.heap {
		f = &frame{slots: make([]Value, p.scope.nslots)}
	} else {
		f, mark = m.pushFrame(p.scope.nslots, nil)
	}
	v, err := p.body(m, f)
	if !p.scope.heap {
		m.popFrame(mark)
	}
	m.release()
	if err != nil {
		e := asError(err, Pos{})
		if e.File == "" {
			if e == err {
				c := *e
				e = &c
			}
			e.File = p.file
		}
		return Nil, e
	}
	return v, nil
}

type scopeKind uint8

const (
	scopeTop   scopeKind = iota // the program
	scopeFn                     // a closure: may outlive its defining frame
	scopeBlock                  // a body run while its defining frame is alive (loop pass, parallel branch)
)

// scope is a function activation at compile time: its slots and the
// lexical names visible in it.
type scope struct {
	kind     scopeKind
	parent   *scope
	names    []local
	nslots   int
	heap     bool // frames must live on the heap: a closure keeps them
	needsEnv bool // closures over this scope keep their defining frame
}

type local struct {
	name string
	slot int
}

type compiler struct {
	env   *Env
	file  string
	mode  Mode
	pure  int // > 0 while compiling code that must be pure (contracts, metadata)
	depth int // nesting of expr calls
	sc    *scope

	// Tail position: tail is set by exprT for the next expr call only;
	// inTail is what expr saw, for the special form it dispatches to,
	// which must read it before compiling anything else.
	tail, inTail bool
	recur        *recurTarget // what a recur here rebinds, or nil
}

func (c *compiler) errf(pos Pos, format string, args ...any) *Error {
	e := errorf(ErrCompile, pos, format, args...)
	e.File = c.file
	return e
}

func (c *compiler) declare(name string) int {
	s := c.sc
	slot := s.nslots
	s.nslots++
	s.names = append(s.names, local{name, slot})
	return slot
}

// resolve finds a lexical name: how many frames up, and its slot. Crossing
// a closure scope forces the frames it keeps onto the heap.
func (c *compiler) resolve(name string) (depth, slot int, ok bool) {
	escaping := false
	for s := c.sc; s != nil; s = s.parent {
		for i := len(s.names) - 1; i >= 0; i-- {
			if s.names[i].name == name {
				// Mark the scopes crossed on the way out.
				for t := c.sc; t != s; t = t.parent {
					if t.kind == scopeFn {
						escaping = true
					}
					t.needsEnv = true
					if escaping {
						t.parent.heap = true
					}
				}
				return depth, s.names[i].slot, true
			}
		}
		depth++
	}
	return 0, 0, false
}

func (c *compiler) isLocal(name string) bool {
	for s := c.sc; s != nil; s = s.parent {
		for i := range s.names {
			if s.names[i].name == name {
				return true
			}
		}
	}
	return false
}

// body compiles forms evaluated in order, returning the last value.
func (c *compiler) body(forms []*Node, pos Pos) (code, error) {
	return c.bodyT(forms, pos, false)
}

// bodyT is body with its last form in tail position when tail is true.
func (c *compiler) bodyT(forms []*Node, pos Pos, tail bool) (code, error) {
	switch len(forms) {
	case 0:
		return constant(Nil), nil
	case 1:
		return c.exprT(forms[0], tail)
	}
	codes := make([]code, len(forms))
	for i, f := range forms {
		cd, err := c.exprT(f, tail && i == len(forms)-1)
		if err != nil {
			return nil, err
		}
		codes[i] = cd
	}
	return func(m *Machine, f *frame) (Value, error) {
		last := len(codes) - 1
		for _, cd := range codes[:last] {
			if _, err := cd(m, f); err != nil {
				return Nil, err
			}
		}
		return codes[last](m, f)
	}, nil
}

func constant(v Value) code {
	return func(*Machine, *frame) (Value, error) { return v, nil }
}

// maxCompileDepth bounds nesting after macro expansion (-> and ->> can
// nest deeper than the reader allows).
const maxCompileDepth = 512

// exprT compiles n, in tail position when tail is true.
func (c *compiler) exprT(n *Node, tail bool) (code, error) {
	c.tail = tail
	return c.expr(n)
}

func (c *compiler) expr(n *Node) (code, error) {
	tail := c.tail
	c.tail = false
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > maxCompileDepth {
		return nil, c.errf(n.Pos, "expression nests deeper than %d levels; flatten it", maxCompileDepth)
	}
	switch n.Kind {
	case NodeAtom:
		return constant(n.Val), nil
	case NodeQuote:
		return constant(n.Items[0].Value()), nil
	case NodeSymbol:
		return c.symbol(n)
	case NodeVector:
		return c.vector(n)
	case NodeMap:
		return c.mapLit(n)
	case NodeSet:
		return c.setLit(n)
	case NodeList:
		if len(n.Items) == 0 {
			return constant(List(nil)), nil
		}
		head := n.Items[0]
		if head.Kind == NodeSymbol && !c.isLocal(head.Val.Str()) {
			name := head.Val.Str()
			if sf, ok := c.special(name); ok {
				c.inTail = tail
				return sf(n)
			}
		}
		return c.call(n)
	}
	return nil, c.errf(n.Pos, "cannot compile this form")
}

func (c *compiler) symbol(n *Node) (code, error) {
	name := n.Val.Str()
	if depth, slot, ok := c.resolve(name); ok {
		return slotRef(depth, slot), nil
	}
	if name == "ctx" && c.mode == PlanMode { // readable in metadata too: reading is pure
		return func(m *Machine, _ *frame) (Value, error) { return m.planCtx, nil }, nil
	}
	if b := c.env.Lookup(name); b != nil {
		return constant(b.value()), nil
	}
	if specialForms[name] {
		return nil, c.errf(n.Pos, "%s is a special form and cannot be used as a value", name)
	}
	return nil, c.errf(n.Pos, "unable to resolve symbol %s; define it with let, def or fn, or check the spelling", name)
}

func slotRef(depth, slot int) code {
	switch depth {
	case 0:
		return func(_ *Machine, f *frame) (Value, error) { return f.slots[slot], nil }
	case 1:
		return func(_ *Machine, f *frame) (Value, error) { return f.parent.slots[slot], nil }
	}
	return func(_ *Machine, f *frame) (Value, error) {
		for range depth {
			f = f.parent
		}
		return f.slots[slot], nil
	}
}

func (c *compiler) exprs(nodes []*Node) ([]code, bool, error) {
	codes := make([]code, len(nodes))
	allConst := true
	for i, it := range nodes {
		cd, err := c.expr(it)
		if err != nil {
			return nil, false, err
		}
		codes[i] = cd
		if !it.IsLiteral() {
			allConst = false
		}
	}
	return codes, allConst, nil
}

// constValue is the value of a constant node as evaluation sees it: unlike
// Node.Value, a quote inside a literal yields the quoted form, so ['a] is
// [a] rather than [(quote a)].
func constValue(n *Node) Value {
	switch n.Kind {
	case NodeQuote:
		return n.Items[0].Value()
	case NodeVector:
		items := make([]Value, len(n.Items))
		for i, it := range n.Items {
			items[i] = constValue(it)
		}
		return Vector(items)
	case NodeMap:
		b := NewMapBuilder(len(n.Items) / 2)
		for i := 0; i+1 < len(n.Items); i += 2 {
			b.Set(constValue(n.Items[i]), constValue(n.Items[i+1]))
		}
		return MapValue(b.Map())
	case NodeSet:
		items := make([]Value, len(n.Items))
		for i, it := range n.Items {
			items[i] = constValue(it)
		}
		return SetValue(NewSet(items...))
	}
	return n.Value()
}

func (c *compiler) setLit(n *Node) (code, error) {
	codes, allConst, err := c.exprs(n.Items)
	if err != nil {
		return nil, err
	}
	if allConst {
		return constant(constValue(n)), nil
	}
	pos := n.Pos
	return func(m *Machine, f *frame) (Value, error) {
		b := NewMapBuilder(len(codes))
		for _, cd := range codes {
			v, err := cd(m, f)
			if err != nil {
				return Nil, err
			}
			if err := m.key(v); err != nil {
				return Nil, positioned(err, pos)
			}
			if b.Has(v) {
				return Nil, errorf(ErrValue, pos, "duplicate member %s in set literal; use (set [...]) to drop duplicates", PrintLimit(v, 40))
			}
			b.Set(v, v)
		}
		return SetValue(setOfMap(b.Map())), nil
	}, nil
}

func (c *compiler) vector(n *Node) (code, error) {
	codes, allConst, err := c.exprs(n.Items)
	if err != nil {
		return nil, err
	}
	if allConst {
		return constant(constValue(n)), nil
	}
	return func(m *Machine, f *frame) (Value, error) {
		items := make([]Value, len(codes))
		for i, cd := range codes {
			v, err := cd(m, f)
			if err != nil {
				return Nil, err
			}
			items[i] = v
		}
		return Vector(items), nil
	}, nil
}

func (c *compiler) mapLit(n *Node) (code, error) {
	codes, allConst, err := c.exprs(n.Items)
	if err != nil {
		return nil, err
	}
	if allConst {
		return constant(constValue(n)), nil
	}
	pos := n.Pos
	return func(m *Machine, f *frame) (Value, error) {
		b := NewMapBuilder(len(codes) / 2)
		for i := 0; i < len(codes); i += 2 {
			k, err := codes[i](m, f)
			if err != nil {
				return Nil, err
			}
			v, err := codes[i+1](m, f)
			if err != nil {
				return Nil, err
			}
			if err := m.key(k); err != nil {
				return Nil, positioned(err, pos)
			}
			if b.Has(k) {
				return Nil, errorf(ErrValue, pos, "duplicate key %s in map literal", PrintLimit(k, 40))
			}
			b.Set(k, v)
		}
		return MapValue(b.Map()), nil
	}, nil
}

// call compiles a function application. A head naming a builtin is bound
// at compile time, with its arity checked.
func (c *compiler) call(n *Node) (code, error) {
	head := n.Items[0]
	args, _, err := c.exprs(n.Items[1:])
	if err != nil {
		return nil, err
	}
	pos := n.Pos
	nargs := len(args)
	if head.Kind == NodeSymbol && !c.isLocal(head.Val.Str()) && !(head.Val.Str() == "ctx" && c.mode == PlanMode) {
		if b := c.env.Lookup(head.Val.Str()); b != nil {
			if nargs < b.Min || (b.Max >= 0 && nargs > b.Max) {
				e := b.arityError(nargs)
				e.Type, e.Pos, e.File = ErrCompile, pos, c.file
				return nil, e
			}
			if b.positioned {
				return positionedCall(b, args, pos), nil
			}
			if fast := c.fastCall(b, args, n.Items[1:], pos); fast != nil {
				return fast, nil
			}
			return builtinCall(b, args, pos), nil
		}
	}
	fc, err := c.expr(head)
	if err != nil {
		return nil, err
	}
	return func(m *Machine, f *frame) (Value, error) {
		fv, err := fc(m, f)
		if err != nil {
			return Nil, err
		}
		mark := m.stack.mark()
		buf := m.stack.alloc(nargs)
		for i, a := range args {
			v, err := a(m, f)
			if err != nil {
				m.stack.release(mark)
				return Nil, err
			}
			buf[i] = v
		}
		v, err := m.apply(fv, buf, pos)
		m.stack.release(mark)
		return v, err
	}, nil
}

func builtinCall(b *Builtin, args []code, pos Pos) code {
	fn := b.Fn
	switch len(args) {
	case 1:
		a0 := args[0]
		return func(m *Machine, f *frame) (Value, error) {
			v0, err := a0(m, f)
			if err != nil {
				return Nil, err
			}
			if err := m.tick(); err != nil {
				return Nil, m.errAt(err, pos)
			}
			mark := m.stack.mark()
			buf := m.stack.alloc(1)
			buf[0] = v0
			v, err := fn(m, buf)
			m.stack.release(mark)
			if err != nil {
				return Nil, m.errAt(err, pos)
			}
			return v, nil
		}
	case 2:
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
			mark := m.stack.mark()
			buf := m.stack.alloc(2)
			buf[0], buf[1] = v0, v1
			v, err := fn(m, buf)
			m.stack.release(mark)
			if err != nil {
				return Nil, m.errAt(err, pos)
			}
			return v, nil
		}
	}
	return func(m *Machine, f *frame) (Value, error) {
		buf, mark, err := evalOnStack(m, f, args)
		if err != nil {
			return Nil, err
		}
		if err := m.tick(); err != nil {
			m.stack.release(mark)
			return Nil, m.errAt(err, pos)
		}
		v, err := fn(m, buf)
		m.stack.release(mark)
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		return v, nil
	}
}

// evalOnStack evaluates args in order into a slice taken from m's value
// stack. On success the caller releases mark once it is done with buf; on
// error the slice is already released.
func evalOnStack(m *Machine, f *frame, args []code) ([]Value, stackMark, error) {
	mark := m.stack.mark()
	buf := m.stack.alloc(len(args))
	for i, a := range args {
		v, err := a(m, f)
		if err != nil {
			m.stack.release(mark)
			return nil, mark, err
		}
		buf[i] = v
	}
	return buf, mark, nil
}

// positionedCall is builtinCall for builtins that want their call's
// position (println, prn, log): it is set once the arguments are evaluated.
func positionedCall(b *Builtin, args []code, pos Pos) code {
	return func(m *Machine, f *frame) (Value, error) {
		buf, mark, err := evalOnStack(m, f, args)
		if err != nil {
			return Nil, err
		}
		if err := m.tick(); err != nil {
			m.stack.release(mark)
			return Nil, m.errAt(err, pos)
		}
		m.callPos = pos
		v, err := b.Fn(m, buf)
		m.callPos = Pos{}
		m.stack.release(mark)
		if err != nil {
			return Nil, m.errAt(err, pos)
		}
		return v, nil
	}
}

func (c *compiler) arity(n *Node, name string, min, max int) error {
	got := len(n.Items) - 1
	if got < min || (max >= 0 && got > max) {
		switch {
		case max < 0:
			return c.errf(n.Pos, "%s needs at least %d argument%s, got %d", name, min, plural(min, min), got)
		case min == max:
			return c.errf(n.Pos, "%s needs %d argument%s, got %d", name, min, plural(min, min), got)
		default:
			return c.errf(n.Pos, "%s needs %d to %d arguments, got %d", name, min, max, got)
		}
	}
	return nil
}

func describe(n *Node) string {
	s := PrintNode(n)
	return truncate(s, 40)
}
