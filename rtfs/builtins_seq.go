package rtfs

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// This file holds the sequence builtins. They are eager: each returns a
// vector (or a single value), never a lazy sequence, and treats nil as an
// empty collection. Functions passed to them are called through
// Machine.Apply, so fuel and depth limits hold inside them.

func builtinFirst(m *Machine, a []Value) (Value, error) { return nthOr(m, "first", a[0], 0) }

func builtinSecond(m *Machine, a []Value) (Value, error) { return nthOr(m, "second", a[0], 1) }

// nthOr returns element i of coll, or nil when there is none.
func nthOr(m *Machine, name string, coll Value, i int) (Value, error) {
	xs, err := seqItems(m, name, coll)
	if err != nil || i >= len(xs) {
		return Nil, err
	}
	return xs[i], nil
}

func builtinLast(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "last", a[0])
	if err != nil || len(xs) == 0 {
		return Nil, err
	}
	return xs[len(xs)-1], nil
}

// The slicing builtins share their input's items: values are immutable.

func builtinRest(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "rest", a[0])
	if err != nil || len(xs) == 0 {
		return Vector(nil), err
	}
	return Vector(xs[1:]), nil
}

func builtinButlast(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "butlast", a[0])
	if err != nil || len(xs) == 0 {
		return Vector(nil), err
	}
	return Vector(xs[:len(xs)-1]), nil
}

func countArg(name string, v Value) (int, error) {
	if v.k != KindInt {
		return 0, typeErr(name, "an int count", v)
	}
	return int(min(max(v.AsInt(), 0), math.MaxInt32)), nil
}

func builtinTake(m *Machine, a []Value) (Value, error) {
	n, err := countArg("take", a[0])
	if err != nil {
		return Nil, err
	}
	xs, err := seqItems(m, "take", a[1])
	if err != nil {
		return Nil, err
	}
	return Vector(xs[:min(n, len(xs))]), nil
}

func builtinDrop(m *Machine, a []Value) (Value, error) {
	n, err := countArg("drop", a[0])
	if err != nil {
		return Nil, err
	}
	xs, err := seqItems(m, "drop", a[1])
	if err != nil {
		return Nil, err
	}
	return Vector(xs[min(n, len(xs)):]), nil
}

func builtinNth(m *Machine, a []Value) (Value, error) {
	if a[1].k != KindInt {
		return Nil, typeErr("nth", "an int index", a[1])
	}
	i := a[1].AsInt()
	var n int
	switch coll := a[0]; coll.k {
	case KindNil: // (nth nil i) is nil, as in Clojure
		if len(a) == 3 {
			return a[2], nil
		}
		return Nil, nil
	case KindList, KindVector:
		if items := coll.Items(); i >= 0 && i < int64(len(items)) {
			return items[i], nil
		}
		n = coll.Len()
	case KindString:
		v, ok, err := runeAt(m, coll.Str(), i)
		if err != nil || ok {
			return v, err
		}
		if n, err = countRunes(m, coll); err != nil {
			return Nil, err
		}
	default:
		return Nil, typeErr("nth", "a vector, list, string or nil", coll)
	}
	if len(a) == 3 {
		return a[2], nil
	}
	return Nil, &Error{Type: ErrIndex, Msg: fmt.Sprintf("nth index %d out of range for %s of %d; pass a default as a third argument", i, a[0].k, n)}
}

func countRunes(m *Machine, s Value) (int, error) {
	v, err := builtinCount(m, []Value{s})
	return int(v.AsInt()), err
}

func builtinCons(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "cons", a[1])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "cons", len(xs)+1); err != nil {
		return Nil, err
	}
	out := make([]Value, 0, len(xs)+1)
	return Vector(append(append(out, a[0]), xs...)), nil
}

func builtinConcat(m *Machine, a []Value) (Value, error) {
	parts := make([][]Value, len(a))
	total := 0
	for i, c := range a {
		xs, err := seqItems(m, "concat", c)
		if err != nil {
			return Nil, err
		}
		parts[i] = xs
		total += len(xs)
	}
	if err := produce(m, "concat", total); err != nil {
		return Nil, err
	}
	out := make([]Value, 0, total)
	for _, xs := range parts {
		out = append(out, xs...)
	}
	return Vector(out), nil
}

