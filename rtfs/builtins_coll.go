package rtfs

import (
	"fmt"
	"unicode/utf8"
)

// This file holds the collection builtins (lookup, update, construction,
// type predicates) and the helpers every sequence builtin shares: how a
// value is seen as a sequence, and how building a collection is charged.

// maxElements bounds any collection or string a builtin builds, so that a
// generous fuel limit still cannot ask the runtime for an allocation it
// refuses or that would exhaust memory.
const maxElements = 1 << 28

// produce charges fuel for n elements about to be built by builtin name,
// before they are allocated.
func produce(m *Machine, name string, n int) error {
	if err := m.Charge(int64(min(n, 1<<40))); err != nil {
		return err
	}
	if n > maxElements {
		return &Error{Type: ErrValue, Msg: fmt.Sprintf("%s would build %d elements, more than the limit of %d", name, n, maxElements)}
	}
	return nil
}

// chargeCopy charges for copying n existing elements into a new vector:
// a memory copy is much cheaper than evaluation, so it costs n/8.
func chargeCopy(m *Machine, n int) error { return m.Charge(int64(n / 8)) }

// chargeMapCopy charges for copying a map of n entries, whose hash index
// is rebuilt on the next look-up.
func chargeMapCopy(m *Machine, n int) error { return m.Charge(int64(n / 2)) }

// chargeBytes charges for scanning or building n bytes of text.
func chargeBytes(m *Machine, n int) error { return m.Charge(int64(n / 16)) }

// seqItems returns coll's elements as sequence functions see them: nil has
// none, lists and vectors their items (shared, never to be modified), maps
// their entries as [k v] vectors in canonical key order, strings their
// characters as one-character strings.
func seqItems(m *Machine, name string, coll Value) ([]Value, error) {
	switch coll.k {
	case KindNil:
		return nil, nil
	case KindList, KindVector:
		return coll.Items(), nil
	case KindMap:
		return mapEntries(m, name, coll.AsMap())
	case KindSet:
		s := coll.AsSet()
		if err := produce(m, name, s.Len()); err != nil {
			return nil, err
		}
		return s.Members(), nil
	case KindString:
		return strChars(m, name, coll.Str())
	}
	return nil, typeErr(name, "a collection (vector, list, map, set, string or nil)", coll)
}

func mapEntries(m *Machine, name string, mp *Map) ([]Value, error) {
	n := mp.Len()
	if err := produce(m, name, 3*n); err != nil {
		return nil, err
	}
	flat := make([]Value, 0, 2*n)
	out := make([]Value, 0, n)
	mp.Range(func(k, v Value) bool {
		flat = append(flat, k, v)
		out = append(out, Vector(flat[len(flat)-2:]))
		return true
	})
	return out, nil
}

func strChars(m *Machine, name string, s string) ([]Value, error) {
	if err := chargeBytes(m, len(s)); err != nil {
		return nil, err
	}
	n := utf8.RuneCountInString(s)
	if err := produce(m, name, n); err != nil {
		return nil, err
	}
	out := make([]Value, 0, n)
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		out = append(out, String(s[i:i+size])) // shares s's bytes
		i += size
	}
	return out, nil
}

// runeAt returns the i-th character of s as a string.
func runeAt(m *Machine, s string, i int64) (Value, bool, error) {
	if i < 0 || i >= int64(len(s)) {
		return Nil, false, nil
	}
	if err := chargeBytes(m, int(i)); err != nil {
		return Nil, false, err
	}
	for off, n := 0, int64(0); off < len(s); n++ {
		_, size := utf8.DecodeRuneInString(s[off:])
		if n == i {
			return String(s[off : off+size]), true, nil
		}
		off += size
	}
	return Nil, false, nil
}

// get looks key up in a map, vector or list (int index) or nil. A missing
// key or out-of-range index gives nil. Strings are indexed by the get and
// get-in builtins, which charge for the scan (see lookup).
func get(coll, key Value) (Value, bool) {
	switch coll.k {
	case KindMap:
		return coll.AsMap().Get(key)
	case KindSet:
		return coll.AsSet().Get(key)
	case KindVector, KindList:
		if key.k != KindInt {
			return Nil, false
		}
		items := coll.Items()
		i := key.AsInt()
		if i < 0 || i >= int64(len(items)) {
			return Nil, false
		}
		return items[i], true
	}
	return Nil, false
}

