package rtfs

import (
	"cmp"
	"slices"
)

// binder stores a value into slots, destructuring it if the pattern asks.
type binder func(m *Machine, f *frame, v Value) error

// lambda is a compiled fn: parameters bound into slots of a new frame.
type lambda struct {
	name     string
	file     string
	pos      Pos
	scope    *scope
	nfixed   int
	variadic bool
	params   []binder
	rest     binder
	selfSlot int
	body     code
	recurs   bool // a recur in the body rebinds the parameters
}

func (l *lambda) run(m *Machine, f *frame, fn *Fn, args []Value) (Value, error) {
	if l.selfSlot >= 0 {
		f.slots[l.selfSlot] = FnValue(fn)
	}
	for i, p := range l.params {
		if err := p(m, f, args[i]); err != nil {
			return Nil, err
		}
	}
	if l.variadic {
		rest := Nil
		if len(args) > l.nfixed {
			rest = Vector(slices.Clone(args[l.nfixed:]))
		}
		if err := l.rest(m, f, rest); err != nil {
			return Nil, err
		}
	}
	if !l.recurs {
		return l.body(m, f)
	}
	for {
		v, err := l.body(m, f)
		if err != errRecur {
			return v, err
		}
		if err := m.tick(); err != nil {
			return Nil, m.errAt(err, l.pos)
		}
		if l.scope.heap { // recur rebound a copy: closures keep the old frame
			f, m.recurFrame = m.recurFrame, nil
		}
	}
}

// lambda compiles [params] body… into code that makes a closure. Contracts
// in the parameter vector's metadata (^{:pre … :post …}) are compiled pure
// and evaluated when the closure is made.
func (c *compiler) lambda(name string, rest []*Node, pos Pos, self string) (code, error) {
	if len(rest) == 0 || rest[0].Kind != NodeVector {
		if len(rest) > 0 && rest[0].Kind == NodeList {
			return nil, c.errf(rest[0].Pos, "multi-arity functions are not supported; write one parameter vector")
		}
		return nil, c.errf(pos, "fn needs a parameter vector: (fn [x y] body…)")
	}
	params := rest[0]
	var preC, postC code
	if params.Meta != nil {
		var err error
		if preC, postC, err = c.contracts(params.Meta); err != nil {
			return nil, err
		}
	}
	l := &lambda{name: name, file: c.file, pos: pos, selfSlot: -1}
	outer, outerRecur := c.sc, c.recur
	l.scope = &scope{kind: scopeFn, parent: outer}
	c.sc = l.scope
	defer func() { c.sc, c.recur = outer, outerRecur }()
	if self != "" {
		if err := c.bindable(self, pos); err != nil {
			return nil, err
		}
		l.selfSlot = c.declare(self)
	}
	if err := c.lambdaParams(l, params.Items); err != nil {
		return nil, err
	}
	l.nfixed = len(l.params)
	if len(rest) > 2 && rest[1].Kind == NodeMap && (mapHasKeyword(rest[1], "pre") || mapHasKeyword(rest[1], "post")) {
		// Clojure's condition map would otherwise be evaluated and dropped.
		return nil, c.errf(rest[1].Pos, "a {:pre … :post …} body map is not a contract here; put ^{:pre (fn [args…] test)} on the parameter vector")
	}
	target := &recurTarget{scope: l.scope, binds: l.params, what: "fn " + cmp.Or(name, "fn")}
	if l.variadic { // (recur fixed… rest-seq), as in Clojure
		target.binds = append(slices.Clip(l.params), l.rest)
	}
	c.recur = target
	body, err := c.bodyT(rest[1:], pos, true)
	if err != nil {
		return nil, err
	}
	l.body, l.recurs = body, target.used
	c.sc = outer
	sc := l.scope
	if preC == nil && postC == nil && !sc.needsEnv {
		fn := FnValue(&Fn{name: name, lam: l})
		return constant(fn), nil
	}
	return makeClosure(name, l, preC, postC), nil
}

// lambdaParams compiles the parameter patterns, the one after & included.
func (c *compiler) lambdaParams(l *lambda, items []*Node) error {
	for i := 0; i < len(items); i++ {
		p := items[i]
		if p.IsSymbol("&") {
			if i != len(items)-2 {
				return c.errf(p.Pos, "& must be followed by exactly one parameter")
			}
			b, err := c.pattern(items[i+1])
			if err != nil {
				return err
			}
			l.variadic, l.rest = true, b
			break
		}
		b, err := c.pattern(p)
		if err != nil {
			return err
		}
		l.params = append(l.params, b)
	}
	return nil
}

// makeClosure is the code that makes a closure of l when it captures its
// environment or has contracts, evaluated as the closure is made.
func makeClosure(name string, l *lambda, preC, postC code) code {
	sc := l.scope
	return func(m *Machine, f *frame) (Value, error) {
		fn := &Fn{name: name, lam: l}
		if sc.needsEnv {
			fn.env = f
		}
		var err error
		if preC != nil {
			if fn.pre, err = preC(m, f); err != nil {
				return Nil, err
			}
		}
		if postC != nil {
			if fn.post, err = postC(m, f); err != nil {
				return Nil, err
			}
		}
		return FnValue(fn), nil
	}
}