func builtinReverse(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "reverse", a[0])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "reverse", len(xs)); err != nil {
		return Nil, err
	}
	out := make([]Value, len(xs))
	for i, x := range xs {
		out[len(xs)-1-i] = x
	}
	return Vector(out), nil
}

// builtinMap is (map f coll…): f applied across the collections in step,
// stopping at the shortest.
func builtinMap(m *Machine, a []Value) (Value, error) {
	f := a[0]
	if len(a) == 2 {
		xs, err := seqItems(m, "map", a[1])
		if err != nil {
			return Nil, err
		}
		if err := produce(m, "map", len(xs)); err != nil {
			return Nil, err
		}
		out := make([]Value, len(xs))
		for i, x := range xs {
			if out[i], err = m.Apply(f, x); err != nil {
				return Nil, err
			}
		}
		return Vector(out), nil
	}
	colls := make([][]Value, len(a)-1)
	n := math.MaxInt
	for i, c := range a[1:] {
		xs, err := seqItems(m, "map", c)
		if err != nil {
			return Nil, err
		}
		colls[i] = xs
		n = min(n, len(xs))
	}
	if err := produce(m, "map", n); err != nil {
		return Nil, err
	}
	out := make([]Value, n)
	row := make([]Value, len(colls))
	for i := range n {
		for j, xs := range colls {
			row[j] = xs[i]
		}
		v, err := m.Apply(f, row...)
		if err != nil {
			return Nil, err
		}
		out[i] = v
	}
	return Vector(out), nil
}

// filterBy keeps the elements x of coll for which (pred x) is truthy
// (keep == true) or falsy (keep == false).
func filterBy(name string, keep bool) func(*Machine, []Value) (Value, error) {
	return func(m *Machine, a []Value) (Value, error) {
		xs, err := seqItems(m, name, a[1])
		if err != nil {
			return Nil, err
		}
		if err := produce(m, name, len(xs)); err != nil {
			return Nil, err
		}
		var out []Value
		for _, x := range xs {
			t, err := m.Apply(a[0], x)
			if err != nil {
				return Nil, err
			}
			if t.Truthy() == keep {
				if out == nil {
					out = make([]Value, 0, len(xs))
				}
				out = append(out, x)
			}
		}
		return Vector(out), nil
	}
}

// builtinKeep is (keep f coll): the non-nil results of (f x).
func builtinKeep(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "keep", a[1])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "keep", len(xs)); err != nil {
		return Nil, err
	}
	out := make([]Value, 0, len(xs))
	for _, x := range xs {
		v, err := m.Apply(a[0], x)
		if err != nil {
			return Nil, err
		}
		if !v.IsNil() {
			out = append(out, v)
		}
	}
	return Vector(out), nil
}

// builtinReduce follows Clojure: without init, an empty collection gives
// (f) and a single element is returned without calling f.
func builtinReduce(m *Machine, a []Value) (Value, error) {
	f, coll := a[0], a[len(a)-1]
	xs, err := seqItems(m, "reduce", coll)
	if err != nil {
		return Nil, err
	}
	var acc Value
	if len(a) == 3 {
		acc = a[1]
	} else {
		if len(xs) == 0 {
			return m.Apply(f)
		}
		acc, xs = xs[0], xs[1:]
	}
	for _, x := range xs {
		if acc, err = m.Apply(f, acc, x); err != nil {
			return Nil, err
		}
	}
	return acc, nil
}

// builtinSome returns the first truthy (pred x), or nil.
func builtinSome(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "some", a[1])
	if err != nil {
		return Nil, err
	}
	for _, x := range xs {
		v, err := m.Apply(a[0], x)
		if err != nil || v.Truthy() {
			return v, err
		}
	}
	return Nil, nil
}

func builtinEvery(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "every?", a[1])
	if err != nil {
		return Nil, err
	}
	for _, x := range xs {
		v, err := m.Apply(a[0], x)
		if err != nil {
			return Nil, err
		}
		if !v.Truthy() {
			return False, nil
		}
	}
	return True, nil
}

func whileBy(name string, take bool) func(*Machine, []Value) (Value, error) {
	return func(m *Machine, a []Value) (Value, error) {
		xs, err := seqItems(m, name, a[1])
		if err != nil {
			return Nil, err
		}
		i := 0
		for ; i < len(xs); i++ {
			v, err := m.Apply(a[0], xs[i])
			if err != nil {
				return Nil, err
			}
			if !v.Truthy() {
				break
			}
		}
		if take {
			return Vector(xs[:i]), nil
		}
		return Vector(xs[i:]), nil
	}
}