// lookup is get extended to strings: an int index gives that character.
func lookup(m *Machine, coll, key Value) (Value, bool, error) {
	if coll.k == KindString {
		if key.k != KindInt {
			return Nil, false, nil
		}
		return runeAt(m, coll.Str(), key.AsInt())
	}
	if err := m.probe(coll, key); err != nil {
		return Nil, false, err
	}
	v, ok := get(coll, key)
	return v, ok, nil
}

func builtinGet(m *Machine, a []Value) (Value, error) {
	v, ok, err := lookup(m, a[0], a[1])
	if err != nil {
		return Nil, err
	}
	if !ok && len(a) == 3 {
		return a[2], nil
	}
	return v, nil
}

func builtinGetIn(m *Machine, a []Value) (Value, error) {
	path, err := pathItems("get-in", a[1])
	if err != nil {
		return Nil, err
	}
	v := a[0]
	for _, k := range path {
		var ok bool
		if v, ok, err = lookup(m, v, k); err != nil {
			return Nil, err
		}
		if !ok {
			if len(a) == 3 {
				return a[2], nil
			}
			return Nil, nil
		}
	}
	return v, nil
}

func pathItems(name string, ks Value) ([]Value, error) {
	if !ks.IsNil() && !ks.IsSeq() {
		return nil, typeErr(name, "a vector of keys as the path", ks)
	}
	return ks.Items(), nil
}

// assoc1 sets key k of a map, vector (index 0..count) or nil to v.
func assoc1(m *Machine, name string, coll, k, v Value) (Value, error) {
	switch coll.k {
	case KindNil:
		if err := m.key(k); err != nil {
			return Nil, err
		}
		return MapValue(NewMap(k, v)), nil
	case KindMap:
		if err := m.key(k); err != nil {
			return Nil, err
		}
		mp := coll.AsMap()
		if err := chargeMapCopy(m, mp.Len()); err != nil {
			return Nil, err
		}
		return MapValue(mp.Assoc(k, v)), nil
	case KindVector:
		if k.k != KindInt {
			return Nil, typeErr(name, "an int index for a vector", k)
		}
		items := coll.Items()
		i := k.AsInt()
		if i < 0 || i > int64(len(items)) {
			return Nil, &Error{Type: ErrIndex, Msg: fmt.Sprintf("%s index %d out of range for vector of %d", name, i, len(items))}
		}
		if err := chargeCopy(m, len(items)); err != nil {
			return Nil, err
		}
		out := make([]Value, max(len(items), int(i)+1))
		copy(out, items)
		out[i] = v
		return Vector(out), nil
	}
	return Nil, typeErr(name, "a map, a vector or nil", coll)
}

func builtinAssoc(m *Machine, a []Value) (Value, error) {
	if len(a)%2 != 1 {
		return Nil, &Error{Type: ErrArity, Msg: fmt.Sprintf("assoc needs key/value pairs after the collection; the last key has no value (got %d arguments)", len(a))}
	}
	coll := a[0]
	for i := 1; i < len(a); i += 2 {
		var err error
		if coll, err = assoc1(m, "assoc", coll, a[i], a[i+1]); err != nil {
			return Nil, err
		}
	}
	return coll, nil
}

// updateIn replaces the value at path in coll with f(old). It walks down
// and rebuilds up iteratively, so a long path cannot exhaust the Go stack.
func updateIn(m *Machine, name string, coll Value, path []Value, f func(old Value) (Value, error)) (Value, error) {
	if len(path) == 0 {
		return Nil, &Error{Type: ErrValue, Msg: name + " needs a non-empty key path"}
	}
	if err := m.Charge(int64(len(path))); err != nil {
		return Nil, err
	}
	chain := make([]Value, len(path)) // chain[i] is the collection path[i] is looked up in
	cur := coll
	for i, k := range path {
		chain[i] = cur
		if cur.k != KindNil && cur.k != KindMap && cur.k != KindVector {
			return Nil, typeErr(name, "maps or vectors along the path", cur)
		}
		if err := m.probe(cur, k); err != nil {
			return Nil, err
		}
		cur, _ = get(cur, k)
	}
	v, err := f(cur)
	if err != nil {
		return Nil, err
	}
	for i := len(path) - 1; i >= 0; i-- {
		if v, err = assoc1(m, name, chain[i], path[i], v); err != nil {
			return Nil, err
		}
	}
	return v, nil
}

