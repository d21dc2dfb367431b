package rtfs

import "strings"

// planForms need a host and are refused in pure code.
var planForms = map[string]bool{
	FormPlan: true, FormStep: true, FormCall: true, FormStepParallel: true, FormStepLoop: true,
	FormWithCompensation: true,
}

// specialForms are the names the compiler handles itself: the plan forms
// and these. Built from planForms so a new plan form cannot be rebound.
var specialForms = func() map[string]bool {
	m := map[string]bool{
		"do": true, "let": true, "if": true, "when": true, "when-not": true, "cond": true,
		"fn": true, "defn": true, "def": true, "and": true, "or": true, "quote": true,
		"try": true, "throw": true, "->": true, "->>": true,
		"loop": true, "recur": true, "dotimes": true, "doseq": true, "for": true,
		"if-let": true, "when-let": true, "if-some": true, "when-some": true, "letfn": true, "declare": true,
		"case": true, "condp": true, "as->": true, "some->": true, "some->>": true, "match": true,
	}
	for name := range planForms {
		m[name] = true
	}
	return m
}()

// IsSpecialForm reports whether name is a form the compiler handles itself
// (do, let, fn, step, …), as a syntax highlighter needs to know.
func IsSpecialForm(name string) bool { return specialForms[name] }

// special returns the compiler of the special form name, false if name
// is not one.
func (c *compiler) special(name string) (func(*Node) (code, error), bool) {
	if planForms[name] {
		return c.planSpecial(name), true
	}
	if f := c.controlForm(name); f != nil {
		return f, true
	}
	if f := c.bindingForm(name); f != nil {
		return f, true
	}
	f := c.iterationForm(name)
	return f, f != nil
}

// planSpecial compiles the plan form name, refusing it outside a plan or
// in the plan's pure code.
func (c *compiler) planSpecial(name string) func(*Node) (code, error) {
	return func(n *Node) (code, error) {
		if c.mode != PlanMode || c.pure > 0 {
			where := "pure code (contracts, predicates, metadata, ralph eval)"
			if c.mode == PlanMode {
				where = "contracts and step metadata, which must be pure"
			}
			e := c.errf(n.Pos, "%s is not allowed in %s; move it into a plan step", name, where)
			e.cause = ErrPlanFormInPureCode
			return nil, e
		}
		return c.planForm(name, n)
	}
}

// controlForm returns the compiler of a sequencing, branching,
// definition or error form (do, quote, if, when, cond, and, or, fn, defn,
// def, declare, try, throw), or nil.
func (c *compiler) controlForm(name string) func(*Node) (code, error) {
	switch name {
	case "do":
		return func(n *Node) (code, error) { return c.bodyT(n.Items[1:], n.Pos, c.inTail) }
	case "quote":
		return func(n *Node) (code, error) {
			if err := c.arity(n, "quote", 1, 1); err != nil {
				return nil, err
			}
			return constant(n.Items[1].Value()), nil
		}
	case "if":
		return c.ifForm
	case "when", "when-not":
		return func(n *Node) (code, error) { return c.when(n, name == "when-not") }
	case "cond":
		return c.cond
	case "and", "or":
		return func(n *Node) (code, error) { return c.andOr(n, name == "and") }
	case "fn":
		return c.fnForm
	case "defn":
		return c.defn
	case "def":
		return c.def
	case "declare":
		return c.declareForm
	case "try":
		return c.try
	case "throw":
		return c.throw
	}
	return nil
}

// bindingForm returns the compiler of a form that binds or matches a
// value (let, letfn, if-let and its kin, case, condp, match), or nil.
func (c *compiler) bindingForm(name string) func(*Node) (code, error) {
	switch name {
	case "let":
		return c.let
	case "letfn":
		return c.letfn
	case "if-let", "if-some", "when-let", "when-some":
		return func(n *Node) (code, error) {
			return c.condBind(n, name, name[0] == 'w', name == "if-some" || name == "when-some")
		}
	case "case":
		return c.caseForm
	case "condp":
		return c.condp
	case "match":
		return c.matchForm
	}
	return nil
}