// builtinRange is (range end), (range start end) or (range start end step).
// Ints give ints; any float argument gives floats.
func builtinRange(m *Machine, a []Value) (Value, error) {
	start, end, step := Int(0), a[0], Int(1)
	switch len(a) {
	case 2:
		start, end = a[0], a[1]
	case 3:
		start, end, step = a[0], a[1], a[2]
	}
	allInt := true
	for _, v := range []Value{start, end, step} {
		if err := needNumber("range", v); err != nil {
			return Nil, err
		}
		allInt = allInt && v.k == KindInt
	}
	if step.AsFloat() == 0 {
		return Nil, &Error{Type: ErrValue, Msg: "range step must not be zero"}
	}
	if allInt {
		return intRange(m, start.AsInt(), end.AsInt(), step.AsInt())
	}
	return floatRange(m, start.AsFloat(), end.AsFloat(), step.AsFloat())
}

func intRange(m *Machine, a, b, step int64) (Value, error) {
	var n uint64
	switch {
	case step > 0 && a < b:
		n = (uint64(b)-uint64(a)-1)/uint64(step) + 1
	case step < 0 && a > b:
		n = (uint64(a)-uint64(b)-1)/(-uint64(step)) + 1
	}
	if err := produce(m, "range", int(min(n, 1<<40))); err != nil {
		return Nil, err
	}
	out := make([]Value, n)
	v := a
	for i := range out {
		out[i] = Int(v)
		v += step // may wrap after the last element, which is never used
	}
	return Vector(out), nil
}

func floatRange(m *Machine, a, b, step float64) (Value, error) {
	for _, f := range []float64{a, b, step} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return Nil, &Error{Type: ErrValue, Msg: "range bounds and step must be finite numbers"}
		}
	}
	n := math.Ceil((b - a) / step)
	if !(n > 0) {
		n = 0
	}
	if err := produce(m, "range", int(min(n, 1<<40))); err != nil {
		return Nil, err
	}
	out := make([]Value, int(n))
	for i := range out {
		out[i] = Float(a + float64(i)*step)
	}
	return Vector(out), nil
}

func builtinRepeat(m *Machine, a []Value) (Value, error) {
	n, err := countArg("repeat", a[0])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "repeat", n); err != nil {
		return Nil, err
	}
	out := make([]Value, n)
	for i := range out {
		out[i] = a[1]
	}
	return Vector(out), nil
}

func builtinDistinct(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "distinct", a[0])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "distinct", len(xs)); err != nil {
		return Nil, err
	}
	seen := keySet{keys: make([]Value, 0, len(xs)), idx: make(map[uint64][]int32, len(xs))}
	for _, x := range xs {
		if _, _, err := seen.add(m, x); err != nil {
			return Nil, err
		}
	}
	return Vector(seen.keys), nil
}

func builtinInterpose(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "interpose", a[1])
	if err != nil || len(xs) == 0 {
		return Vector(nil), err
	}
	if err := produce(m, "interpose", 2*len(xs)); err != nil {
		return Nil, err
	}
	out := make([]Value, 0, 2*len(xs)-1)
	for i, x := range xs {
		if i > 0 {
			out = append(out, a[0])
		}
		out = append(out, x)
	}
	return Vector(out), nil
}

// builtinPartition is (partition n coll), (partition n step coll) or
// (partition n step pad coll); a final group shorter than n is dropped,
// or with pad filled from pad (and kept even if still short), as in Clojure.
func builtinPartition(m *Machine, a []Value) (Value, error) {
	n, err := countArg("partition", a[0])
	if err != nil {
		return Nil, err
	}
	step := n
	if len(a) >= 3 {
		if step, err = countArg("partition", a[1]); err != nil {
			return Nil, err
		}
	}
	if n <= 0 || step <= 0 {
		return Nil, &Error{Type: ErrValue, Msg: "partition size and step must be positive"}
	}
	xs, err := seqItems(m, "partition", a[len(a)-1])
	if err != nil {
		return Nil, err
	}
	groups := 0
	if len(xs) >= n {
		groups = (len(xs)-n)/step + 1
	}
	if err := produce(m, "partition", groups); err != nil {
		return Nil, err
	}
	out := make([]Value, groups, groups+1)
	for g := range out {
		out[g] = Vector(xs[g*step : g*step+n])
	}
	if len(a) == 4 && groups*step < len(xs) { // (partition n step pad coll): pad the last group
		pad, err := seqItems(m, "partition", a[2])
		if err != nil {
			return Nil, err
		}
		rest := xs[groups*step:]
		fill := pad[:min(len(pad), n-len(rest))]
		if err := produce(m, "partition", len(rest)+len(fill)); err != nil {
			return Nil, err
		}
		last := make([]Value, 0, len(rest)+len(fill))
		last = append(append(last, rest...), fill...)
		out = append(out, Vector(last))
	}
	return Vector(out), nil
}

