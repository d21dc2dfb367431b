package rtfs

import "fmt"

// This file holds the binding and branching forms models write after let
// and cond: if-let, when-let, if-some, when-some, letfn, declare, case,
// condp, as->, some-> and some->>.

// condBind: (if-let [pattern expr] then else?), (when-let [pattern expr]
// body…); the -some variants test for non-nil instead of truth. The
// pattern's names are visible only in the then branch.
func (c *compiler) condBind(n *Node, form string, isWhen, some bool) (code, error) {
	tail := c.inTail
	pairs, err := c.bindingVector(n, form, "("+form+" [x (f)] …)")
	if err != nil {
		return nil, err
	}
	if len(pairs) != 2 {
		return nil, c.errf(n.Items[1].Pos, "%s takes exactly one name and value: (%s [x (f)] …)", form, form)
	}
	if !isWhen && (len(n.Items) < 3 || len(n.Items) > 4) {
		return nil, c.errf(n.Pos, "%s needs a then form and at most one else form", form)
	}
	init, err := c.expr(pairs[1])
	if err != nil {
		return nil, err
	}
	mark := len(c.sc.names)
	bind, err := c.pattern(pairs[0])
	if err != nil {
		return nil, err
	}
	var then code
	if isWhen {
		then, err = c.bodyT(n.Items[2:], n.Pos, tail)
	} else {
		then, err = c.exprT(n.Items[2], tail)
	}
	c.sc.names = c.sc.names[:mark]
	if err != nil {
		return nil, err
	}
	els := constant(Nil)
	if !isWhen && len(n.Items) == 4 {
		if els, err = c.exprT(n.Items[3], tail); err != nil {
			return nil, err
		}
	}
	return func(m *Machine, f *frame) (Value, error) {
		v, err := init(m, f)
		if err != nil {
			return Nil, err
		}
		if (some && v.IsNil()) || (!some && !v.Truthy()) {
			return els(m, f)
		}
		if err := bind(m, f, v); err != nil {
			return Nil, err
		}
		return then(m, f)
	}, nil
}

// letfn: (letfn [(f [x] body…) …] body…): the functions see each other.
func (c *compiler) letfn(n *Node) (code, error) {
	tail := c.inTail
	if len(n.Items) < 2 || n.Items[1].Kind != NodeVector {
		return nil, c.errf(n.Pos, "letfn needs a vector of functions: (letfn [(f [x] …) (g [y] …)] body…)")
	}
	specs := n.Items[1].Items
	mark := len(c.sc.names)
	defer func() { c.sc.names = c.sc.names[:mark] }()
	slots := make([]int, len(specs))
	for i, s := range specs {
		if s.Kind != NodeList || len(s.Items) < 2 || s.Items[0].Kind != NodeSymbol {
			return nil, c.errf(s.Pos, "letfn functions are written (name [params] body…), got %s", describe(s))
		}
		name := s.Items[0].Val.Str()
		if err := c.bindable(name, s.Items[0].Pos); err != nil {
			return nil, err
		}
		slots[i] = c.declare(name)
	}
	makers := make([]code, len(specs))
	for i, s := range specs {
		mk, err := c.lambda(s.Items[0].Val.Str(), s.Items[1:], s.Pos, "")
		if err != nil {
			return nil, err
		}
		makers[i] = mk
	}
	body, err := c.bodyT(n.Items[2:], n.Pos, tail)
	if err != nil {
		return nil, err
	}
	return func(m *Machine, f *frame) (Value, error) {
		for i, mk := range makers {
			v, err := mk(m, f)
			if err != nil {
				return Nil, err
			}
			f.slots[slots[i]] = v
		}
		return body(m, f)
	}, nil
}

// declare: (declare a b) at the top level makes names that a later def or
// defn defines, so functions can call each other before both exist.
func (c *compiler) declareForm(n *Node) (code, error) {
	if c.sc.kind != scopeTop {
		return nil, c.errf(n.Pos, "declare is only allowed at the top level")
	}
	for _, it := range n.Items[1:] {
		if it.Kind != NodeSymbol {
			return nil, c.errf(it.Pos, "declare needs symbols, got %s", describe(it))
		}
		if err := c.bindable(it.Val.Str(), it.Pos); err != nil {
			return nil, err
		}
		c.topSlot(it.Val.Str())
	}
	return constant(Nil), nil
}

