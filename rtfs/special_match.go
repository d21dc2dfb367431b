package rtfs

// match is a subset of clojure.core.match:
//
//	(match expr
//	  pattern result
//	  …
//	  :else default)
//
// Patterns: literals (numbers, strings, keywords, booleans, nil) match
// equal values; _ matches anything; a symbol matches anything and binds
// it; [p…] matches a list or vector of exactly that length, and [p… & r]
// one at least that long, binding the rest to r; {:k p …} matches a map
// holding every key whose value matches p; (p :guard f) matches when p
// does and (f value) is true; (p1 | p2 …) matches when any alternative
// does (alternatives bind nothing). With [x y] as the expression, a row
// [p q] matches x against p and y against q, as core.match's rows do.
// No clause matching is an error, as in core.match.

// matcher tests v and binds the names of its pattern on success.
type matcher func(m *Machine, f *frame, v Value) (bool, error)

func (c *compiler) matchForm(n *Node) (code, error) {
	tail := c.inTail
	if len(n.Items) < 2 {
		return nil, c.errf(n.Pos, "match needs an expression and clauses: (match x 1 :one :else :other)")
	}
	expr, err := c.expr(n.Items[1])
	if err != nil {
		return nil, err
	}
	clauses := n.Items[2:]
	if len(clauses)%2 != 0 {
		return nil, c.errf(clauses[len(clauses)-1].Pos, "match needs pattern/result pairs; this pattern has no result")
	}
	type clause struct {
		test   matcher
		result code
	}
	out := make([]clause, 0, len(clauses)/2)
	for i := 0; i < len(clauses); i += 2 {
		p := clauses[i]
		mark := len(c.sc.names)
		var test matcher
		if p.Kind == NodeAtom && p.Val.Kind() == KindKeyword && p.Val.Str() == "else" {
			test = func(*Machine, *frame, Value) (bool, error) { return true, nil }
		} else if test, err = c.matchPattern(p); err != nil {
			return nil, err
		}
		r, err := c.exprT(clauses[i+1], tail)
		c.sc.names = c.sc.names[:mark]
		if err != nil {
			return nil, err
		}
		out = append(out, clause{test, r})
	}
	pos := n.Pos
	return func(m *Machine, f *frame) (Value, error) {
		v, err := expr(m, f)
		if err != nil {
			return Nil, err
		}
		for _, cl := range out {
			ok, err := cl.test(m, f, v)
			if err != nil {
				return Nil, m.errAt(err, pos)
			}
			if ok {
				return cl.result(m, f)
			}
		}
		return Nil, errorf(ErrValue, pos, "match found no clause for %s; add :else as the last pattern", PrintLimit(v, 60))
	}, nil
}

func (c *compiler) matchPattern(p *Node) (matcher, error) {
	switch p.Kind {
	case NodeAtom:
		want := p.Val
		return func(m *Machine, _ *frame, v Value) (bool, error) { return m.equal(v, want) }, nil
	case NodeQuote:
		want := p.Items[0].Value()
		return func(m *Machine, _ *frame, v Value) (bool, error) { return m.equal(v, want) }, nil
	case NodeSymbol:
		if p.Val.Str() == "_" {
			return func(*Machine, *frame, Value) (bool, error) { return true, nil }, nil
		}
		b, err := c.pattern(p)
		if err != nil {
			return nil, err
		}
		return func(m *Machine, f *frame, v Value) (bool, error) { return true, b(m, f, v) }, nil
	case NodeVector:
		return c.matchVector(p)
	case NodeMap:
		return c.matchMap(p)
	case NodeList:
		return c.matchList(p)
	}
	return nil, c.errf(p.Pos, "match cannot use %s as a pattern", describe(p))
}

func (c *compiler) matchVector(p *Node) (matcher, error) {
	var elems []matcher
	var rest matcher
	for i := 0; i < len(p.Items); i++ {
		it := p.Items[i]
		if it.IsSymbol("&") {
			if i != len(p.Items)-2 {
				return nil, c.errf(it.Pos, "& in a match pattern needs exactly one pattern after it")
			}
			r, err := c.matchPattern(p.Items[i+1])
			if err != nil {
				return nil, err
			}
			rest = r
			break
		}
		e, err := c.matchPattern(it)
		if err != nil {
			return nil, err
		}
		elems = append(elems, e)
	}
	return func(m *Machine, f *frame, v Value) (bool, error) {
		if !v.IsSeq() && !v.IsNil() {
			return false, nil
		}
		items := v.Items()
		if len(items) < len(elems) || (rest == nil && len(items) != len(elems)) {
			return false, nil
		}
		for i, e := range elems {
			if ok, err := e(m, f, items[i]); !ok || err != nil {
				return false, err
			}
		}
		if rest != nil {
			return rest(m, f, Vector(items[len(elems):]))
		}
		return true, nil
	}, nil
}

func (c *compiler) matchMap(p *Node) (matcher, error) {
	type entry struct {
		key Value
		val matcher
	}
	var entries []entry
	for i := 0; i+1 < len(p.Items); i += 2 {
		k := p.Items[i]
		if !k.IsLiteral() {
			return nil, c.errf(k.Pos, "match map pattern keys must be literals, got %s", describe(k))
		}
		vm, err := c.matchPattern(p.Items[i+1])
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{constValue(k), vm})
	}
	return func(m *Machine, f *frame, v Value) (bool, error) {
		mp := v.AsMap()
		if mp == nil {
			return false, nil
		}
		for _, e := range entries {
			x, ok := mp.Get(e.key)
			if !ok {
				return false, nil
			}
			if ok, err := e.val(m, f, x); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	}, nil
}

// matchList handles (p :guard f) and (p1 | p2 …).
func (c *compiler) matchList(p *Node) (matcher, error) {
	items := p.Items
	if len(items) == 3 && items[1].Kind == NodeAtom && items[1].Val.Kind() == KindKeyword && items[1].Val.Str() == "guard" {
		inner, err := c.matchPattern(items[0])
		if err != nil {
			return nil, err
		}
		guard, err := c.expr(items[2])
		if err != nil {
			return nil, err
		}
		pos := p.Pos
		return func(m *Machine, f *frame, v Value) (bool, error) {
			if ok, err := inner(m, f, v); !ok || err != nil {
				return false, err
			}
			g, err := guard(m, f)
			if err != nil {
				return false, err
			}
			t, err := m.apply1(g, v, pos)
			return t.Truthy(), err
		}, nil
	}
	if len(items) >= 3 && len(items)%2 == 1 {
		var alts []matcher
		for i, it := range items {
			if i%2 == 1 {
				if !it.IsSymbol("|") {
					break
				}
				continue
			}
			if it.Kind == NodeSymbol && it.Val.Str() != "_" {
				return nil, c.errf(it.Pos, "alternatives in (p1 | p2) cannot bind names")
			}
			a, err := c.matchPattern(it)
			if err != nil {
				return nil, err
			}
			alts = append(alts, a)
		}
		if len(alts) == (len(items)+1)/2 {
			return func(m *Machine, f *frame, v Value) (bool, error) {
				for _, a := range alts {
					if ok, err := a(m, f, v); ok || err != nil {
						return ok, err
					}
				}
				return false, nil
			}, nil
		}
	}
	return nil, c.errf(p.Pos, "match list patterns are (p :guard f) or (p1 | p2 …), got %s", describe(p))
}