// keySet holds distinct values in first-seen order, for distinct,
// frequencies and group-by.
type keySet struct {
	keys []Value
	idx  map[uint64][]int32 // hash to indexes into keys
}

// add returns k's index in keys, appending k if it is new. Hashing and
// comparing k are charged to m.
func (s *keySet) add(m *Machine, k Value) (i int, added bool, err error) {
	h, err := m.hash(k)
	if err != nil {
		return 0, false, err
	}
	for _, i := range s.idx[h] {
		eq, err := m.equal(s.keys[i], k)
		if err != nil {
			return 0, false, err
		}
		if eq {
			return int(i), false, nil
		}
	}
	s.idx[h] = append(s.idx[h], int32(len(s.keys)))
	s.keys = append(s.keys, k)
	return len(s.keys) - 1, true, nil
}

func builtinFrequencies(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "frequencies", a[0])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "frequencies", len(xs)); err != nil {
		return Nil, err
	}
	g := keySet{idx: map[uint64][]int32{}}
	var n []int64
	for _, x := range xs {
		if err := m.key(x); err != nil {
			return Nil, err
		}
		i, added, err := g.add(m, x)
		if err != nil {
			return Nil, err
		}
		if added {
			n = append(n, 0)
		}
		n[i]++
	}
	b := NewMapBuilder(len(g.keys))
	for i, k := range g.keys {
		b.Set(k, Int(n[i]))
	}
	return MapValue(b.Map()), nil
}

func builtinGroupBy(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "group-by", a[1])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "group-by", len(xs)); err != nil {
		return Nil, err
	}
	g := keySet{idx: map[uint64][]int32{}}
	var groups [][]Value
	for _, x := range xs {
		k, err := m.Apply(a[0], x)
		if err != nil {
			return Nil, err
		}
		if err := m.key(k); err != nil {
			return Nil, err
		}
		i, added, err := g.add(m, k)
		if err != nil {
			return Nil, err
		}
		if added {
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], x)
	}
	b := NewMapBuilder(len(g.keys))
	for i, k := range g.keys {
		b.Set(k, Vector(groups[i]))
	}
	return MapValue(b.Map()), nil
}

// comparator turns a user function into an ordering: a number result is
// its sign; any other result is read as "a is less than b", as Clojure
// does for predicates such as <.
func comparator(m *Machine, f Value) func(a, b Value) (int, error) {
	return func(a, b Value) (int, error) {
		r, err := m.Apply(f, a, b)
		if err != nil {
			return 0, err
		}
		if r.IsNumber() {
			switch x := r.AsFloat(); {
			case x < 0:
				return -1, nil
			case x > 0:
				return 1, nil
			}
			return 0, nil
		}
		if r.Truthy() {
			return -1, nil
		}
		r, err = m.Apply(f, b, a)
		if err != nil || !r.Truthy() {
			return 0, err
		}
		return 1, nil
	}
}

// sortStable sorts xs (a fresh copy the caller owns) by cmp, stopping at
// the first comparison error.
func sortStable(m *Machine, xs []Value, cmp func(a, b Value) (int, error)) error {
	if err := m.Charge(int64(len(xs) * bits.Len(uint(len(xs))))); err != nil {
		return err
	}
	var first error
	calls := 0
	slices.SortStableFunc(xs, func(a, b Value) int {
		if first != nil {
			return 0
		}
		// Comparisons of scalars charge nothing beyond the fuel above:
		// poll for cancellation every 1024 of them.
		if calls++; calls&1023 == 0 {
			if first = m.poll(); first != nil {
				return 0
			}
		}
		c, err := cmp(a, b)
		if err != nil {
			first = err
		}
		return c
	})
	return first
}