// iterationForm returns the compiler of a looping or threading form
// (loop, recur, dotimes, doseq, for, ->, ->>, as->, some->, some->>), or
// nil.
func (c *compiler) iterationForm(name string) func(*Node) (code, error) {
	switch name {
	case "loop":
		return c.loopForm
	case "recur":
		return c.recurForm
	case "dotimes":
		return c.dotimes
	case "doseq", "for":
		return func(n *Node) (code, error) { return c.forForm(n, name == "doseq") }
	case "->", "->>":
		return func(n *Node) (code, error) { return c.thread(n, name == "->>") }
	case "as->":
		return c.asThread
	case "some->", "some->>":
		return func(n *Node) (code, error) { return c.someThread(n, name == "some->>") }
	}
	return nil
}

func (c *compiler) ifForm(n *Node) (code, error) {
	tail := c.inTail
	if err := c.arity(n, "if", 2, 3); err != nil {
		return nil, err
	}
	test, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	then, err := c.exprT(n.Items[2], tail)
	if err != nil {
		return nil, err
	}
	els := constant(Nil)
	if len(n.Items) == 4 {
		if els, err = c.exprT(n.Items[3], tail); err != nil {
			return nil, err
		}
	}
	return func(m *Machine, f *frame) (Value, error) {
		t, err := test(m, f)
		if err != nil {
			return Nil, err
		}
		if t.Truthy() {
			return then(m, f)
		}
		return els(m, f)
	}, nil
}

func (c *compiler) when(n *Node, negate bool) (code, error) {
	tail := c.inTail
	if err := c.arity(n, n.Head(), 1, -1); err != nil {
		return nil, err
	}
	test, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	body, err := c.bodyT(n.Items[2:], n.Pos, tail)
	if err != nil {
		return nil, err
	}
	return func(m *Machine, f *frame) (Value, error) {
		t, err := test(m, f)
		if err != nil {
			return Nil, err
		}
		if t.Truthy() != negate {
			return body(m, f)
		}
		return Nil, nil
	}, nil
}

func (c *compiler) cond(n *Node) (code, error) {
	tail := c.inTail
	clauses := n.Items[1:]
	if len(clauses)%2 != 0 {
		return nil, c.errf(n.Pos, "cond needs test/expression pairs; the last test has no expression")
	}
	codes := make([]code, len(clauses))
	for i, cl := range clauses {
		cd, err := c.exprT(cl, tail && i%2 == 1)
		if err != nil {
			return nil, err
		}
		codes[i] = cd
	}
	return func(m *Machine, f *frame) (Value, error) {
		for i := 0; i < len(codes); i += 2 {
			t, err := codes[i](m, f)
			if err != nil {
				return Nil, err
			}
			if t.Truthy() {
				return codes[i+1](m, f)
			}
		}
		return Nil, nil
	}, nil
}

func (c *compiler) andOr(n *Node, isAnd bool) (code, error) {
	tail := c.inTail
	codes := make([]code, len(n.Items)-1)
	for i, it := range n.Items[1:] {
		cd, err := c.exprT(it, tail && i == len(codes)-1)
		if err != nil {
			return nil, err
		}
		codes[i] = cd
	}
	if len(codes) == 0 {
		if isAnd {
			return constant(True), nil
		}
		return constant(Nil), nil // (or) is nil, as in Clojure
	}
	return func(m *Machine, f *frame) (Value, error) {
		var v Value
		for _, cd := range codes {
			var err error
			v, err = cd(m, f)
			if err != nil {
				return Nil, err
			}
			if v.Truthy() != isAnd {
				return v, nil
			}
		}
		return v, nil
	}, nil
}

