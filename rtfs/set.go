package rtfs

import "unsafe"

// Set is an immutable RTFS set: distinct members, observed in canonical
// order (sorted by their canonical text) like map keys. It is a map from
// each member to itself, so look-ups return the stored member.
type Set struct {
	m *Map
}

var emptySet = &Set{m: emptyMap}

// NewSet builds a set of items; duplicates collapse into one member.
func NewSet(items ...Value) *Set {
	b := NewMapBuilder(len(items))
	for _, it := range items {
		b.Set(it, it)
	}
	return &Set{m: b.Map()}
}

// setOfMap wraps a map whose keys are the members and whose values are
// the same members.
func setOfMap(m *Map) *Set { return &Set{m: m} }

// SetValue wraps s as a value.
func SetValue(s *Set) Value {
	if s == nil {
		s = emptySet
	}
	return Value{k: KindSet, p: unsafe.Pointer(s)}
}

// AsSet returns the set held by v, or nil.
func (v Value) AsSet() *Set {
	if v.k != KindSet {
		return nil
	}
	return (*Set)(v.p)
}

// Len returns the number of members.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.m.Len()
}

// Has reports whether x is a member.
func (s *Set) Has(x Value) bool {
	if s == nil {
		return false
	}
	_, ok := s.m.Get(x)
	return ok
}

// Get returns the member equal to x.
func (s *Set) Get(x Value) (Value, bool) {
	if s == nil {
		return Nil, false
	}
	return s.m.Get(x)
}

// Members returns the members in canonical order.
func (s *Set) Members() []Value {
	if s == nil {
		return nil
	}
	return s.m.Keys()
}

// Range calls f for every member in canonical order until f returns false.
func (s *Set) Range(f func(x Value) bool) {
	if s == nil {
		return
	}
	s.m.Range(func(k, _ Value) bool { return f(k) })
}

// Conj returns s with xs added.
func (s *Set) Conj(xs ...Value) *Set {
	b := NewMapBuilder(s.Len() + len(xs))
	b.setAll(s.m)
	for _, x := range xs {
		b.Set(x, x)
	}
	return &Set{m: b.Map()}
}

// Disj returns s without xs.
func (s *Set) Disj(xs ...Value) *Set {
	m := s.m
	for _, x := range xs {
		m = m.Dissoc(x)
	}
	if m == s.m {
		return s
	}
	return &Set{m: m}
}

func setEqual(a, b *Set, budget *int) bool {
	if a == b {
		return true
	}
	if a.Len() != b.Len() {
		return false
	}
	for _, k := range a.m.keys {
		if spend(k, budget); *budget < 0 { // hashing and comparing k visit it
			return false
		}
		if !b.Has(k) {
			return false
		}
	}
	return true
}