func sortedCopy(m *Machine, name string, coll Value) ([]Value, error) {
	xs, err := seqItems(m, name, coll)
	if err != nil {
		return nil, err
	}
	if err := produce(m, name, len(xs)); err != nil {
		return nil, err
	}
	return slices.Clone(xs), nil
}

// builtinSort is (sort coll) or (sort comparator coll).
func builtinSort(m *Machine, a []Value) (Value, error) {
	xs, err := sortedCopy(m, "sort", a[len(a)-1])
	if err != nil {
		return Nil, err
	}
	cmp := func(x, y Value) (int, error) { return m.compare("sort", x, y) }
	if len(a) == 2 {
		cmp = comparator(m, a[0])
	}
	if err := sortStable(m, xs, cmp); err != nil {
		return Nil, err
	}
	return Vector(xs), nil
}

// builtinSortBy is (sort-by keyfn coll) or (sort-by keyfn comparator coll).
func builtinSortBy(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "sort-by", a[len(a)-1])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "sort-by", 2*len(xs)); err != nil {
		return Nil, err
	}
	pairs := make([]Value, len(xs)) // [key x] vectors over one backing array
	flat := make([]Value, 2*len(xs))
	for i, x := range xs {
		k, err := m.Apply(a[0], x)
		if err != nil {
			return Nil, err
		}
		flat[2*i], flat[2*i+1] = k, x
		pairs[i] = Vector(flat[2*i : 2*i+2])
	}
	cmp := func(x, y Value) (int, error) { return m.compare("sort-by", x, y) }
	if len(a) == 3 {
		cmp = comparator(m, a[1])
	}
	byKey := func(p, q Value) (int, error) { return cmp(p.Items()[0], q.Items()[0]) }
	if err := sortStable(m, pairs, byKey); err != nil {
		return Nil, err
	}
	for i, p := range pairs {
		pairs[i] = p.Items()[1]
	}
	return Vector(pairs), nil
}

func builtinCompare(m *Machine, a []Value) (Value, error) {
	c, err := m.compare("compare", a[0], a[1])
	return Int(int64(c)), err
}

func builtinSeq(m *Machine, a []Value) (Value, error) {
	switch v := a[0]; v.k {
	case KindList, KindVector:
		if v.Len() == 0 {
			return Nil, nil
		}
		return v, nil
	}
	xs, err := seqItems(m, "seq", a[0])
	if err != nil || len(xs) == 0 {
		return Nil, err
	}
	return Vector(xs), nil
}

func init() {
	def("first", 1, 1, builtinFirst)
	def("second", 1, 1, builtinSecond)
	def("last", 1, 1, builtinLast)
	def("rest", 1, 1, builtinRest)
	def("butlast", 1, 1, builtinButlast)
	def("nth", 2, 3, builtinNth)
	def("take", 2, 2, builtinTake)
	def("drop", 2, 2, builtinDrop)
	def("take-while", 2, 2, whileBy("take-while", true))
	def("drop-while", 2, 2, whileBy("drop-while", false))
	def("cons", 2, 2, builtinCons)
	def("concat", 0, -1, builtinConcat)
	def("reverse", 1, 1, builtinReverse)
	def("map", 2, -1, builtinMap)
	def("mapv", 2, -1, builtinMap)
	def("filter", 2, 2, filterBy("filter", true))
	def("filterv", 2, 2, filterBy("filterv", true))
	def("remove", 2, 2, filterBy("remove", false))
	def("keep", 2, 2, builtinKeep)
	def("reduce", 2, 3, builtinReduce)
	def("some", 2, 2, builtinSome)
	def("every?", 2, 2, builtinEvery)
	def("range", 1, 3, builtinRange)
	def("repeat", 2, 2, builtinRepeat)
	def("distinct", 1, 1, builtinDistinct)
	def("interpose", 2, 2, builtinInterpose)
	def("partition", 2, 4, builtinPartition)
	def("frequencies", 1, 1, builtinFrequencies)
	def("group-by", 2, 2, builtinGroupBy)
	def("sort", 1, 2, builtinSort)
	def("sort-by", 2, 3, builtinSortBy)
	def("compare", 2, 2, builtinCompare)
	def("seq", 1, 1, builtinSeq)
}