// let binds in the current frame: bindings get fresh slots, so no
// environment is copied. Names go out of scope after the body.
func (c *compiler) let(n *Node) (code, error) {
	tail := c.inTail
	if len(n.Items) < 2 || n.Items[1].Kind != NodeVector {
		return nil, c.errf(n.Pos, "let needs a binding vector: (let [name value …] body…)")
	}
	bv := n.Items[1]
	if len(bv.Items)%2 != 0 {
		return nil, c.errf(bv.Pos, "let binding vector needs name/value pairs; %s has no value", describe(bv.Items[len(bv.Items)-1]))
	}
	mark := len(c.sc.names)
	defer func() { c.sc.names = c.sc.names[:mark] }()
	inits := make([]code, 0, len(bv.Items)/2)
	binds := make([]binder, 0, len(bv.Items)/2)
	for i := 0; i < len(bv.Items); i += 2 {
		init, err := c.expr(bv.Items[i+1]) // compiled before the name is visible
		if err != nil {
			return nil, err
		}
		b, err := c.pattern(bv.Items[i])
		if err != nil {
			return nil, err
		}
		inits = append(inits, init)
		binds = append(binds, b)
	}
	body, err := c.bodyT(n.Items[2:], n.Pos, tail)
	if err != nil {
		return nil, err
	}
	return func(m *Machine, f *frame) (Value, error) {
		for i, init := range inits {
			v, err := init(m, f)
			if err != nil {
				return Nil, err
			}
			if err := binds[i](m, f, v); err != nil {
				return Nil, err
			}
		}
		return body(m, f)
	}, nil
}

func (c *compiler) def(n *Node) (code, error) {
	if err := c.arity(n, "def", 2, 2); err != nil {
		return nil, err
	}
	if c.sc.kind != scopeTop {
		return nil, c.errf(n.Pos, "def is only allowed at the top level; use let inside functions")
	}
	name := n.Items[1]
	if name.Kind != NodeSymbol {
		return nil, c.errf(name.Pos, "def needs a symbol name, got %s", describe(name))
	}
	init, err := c.expr(n.Items[2])
	if err != nil {
		return nil, err
	}
	if err := c.bindable(name.Val.Str(), name.Pos); err != nil {
		return nil, err
	}
	slot := c.topSlot(name.Val.Str())
	return func(m *Machine, f *frame) (Value, error) {
		v, err := init(m, f)
		if err != nil {
			return Nil, err
		}
		f.slots[slot] = v
		return v, nil
	}, nil
}

// defn: (defn name "doc"? ^{:pre … :post …}? [params] body…)
func (c *compiler) defn(n *Node) (code, error) {
	if c.sc.kind != scopeTop {
		return nil, c.errf(n.Pos, "defn is only allowed at the top level; use let with fn inside functions")
	}
	if len(n.Items) < 3 || n.Items[1].Kind != NodeSymbol {
		return nil, c.errf(n.Pos, "defn needs a name and a parameter vector: (defn name [params] body…)")
	}
	name := n.Items[1].Val.Str()
	rest := n.Items[2:]
	if len(rest) > 0 && rest[0].Kind == NodeAtom && rest[0].Val.Kind() == KindString {
		rest = rest[1:] // docstring
	}
	if err := c.bindable(name, n.Items[1].Pos); err != nil {
		return nil, err
	}
	slot := c.topSlot(name) // visible in its own body, for recursion
	mk, err := c.lambda(name, rest, n.Pos, "")
	if err != nil {
		return nil, err
	}
	return func(m *Machine, f *frame) (Value, error) {
		v, err := mk(m, f)
		if err != nil {
			return Nil, err
		}
		f.slots[slot] = v
		return v, nil
	}, nil
}

// fnForm: (fn name? [params] body…)
func (c *compiler) fnForm(n *Node) (code, error) {
	rest := n.Items[1:]
	self := ""
	if len(rest) > 0 && rest[0].Kind == NodeSymbol {
		self = rest[0].Val.Str()
		rest = rest[1:]
	}
	return c.lambda(self, rest, n.Pos, self)
}