func builtinAssocIn(m *Machine, a []Value) (Value, error) {
	path, err := pathItems("assoc-in", a[1])
	if err != nil {
		return Nil, err
	}
	v := a[2]
	return updateIn(m, "assoc-in", a[0], path, func(Value) (Value, error) { return v, nil })
}

func builtinUpdate(m *Machine, a []Value) (Value, error) {
	old, _, err := lookup(m, a[0], a[1])
	if err != nil {
		return Nil, err
	}
	v, err := applyWith(m, a[2], old, a[3:])
	if err != nil {
		return Nil, err
	}
	return assoc1(m, "update", a[0], a[1], v)
}

func builtinUpdateIn(m *Machine, a []Value) (Value, error) {
	path, err := pathItems("update-in", a[1])
	if err != nil {
		return Nil, err
	}
	f, extra := a[2], a[3:]
	return updateIn(m, "update-in", a[0], path, func(old Value) (Value, error) {
		return applyWith(m, f, old, extra)
	})
}

func builtinDissoc(m *Machine, a []Value) (Value, error) {
	switch a[0].k {
	case KindNil:
		return Nil, nil
	case KindMap:
	default:
		return Nil, typeErr("dissoc", "a map or nil", a[0])
	}
	mp := a[0].AsMap()
	for _, k := range a[1:] {
		if err := chargeMapCopy(m, mp.Len()); err != nil {
			return Nil, err
		}
		if err := m.walk(k); err != nil {
			return Nil, err
		}
		mp = mp.Dissoc(k)
	}
	return MapValue(mp), nil
}

func builtinMerge(m *Machine, a []Value) (Value, error) {
	total, first, count := 0, -1, 0
	for i, v := range a {
		switch v.k {
		case KindNil:
			continue
		case KindMap:
		default:
			return Nil, typeErr("merge", "maps or nil", v)
		}
		if first < 0 {
			first = i
		}
		count++
		total += v.AsMap().Len()
	}
	switch count {
	case 0:
		return Nil, nil
	case 1:
		return a[first], nil
	}
	if err := produce(m, "merge", total); err != nil {
		return Nil, err
	}
	b := NewMapBuilder(total)
	for _, v := range a[first:] {
		b.setAll(v.AsMap()) // nil for a nil argument, which adds nothing
	}
	return MapValue(b.Map()), nil
}

func mapArg(name string, v Value) (*Map, error) {
	switch v.k {
	case KindNil:
		return emptyMap, nil
	case KindMap:
		return v.AsMap(), nil
	}
	return nil, typeErr(name, "a map or nil", v)
}

func builtinKeysVals(name string, keys bool) func(*Machine, []Value) (Value, error) {
	return func(m *Machine, a []Value) (Value, error) {
		mp, err := mapArg(name, a[0])
		if err != nil {
			return Nil, err
		}
		if err := produce(m, name, mp.Len()); err != nil {
			return Nil, err
		}
		if keys {
			return Vector(mp.Keys()), nil
		}
		return Vector(mp.Vals()), nil
	}
}

func builtinContains(m *Machine, a []Value) (Value, error) {
	coll, k := a[0], a[1]
	if err := m.probe(coll, k); err != nil {
		return Nil, err
	}
	switch coll.k {
	case KindNil:
		return False, nil
	case KindMap:
		_, ok := coll.AsMap().Get(k)
		return Bool(ok), nil
	case KindSet:
		return Bool(coll.AsSet().Has(k)), nil
	case KindVector, KindList:
		return Bool(k.k == KindInt && k.AsInt() >= 0 && k.AsInt() < int64(coll.Len())), nil
	case KindString:
		_, ok, err := runeAt(m, coll.Str(), k.AsInt())
		return Bool(k.k == KindInt && ok), err
	}
	return Nil, typeErr("contains?", "a map, set, vector, string or nil (use some to search a sequence's values)", coll)
}

func builtinCount(m *Machine, a []Value) (Value, error) {
	v := a[0]
	switch v.k {
	case KindNil:
		return Int(0), nil
	case KindList, KindVector, KindMap, KindSet:
		return Int(int64(v.Len())), nil
	case KindString:
		if err := chargeBytes(m, v.Len()); err != nil {
			return Nil, err
		}
		return Int(int64(utf8.RuneCountInString(v.Str()))), nil
	}
	return Nil, typeErr("count", "a collection, a string or nil", v)
}