// contracts compiles :pre and :post from a metadata map node, pure.
func (c *compiler) contracts(meta *Node) (pre, post code, err error) {
	c.pure++
	defer func() { c.pure-- }()
	for i := 0; i+1 < len(meta.Items); i += 2 {
		k := meta.Items[i]
		if k.Kind != NodeAtom || k.Val.Kind() != KindKeyword {
			continue
		}
		switch k.Val.Str() {
		case "pre":
			pre, err = c.expr(meta.Items[i+1])
		case "post":
			post, err = c.expr(meta.Items[i+1])
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return pre, post, nil
}

// pattern compiles a binding form: a symbol, [a b & r :as all] or
// {:keys [a b] :strs [c] :or {a 1} :as m, x :x}.
func (c *compiler) pattern(p *Node) (binder, error) {
	switch p.Kind {
	case NodeSymbol:
		name := p.Val.Str()
		if err := c.bindable(name, p.Pos); err != nil {
			return nil, err
		}
		slot := c.declare(name)
		return func(_ *Machine, f *frame, v Value) error { f.slots[slot] = v; return nil }, nil
	case NodeVector:
		return c.vectorPattern(p)
	case NodeMap:
		return c.mapPattern(p)
	}
	return nil, c.errf(p.Pos, "cannot bind to %s; use a symbol, a vector or a map pattern", describe(p))
}

func (c *compiler) vectorPattern(p *Node) (binder, error) {
	var elems []binder
	var rest, as binder
	items := p.Items
	for i := 0; i < len(items); i++ {
		it := items[i]
		switch {
		case it.IsSymbol("&"):
			if i+1 >= len(items) {
				return nil, c.errf(it.Pos, "& needs a name after it")
			}
			b, err := c.pattern(items[i+1])
			if err != nil {
				return nil, err
			}
			rest = b
			i++
		case it.Kind == NodeAtom && it.Val.Kind() == KindKeyword && it.Val.Str() == "as":
			if i+1 >= len(items) || items[i+1].Kind != NodeSymbol {
				return nil, c.errf(it.Pos, ":as needs a symbol after it")
			}
			b, err := c.pattern(items[i+1])
			if err != nil {
				return nil, err
			}
			as = b
			i++
		default:
			if rest != nil {
				return nil, c.errf(it.Pos, "only :as may follow the & parameter")
			}
			b, err := c.pattern(it)
			if err != nil {
				return nil, err
			}
			elems = append(elems, b)
		}
	}
	pos := p.Pos
	return func(m *Machine, f *frame, v Value) error {
		if !v.IsNil() && !v.IsSeq() {
			return errorf(ErrType, pos, "cannot destructure a %s with a vector pattern", v.Kind())
		}
		items := v.Items()
		for i, b := range elems {
			x := Nil
			if i < len(items) {
				x = items[i]
			}
			if err := b(m, f, x); err != nil {
				return err
			}
		}
		if rest != nil {
			r := Nil
			if len(items) > len(elems) {
				r = Vector(items[len(elems):]) // items are immutable: sharing is safe
			}
			if err := rest(m, f, r); err != nil {
				return err
			}
		}
		if as != nil {
			return as(m, f, v)
		}
		return nil
	}, nil
}

type keyBind struct {
	key  Value
	bind binder
	def  code // from :or, or nil
}

// keyGroup reports whether k is one of the map pattern's name groups:
// :keys, :strs, :syms, or a qualified :ns/keys or :ns/syms whose
// namespace applies to every unqualified name in it (Clojure's rules).
func keyGroup(k *Node) (group, ns string, ok bool) {
	if k.Kind != NodeAtom || k.Val.Kind() != KindKeyword {
		return "", "", false
	}
	ns, name, _ := splitName(k.Val.Str())
	switch name {
	case "keys", "syms":
		return name, ns, true
	case "strs":
		return name, "", ns == ""
	}
	return "", "", false
}

// groupKey is the key a name in a :keys/:strs/:syms group reads, and the
// local it binds: {:keys [user/name]} reads :user/name into name.
func groupKey(group, ns string, n *Node) (key Value, local string, ok bool) {
	if n.Kind != NodeSymbol && !(n.Kind == NodeAtom && n.Val.Kind() == KindKeyword && group == "keys") {
		return Nil, "", false
	}
	full := n.Val.Str()
	_, local, hasNS := splitName(full)
	if !hasNS && ns != "" {
		full = ns + "/" + local
	}
	switch group {
	case "keys":
		key = Keyword(full)
	case "syms":
		key = Symbol(full)
	default:
		key = String(full)
	}
	return key, local, true
}

// mapPattern compiles {:keys [a b] :or {a 1} :as m, x :x}.
func (c *compiler) mapPattern(p *Node) (binder, error) {
	defaults, err := c.mapDefaults(p)
	if err != nil {
		return nil, err
	}
	mp := &mapPat{defaults: defaults}
	for i := 0; i+1 < len(p.Items); i += 2 {
		if err := c.mapEntry(mp, p.Items[i], p.Items[i+1]); err != nil {
			return nil, err
		}
	}
	return mp.compiled(p.Pos), nil
}

// mapPat is a map pattern being compiled: its :or defaults by local name,
// the keys it binds and its :as pattern.
type mapPat struct {
	defaults map[string]*Node
	binds    []keyBind
	as       binder
}

// mapDefaults collects a map pattern's :or defaults first, so they attach
// to their local names wherever :or stands.
func (c *compiler) mapDefaults(p *Node) (map[string]*Node, error) {
	defaults := map[string]*Node{}
	for i := 0; i+1 < len(p.Items); i += 2 {
		k := p.Items[i]
		if k.Kind == NodeAtom && k.Val.Kind() == KindKeyword && k.Val.Str() == "or" {
			d := p.Items[i+1]
			if d.Kind != NodeMap {
				return nil, c.errf(d.Pos, ":or needs a map of name to default value")
			}
			for j := 0; j+1 < len(d.Items); j += 2 {
				if d.Items[j].Kind != NodeSymbol {
					return nil, c.errf(d.Items[j].Pos, ":or keys must be the local names the pattern binds, such as {name \"default\"}")
				}
				defaults[d.Items[j].Val.Str()] = d.Items[j+1]
			}
		}
	}
	return defaults, nil
}

// mapEntry compiles one key and value of a map pattern: a :keys-style
// group, :as, :or (already collected) or {pattern :key}.
func (c *compiler) mapEntry(mp *mapPat, k, v *Node) error {
	if group, ns, ok := keyGroup(k); ok {
		if v.Kind != NodeVector {
			return c.errf(v.Pos, "%s needs a vector of names", Print(k.Val))
		}
		for _, sym := range v.Items {
			key, local, ok := groupKey(group, ns, sym)
			if !ok {
				return c.errf(sym.Pos, "names in %s must be symbols, got %s", Print(k.Val), describe(sym))
			}
			if err := c.bindLocal(mp, local, sym.Pos, key); err != nil {
				return err
			}
		}
		return nil
	}
	if k.Kind == NodeAtom && k.Val.Kind() == KindKeyword {
		switch k.Val.Str() {
		case "as":
			b, err := c.pattern(v)
			if err != nil {
				return err
			}
			mp.as = b
			return nil
		case "or":
			return nil
		}
	}
	// {name :key}: k is the pattern, v the literal key.
	if !v.IsLiteral() {
		return c.errf(v.Pos, "map pattern keys must be literals")
	}
	if k.Kind == NodeSymbol {
		return c.bindLocal(mp, k.Val.Str(), k.Pos, constValue(v))
	}
	b, err := c.pattern(k)
	if err != nil {
		return err
	}
	mp.binds = append(mp.binds, keyBind{constValue(v), b, nil})
	return nil
}

// bindLocal binds the local name at pos to the value under key, with its
// :or default.
func (c *compiler) bindLocal(mp *mapPat, local string, pos Pos, key Value) error {
	var def code
	if dn, ok := mp.defaults[local]; ok {
		var err error
		if def, err = c.expr(dn); err != nil {
			return err
		}
	}
	b, err := c.pattern(&Node{Kind: NodeSymbol, Pos: pos, Val: Symbol(local)})
	if err != nil {
		return err
	}
	mp.binds = append(mp.binds, keyBind{key, b, def})
	return nil
}

// compiled is the pattern's binder: it binds each key (or its default),
// then :as.
func (pat *mapPat) compiled(pos Pos) binder {
	binds, as := pat.binds, pat.as
	return func(m *Machine, f *frame, v Value) error {
		if !v.IsNil() && v.Kind() != KindMap {
			return errorf(ErrType, pos, "cannot destructure a %s with a map pattern", v.Kind())
		}
		mp := v.AsMap()
		for _, kb := range binds {
			x, ok := mp.Get(kb.key)
			if !ok && kb.def != nil {
				var err error
				if x, err = kb.def(m, f); err != nil {
					return err
				}
			}
			if err := kb.bind(m, f, x); err != nil {
				return err
			}
		}
		if as != nil {
			return as(m, f, v)
		}
		return nil
	}
}

// bindable refuses names that would shadow special forms: a plan could
// otherwise redefine step or call and slip past governance, which reads
// the forms as written.
func (c *compiler) bindable(name string, pos Pos) error {
	if name == "&" || specialForms[name] {
		return c.errf(pos, "cannot bind %s: it is a special form; choose another name", name)
	}
	return nil
}

// mapHasKeyword reports whether map literal n has the key :name.
func mapHasKeyword(n *Node, name string) bool {
	for i := 0; i < len(n.Items); i += 2 {
		if k := n.Items[i]; k.Kind == NodeAtom && k.Val.Kind() == KindKeyword && k.Val.Str() == name {
			return true
		}
	}
	return false
}