func (c *compiler) try(n *Node) (code, error) {
	var bodyForms []*Node
	var catchNode, finallyNode *Node
	for _, it := range n.Items[1:] {
		switch it.Head() {
		case "catch":
			if catchNode != nil {
				return nil, c.errf(it.Pos, "try has more than one catch")
			}
			catchNode = it
		case "finally":
			finallyNode = it
		default:
			if catchNode != nil || finallyNode != nil {
				return nil, c.errf(it.Pos, "try body forms must come before catch and finally")
			}
			bodyForms = append(bodyForms, it)
		}
	}
	body, err := c.body(bodyForms, n.Pos)
	if err != nil {
		return nil, err
	}
	var handler code
	slot := -1
	if catchNode != nil {
		items := catchNode.Items[1:]
		if len(items) >= 2 && items[0].Kind == NodeSymbol && items[1].Kind == NodeSymbol && isClassName(items[0].Val.Str()) {
			items = items[1:] // (catch Exception e …): the class is ignored
		}
		if len(items) == 0 || items[0].Kind != NodeSymbol {
			return nil, c.errf(catchNode.Pos, "catch needs a name for the error: (catch e handler…)")
		}
		mark := len(c.sc.names)
		slot = c.declare(items[0].Val.Str())
		handler, err = c.body(items[1:], catchNode.Pos)
		c.sc.names = c.sc.names[:mark]
		if err != nil {
			return nil, err
		}
	}
	var fin code
	if finallyNode != nil {
		if fin, err = c.body(finallyNode.Items[1:], finallyNode.Pos); err != nil {
			return nil, err
		}
	}
	return func(m *Machine, f *frame) (Value, error) {
		v, err := body(m, f)
		if err != nil && handler != nil {
			e := asError(err, n.Pos)
			if !e.Fatal() && m.ctx.Err() == nil {
				f.slots[slot] = e.ErrorMap()
				v, err = handler(m, f)
			}
		}
		if fin != nil {
			if _, ferr := fin(m, f); ferr != nil && err == nil {
				return Nil, ferr
			}
		}
		return v, err
	}, nil
}

// throw raises an error: a string becomes its message; a map may carry
// :type and :message; anything else is the error's :data.
func (c *compiler) throw(n *Node) (code, error) {
	if err := c.arity(n, "throw", 1, 1); err != nil {
		return nil, err
	}
	arg, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	pos := n.Pos
	return func(m *Machine, f *frame) (Value, error) {
		v, err := arg(m, f)
		if err != nil {
			return Nil, err
		}
		e := &Error{Type: ErrThrown, Pos: pos}
		switch {
		case v.Kind() == KindString:
			e.Msg = v.Str()
		case v.Kind() == KindMap:
			mp := v.AsMap()
			if t := mp.GetKey("type"); t.Kind() == KindKeyword {
				e.Type = t.Str()
			}
			e.Msg = mp.GetKey("message").Str()
			e.Data = v
		default:
			e.Data = v
		}
		if e.Msg == "" {
			e.Msg = "thrown: " + PrintLimit(v, 80)
		}
		if strings.HasPrefix(e.Type, "rtfs/") || strings.HasPrefix(e.Type, "contract/") {
			e.Type = ErrThrown // user code cannot forge runtime or contract errors
		}
		return Nil, e
	}, nil
}

// thread rewrites (-> x (f a) g) to (g (f x a)); ->> puts x last instead.
func (c *compiler) thread(n *Node, last bool) (code, error) {
	tail := c.inTail
	if err := c.arity(n, n.Head(), 1, -1); err != nil {
		return nil, err
	}
	acc := n.Items[1]
	for _, step := range n.Items[2:] {
		var items []*Node
		switch {
		case step.Kind == NodeList && len(step.Items) > 0:
			items = append(items, step.Items[0])
			if last {
				items = append(append(items, step.Items[1:]...), acc)
			} else {
				items = append(append(items, acc), step.Items[1:]...)
			}
		default: // a bare function, keyword or symbol
			items = []*Node{step, acc}
		}
		acc = &Node{Kind: NodeList, Pos: step.Pos, End: step.End, Items: items}
	}
	return c.exprT(acc, tail)
}

// isClassName reports whether s looks like a Clojure exception class
// (Exception, ExceptionInfo, java.lang.Throwable): capitalised last part.
func isClassName(s string) bool {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		s = s[i+1:]
	}
	return s != "" && s[0] >= 'A' && s[0] <= 'Z'
}