func builtinEmpty(_ *Machine, a []Value) (Value, error) {
	switch v := a[0]; v.k {
	case KindNil:
		return True, nil
	case KindList, KindVector, KindMap, KindSet, KindString:
		return Bool(v.Len() == 0), nil
	}
	return Nil, typeErr("empty?", "a collection, a string or nil", a[0])
}

func builtinNotEmpty(m *Machine, a []Value) (Value, error) {
	e, err := builtinEmpty(m, a)
	if err != nil || e.AsBool() {
		return Nil, err
	}
	return a[0], nil
}

// conjInto adds xs to coll the way conj does: vectors append, lists and
// nil prepend, maps take [k v] pairs or whole maps.
func conjInto(m *Machine, name string, coll Value, xs []Value) (Value, error) {
	switch coll.k {
	case KindNil, KindList:
		items := coll.Items()
		if err := produce(m, name, len(xs)); err != nil {
			return Nil, err
		}
		if err := chargeCopy(m, len(items)); err != nil {
			return Nil, err
		}
		out := make([]Value, len(xs)+len(items))
		for i, x := range xs {
			out[len(xs)-1-i] = x
		}
		copy(out[len(xs):], items)
		return List(out), nil
	case KindVector:
		items := coll.Items()
		if err := produce(m, name, len(xs)); err != nil {
			return Nil, err
		}
		if err := chargeCopy(m, len(items)); err != nil {
			return Nil, err
		}
		out := make([]Value, 0, len(items)+len(xs))
		return Vector(append(append(out, items...), xs...)), nil
	case KindMap:
		return conjMap(m, name, coll.AsMap(), xs)
	case KindSet:
		set := coll.AsSet()
		if err := produce(m, name, set.Len()+len(xs)); err != nil {
			return Nil, err
		}
		if err := m.keys(xs); err != nil {
			return Nil, err
		}
		return SetValue(set.Conj(xs...)), nil
	}
	return Nil, typeErr(name, "a vector, list, map, set or nil to add to", coll)
}

func conjMap(m *Machine, name string, mp *Map, xs []Value) (Value, error) {
	if err := produce(m, name, mp.Len()+len(xs)); err != nil {
		return Nil, err
	}
	b := NewMapBuilder(mp.Len() + len(xs))
	b.setAll(mp)
	for _, x := range xs {
		switch {
		case x.k == KindNil:
		case x.IsSeq() && x.Len() == 2:
			kv := x.Items()
			if err := m.key(kv[0]); err != nil {
				return Nil, err
			}
			b.Set(kv[0], kv[1])
		case x.k == KindMap:
			xm := x.AsMap()
			if err := produce(m, name, xm.Len()); err != nil {
				return Nil, err
			}
			b.setAll(xm)
		default:
			return Nil, typeErr(name, "[key value] pairs or maps to add to a map", x)
		}
	}
	return MapValue(b.Map()), nil
}

func builtinConj(m *Machine, a []Value) (Value, error) {
	switch len(a) {
	case 0:
		return Vector(nil), nil
	case 1:
		return a[0], nil
	}
	return conjInto(m, "conj", a[0], a[1:])
}

func builtinInto(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "into", a[1])
	if err != nil {
		return Nil, err
	}
	if len(xs) == 0 {
		return a[0], nil
	}
	return conjInto(m, "into", a[0], xs)
}

// copyArgs copies a builtin's arguments, which it must not keep.
func copyArgs(m *Machine, name string, a []Value) ([]Value, error) {
	if err := produce(m, name, len(a)); err != nil {
		return nil, err
	}
	if len(a) == 0 {
		return nil, nil
	}
	return append([]Value(nil), a...), nil
}

func builtinHashMap(m *Machine, a []Value) (Value, error) {
	if len(a)%2 != 0 {
		return Nil, &Error{Type: ErrArity, Msg: fmt.Sprintf("hash-map needs key/value pairs; got %d arguments, an odd number", len(a))}
	}
	if err := produce(m, "hash-map", len(a)/2); err != nil {
		return Nil, err
	}
	for i := 0; i < len(a); i += 2 {
		if err := m.key(a[i]); err != nil {
			return Nil, err
		}
	}
	return MapValue(NewMap(a...)), nil
}

func builtinVec(m *Machine, a []Value) (Value, error) {
	switch a[0].k {
	case KindVector:
		return a[0], nil
	case KindList:
		return Vector(a[0].Items()), nil // items are immutable: sharing is safe
	}
	xs, err := seqItems(m, "vec", a[0])
	return Vector(xs), err
}