// topSlot is the top-level slot of name: the one declare or an earlier
// def gave it, or a new one.
func (c *compiler) topSlot(name string) int {
	if c.sc.kind == scopeTop {
		for _, l := range c.sc.names {
			if l.name == name {
				return l.slot
			}
		}
	}
	return c.declare(name)
}

// caseForm: (case expr test result … default?). Tests are literals, not
// evaluated; a list of literals matches any of them. No match and no
// default is an error, as in Clojure.
func (c *compiler) caseForm(n *Node) (code, error) {
	tail := c.inTail
	if len(n.Items) < 2 {
		return nil, c.errf(n.Pos, "case needs an expression: (case x 1 :one 2 :two :default)")
	}
	expr, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	clauses := n.Items[2:]
	var def code
	if len(clauses)%2 == 1 {
		if def, err = c.exprT(clauses[len(clauses)-1], tail); err != nil {
			return nil, err
		}
		clauses = clauses[:len(clauses)-1]
	}
	tests := NewMapBuilder(len(clauses) / 2)
	results := make([]code, 0, len(clauses)/2)
	seen := map[string]Pos{}
	for i := 0; i < len(clauses); i += 2 {
		t := clauses[i]
		alts := []*Node{t}
		if t.Kind == NodeList {
			alts = t.Items
		}
		for _, a := range alts {
			if !a.IsLiteral() && a.Kind != NodeSymbol && !(a.Kind == NodeList && literalList(a)) {
				return nil, c.errf(a.Pos, "case tests must be literals, got %s", describe(a))
			}
			text := PrintNode(a)
			if first, dup := seen[text]; dup {
				return nil, c.errf(a.Pos, "duplicate case test %s (first at %s)", truncate(text, 40), first)
			}
			seen[text] = a.Pos
			tests.Set(constValue(a), Int(int64(len(results))))
		}
		r, err := c.exprT(clauses[i+1], tail)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	table := tests.Map()
	pos := n.Pos
	return func(m *Machine, f *frame) (Value, error) {
		v, err := expr(m, f)
		if err != nil {
			return Nil, err
		}
		if err := m.probe(MapValue(table), v); err != nil {
			return Nil, m.errAt(err, pos)
		}
		if i, ok := table.Get(v); ok {
			return results[i.AsInt()](m, f)
		}
		if def != nil {
			return def(m, f)
		}
		return Nil, errorf(ErrValue, pos, "case has no clause for %s and no default; add a default as the last form", PrintLimit(v, 60))
	}, nil
}

func literalList(n *Node) bool {
	for _, it := range n.Items {
		if !it.IsLiteral() && it.Kind != NodeSymbol {
			return false
		}
	}
	return true
}

// condp: (condp pred expr test result … default?): the first clause for
// which (pred test expr) is true; test :>> f passes that value to f.
func (c *compiler) condp(n *Node) (code, error) {
	tail := c.inTail
	if len(n.Items) < 3 {
		return nil, c.errf(n.Pos, "condp needs a predicate and an expression: (condp = x 1 :one :default)")
	}
	pred, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	expr, err := c.expr(n.Items[2])
	if err != nil {
		return nil, err
	}
	clauses, def, err := c.condpClauses(n.Items[3:], tail)
	if err != nil {
		return nil, err
	}
	return condpCode(pred, expr, clauses, def, n.Pos), nil
}

// condpClause is one test and result of a condp; thread is :>>, which
// passes the predicate's value to the result.
type condpClause struct {
	test, result code
	thread       bool
}

// condpClauses compiles condp's test/result pairs and its default.
func (c *compiler) condpClauses(items []*Node, tail bool) (clauses []condpClause, def code, err error) {
	for len(items) > 0 {
		if len(items) == 1 {
			if def, err = c.exprT(items[0], tail); err != nil {
				return nil, nil, err
			}
			break
		}
		t, err := c.expr(items[0])
		if err != nil {
			return nil, nil, err
		}
		if items[1].Kind == NodeAtom && items[1].Val.Kind() == KindKeyword && items[1].Val.Str() == ">>" {
			if len(items) < 3 {
				return nil, nil, c.errf(items[1].Pos, "condp :>> needs a function after it")
			}
			r, err := c.expr(items[2])
			if err != nil {
				return nil, nil, err
			}
			clauses = append(clauses, condpClause{t, r, true})
			items = items[3:]
			continue
		}
		r, err := c.exprT(items[1], tail)
		if err != nil {
			return nil, nil, err
		}
		clauses = append(clauses, condpClause{t, r, false})
		items = items[2:]
	}
	return clauses, def, nil
}

// condpCode runs a compiled condp: the first clause whose test the
// predicate accepts, else the default.
func condpCode(pred, expr code, clauses []condpClause, def code, pos Pos) code {
	return func(m *Machine, f *frame) (Value, error) {
		p, err := pred(m, f)
		if err != nil {
			return Nil, err
		}
		x, err := expr(m, f)
		if err != nil {
			return Nil, err
		}
		for _, cl := range clauses {
			t, err := cl.test(m, f)
			if err != nil {
				return Nil, err
			}
			ok, err := m.apply2(p, t, x, pos)
			if err != nil {
				return Nil, err
			}
			if !ok.Truthy() {
				continue
			}
			if !cl.thread {
				return cl.result(m, f)
			}
			g, err := cl.result(m, f)
			if err != nil {
				return Nil, err
			}
			return m.apply1(g, ok, pos)
		}
		if def != nil {
			return def(m, f)
		}
		return Nil, errorf(ErrValue, pos, "condp has no clause for %s and no default; add a default as the last form", PrintLimit(x, 60))
	}
}

func (m *Machine) apply1(fn, a Value, pos Pos) (Value, error) {
	mark := m.stack.mark()
	buf := m.stack.alloc(1)
	buf[0] = a
	v, err := m.apply(fn, buf, pos)
	m.stack.release(mark)
	return v, err
}

func (m *Machine) apply2(fn, a, b Value, pos Pos) (Value, error) {
	mark := m.stack.mark()
	buf := m.stack.alloc(2)
	buf[0], buf[1] = a, b
	v, err := m.apply(fn, buf, pos)
	m.stack.release(mark)
	return v, err
}

// asThread: (as-> expr name form…) is (let [name expr name form …] name).
func (c *compiler) asThread(n *Node) (code, error) {
	tail := c.inTail
	if len(n.Items) < 3 || n.Items[2].Kind != NodeSymbol {
		return nil, c.errf(n.Pos, "as-> needs an expression and a name: (as-> x $ (f $) (g $ 1))")
	}
	name := n.Items[2]
	bv := &Node{Kind: NodeVector, Pos: n.Pos, Items: []*Node{name, n.Items[1]}}
	for _, f := range n.Items[3:] {
		bv.Items = append(bv.Items, name, f)
	}
	let := &Node{Kind: NodeList, Pos: n.Pos, End: n.End, Items: []*Node{{Kind: NodeSymbol, Pos: n.Pos, Val: Symbol("let")}, bv, name}}
	return c.exprT(let, tail)
}

// someThread: (some-> x f g) threads like -> but stops at the first nil
// (some->> like ->>).
func (c *compiler) someThread(n *Node, last bool) (code, error) {
	if err := c.arity(n, n.Head(), 1, -1); err != nil {
		return nil, err
	}
	init, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	mark := len(c.sc.names)
	defer func() { c.sc.names = c.sc.names[:mark] }()
	hidden := fmt.Sprintf(" some-%d", c.depth) // unreadable, so no program can name it
	slot := c.declare(hidden)
	steps := make([]code, 0, len(n.Items)-2)
	for _, step := range n.Items[2:] {
		acc := &Node{Kind: NodeSymbol, Pos: step.Pos, Val: Symbol(hidden)}
		var items []*Node
		switch {
		case step.Kind == NodeList && len(step.Items) > 0:
			items = append(items, step.Items[0])
			if last {
				items = append(append(items, step.Items[1:]...), acc)
			} else {
				items = append(append(items, acc), step.Items[1:]...)
			}
		default:
			items = []*Node{step, acc}
		}
		cd, err := c.expr(&Node{Kind: NodeList, Pos: step.Pos, End: step.End, Items: items})
		if err != nil {
			return nil, err
		}
		steps = append(steps, cd)
	}
	return func(m *Machine, f *frame) (Value, error) {
		v, err := init(m, f)
		for _, st := range steps {
			if err != nil || v.IsNil() {
				return v, err
			}
			f.slots[slot] = v
			v, err = st(m, f)
		}
		return v, err
	}, nil
}
