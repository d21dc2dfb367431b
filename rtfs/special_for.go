package rtfs

// for and doseq: (for [x xs :when t :let [y e] :while w z zs] body) and
// the same bindings for doseq. for is eager and returns a vector; doseq
// runs body for its effects and returns nil.

// compLevel is one name-collection binding with the modifiers after it.
type compLevel struct {
	coll code
	bind binder
	mods []compMod
}

// compMod is a :when, :while or :let modifier.
type compMod struct {
	kind  string // "when", "while", "let"
	test  code
	inits []code
	binds []binder
}

func (c *compiler) comprehension(n *Node, form string) ([]compLevel, error) {
	pairs, err := c.bindingVector(n, form, "("+form+" [x xs :when (odd? x)] body…)")
	if err != nil {
		return nil, err
	}
	var levels []compLevel
	for i := 0; i < len(pairs); i += 2 {
		k, v := pairs[i], pairs[i+1]
		if k.Kind == NodeAtom && k.Val.Kind() == KindKeyword {
			if len(levels) == 0 {
				return nil, c.errf(k.Pos, "%s must start with a binding, not %s", form, describe(k))
			}
			lv := &levels[len(levels)-1]
			switch k.Val.Str() {
			case "when", "while":
				test, err := c.expr(v)
				if err != nil {
					return nil, err
				}
				lv.mods = append(lv.mods, compMod{kind: k.Val.Str(), test: test})
			case "let":
				if v.Kind != NodeVector || len(v.Items)%2 != 0 {
					return nil, c.errf(v.Pos, "%s :let needs a binding vector of name/value pairs", form)
				}
				mod := compMod{kind: "let"}
				for j := 0; j < len(v.Items); j += 2 {
					init, err := c.expr(v.Items[j+1])
					if err != nil {
						return nil, err
					}
					b, err := c.pattern(v.Items[j])
					if err != nil {
						return nil, err
					}
					mod.inits, mod.binds = append(mod.inits, init), append(mod.binds, b)
				}
				lv.mods = append(lv.mods, mod)
			default:
				return nil, c.errf(k.Pos, "unknown %s modifier %s; use :when, :while or :let", form, describe(k))
			}
			continue
		}
		coll, err := c.expr(v)
		if err != nil {
			return nil, err
		}
		b, err := c.pattern(k)
		if err != nil {
			return nil, err
		}
		levels = append(levels, compLevel{coll: coll, bind: b})
	}
	if len(levels) == 0 {
		return nil, c.errf(n.Items[1].Pos, "%s needs at least one binding", form)
	}
	return levels, nil
}

// runLevels iterates levels from i on, calling emit for every
// combination that passes the modifiers. stop reports a :while that
// ended the level it follows.
func runLevels(m *Machine, f *frame, levels []compLevel, i int, pos Pos, emit func() error) error {
	lv := &levels[i]
	collV, err := lv.coll(m, f)
	if err != nil {
		return err
	}
	xs, err := seqItems(m, "for", collV)
	if err != nil {
		return m.errAt(err, pos)
	}
next:
	for _, x := range xs {
		if err := m.tick(); err != nil {
			return m.errAt(err, pos)
		}
		if err := lv.bind(m, f, x); err != nil {
			return err
		}
		for _, mod := range lv.mods {
			switch mod.kind {
			case "let":
				for j, init := range mod.inits {
					v, err := init(m, f)
					if err != nil {
						return err
					}
					if err := mod.binds[j](m, f, v); err != nil {
						return err
					}
				}
			case "when":
				t, err := mod.test(m, f)
				if err != nil {
					return err
				}
				if !t.Truthy() {
					continue next
				}
			case "while":
				t, err := mod.test(m, f)
				if err != nil {
					return err
				}
				if !t.Truthy() {
					return nil
				}
			}
		}
		if i+1 < len(levels) {
			if err := runLevels(m, f, levels, i+1, pos, emit); err != nil {
				return err
			}
			continue
		}
		if err := emit(); err != nil {
			return err
		}
	}
	return nil
}

// forForm: (for [bindings…] body): a vector of body's values.
func (c *compiler) forForm(n *Node, isDoseq bool) (code, error) {
	form := "for"
	if isDoseq {
		form = "doseq"
	}
	sc, done := c.blockScope()
	defer done()
	c.recur = nil
	levels, err := c.comprehension(n, form)
	if err != nil {
		return nil, err
	}
	var body code
	if isDoseq {
		body, err = c.body(n.Items[2:], n.Pos)
	} else {
		if len(n.Items) != 3 {
			return nil, c.errf(n.Pos, "for needs one body form: (for [x xs] (f x)); wrap several in (do …)")
		}
		body, err = c.expr(n.Items[2])
	}
	if err != nil {
		return nil, err
	}
	pos := n.Pos
	pass := c.passWrapper(form, n.Items[1].Items[0], n.Items[2:], pos, body) // comprehension checked a binding exists
	return func(m *Machine, f *frame) (Value, error) {
		fr, mark, onStack := m.enter(sc, f)
		var out []Value
		i := 0
		err := runLevels(m, fr, levels, 0, pos, func() error {
			i++
			v, err := pass(m, passFrame(sc, fr), i)
			if err != nil {
				return err
			}
			if !isDoseq {
				if err := produce(m, "for", 1); err != nil {
					return m.errAt(err, pos)
				}
				out = append(out, v)
			}
			return nil
		})
		if onStack {
			m.popFrame(mark)
		}
		if err != nil || isDoseq {
			return Nil, err
		}
		return Vector(out), nil
	}, nil
}