func builtinZipmap(m *Machine, a []Value) (Value, error) {
	ks, err := seqItems(m, "zipmap", a[0])
	if err != nil {
		return Nil, err
	}
	vs, err := seqItems(m, "zipmap", a[1])
	if err != nil {
		return Nil, err
	}
	n := min(len(ks), len(vs))
	if err := produce(m, "zipmap", n); err != nil {
		return Nil, err
	}
	if err := m.keys(ks[:n]); err != nil {
		return Nil, err
	}
	b := NewMapBuilder(n)
	for i := range n {
		b.Set(ks[i], vs[i])
	}
	return MapValue(b.Map()), nil
}

func builtinSelectKeys(m *Machine, a []Value) (Value, error) {
	mp, err := mapArg("select-keys", a[0])
	if err != nil {
		return Nil, err
	}
	ks, err := seqItems(m, "select-keys", a[1])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "select-keys", len(ks)); err != nil {
		return Nil, err
	}
	b := NewMapBuilder(len(ks))
	for _, k := range ks {
		if err := m.probe(a[0], k); err != nil {
			return Nil, err
		}
		if v, ok := mp.Get(k); ok {
			b.Set(k, v)
		}
	}
	return MapValue(b.Map()), nil
}

func kindPred(kinds ...Kind) func(*Machine, []Value) (Value, error) {
	return func(_ *Machine, a []Value) (Value, error) {
		for _, k := range kinds {
			if a[0].k == k {
				return True, nil
			}
		}
		return False, nil
	}
}

func init() {
	def("get", 2, 3, builtinGet)
	def("get-in", 2, 3, builtinGetIn)
	def("assoc", 3, -1, builtinAssoc)
	def("assoc-in", 3, 3, builtinAssocIn)
	def("update", 3, -1, builtinUpdate)
	def("update-in", 3, -1, builtinUpdateIn)
	def("dissoc", 1, -1, builtinDissoc)
	def("merge", 0, -1, builtinMerge)
	def("keys", 1, 1, builtinKeysVals("keys", true))
	def("vals", 1, 1, builtinKeysVals("vals", false))
	def("contains?", 2, 2, builtinContains)
	def("count", 1, 1, builtinCount)
	def("empty?", 1, 1, builtinEmpty)
	def("not-empty", 1, 1, builtinNotEmpty)
	def("conj", 0, -1, builtinConj)
	def("into", 2, 2, builtinInto)
	def("vector", 0, -1, func(m *Machine, a []Value) (Value, error) {
		items, err := copyArgs(m, "vector", a)
		return Vector(items), err
	})
	def("list", 0, -1, func(m *Machine, a []Value) (Value, error) {
		items, err := copyArgs(m, "list", a)
		return List(items), err
	})
	def("hash-map", 0, -1, builtinHashMap)
	def("vec", 1, 1, builtinVec)
	def("zipmap", 2, 2, builtinZipmap)
	def("select-keys", 2, 2, builtinSelectKeys)

	def("nil?", 1, 1, kindPred(KindNil))
	def("some?", 1, 1, func(_ *Machine, a []Value) (Value, error) { return Bool(!a[0].IsNil()), nil })
	def("string?", 1, 1, kindPred(KindString))
	def("number?", 1, 1, kindPred(KindInt, KindFloat))
	def("int?", 1, 1, kindPred(KindInt))
	def("float?", 1, 1, kindPred(KindFloat))
	def("boolean?", 1, 1, kindPred(KindBool))
	def("keyword?", 1, 1, kindPred(KindKeyword))
	def("symbol?", 1, 1, kindPred(KindSymbol))
	def("map?", 1, 1, kindPred(KindMap))
	def("vector?", 1, 1, kindPred(KindVector))
	def("list?", 1, 1, kindPred(KindList))
	def("seq?", 1, 1, kindPred(KindList))
	def("coll?", 1, 1, kindPred(KindList, KindVector, KindMap, KindSet))
	def("set?", 1, 1, kindPred(KindSet))
	def("fn?", 1, 1, kindPred(KindFn))
	def("true?", 1, 1, func(_ *Machine, a []Value) (Value, error) { return Bool(a[0].k == KindBool && a[0].AsBool()), nil })
	def("false?", 1, 1, func(_ *Machine, a []Value) (Value, error) { return Bool(a[0].k == KindBool && !a[0].AsBool()), nil })
	def("boolean", 1, 1, func(_ *Machine, a []Value) (Value, error) { return Bool(a[0].Truthy()), nil })
}
