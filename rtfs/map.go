package rtfs

import (
	"slices"
	"sync"
)

// Map is an immutable RTFS map. Entries keep insertion order internally;
// every observable order (printing, keys, vals, iteration) is canonical:
// keys sorted by their canonical text. Lookups scan small maps and use a
// lazily built hash index for larger ones.
type Map struct {
	keys []Value
	vals []Value

	once   sync.Once
	index  map[uint64][]int32 // built on first lookup when len > smallMap
	sorted []int32            // canonical order, built on first ordered walk
	sortMu sync.Once
}

const smallMap = 8

var emptyMap = &Map{}

// NewMap builds a map from alternating keys and values; later keys win.
func NewMap(kvs ...Value) *Map {
	b := NewMapBuilder(len(kvs) / 2)
	for i := 0; i+1 < len(kvs); i += 2 {
		b.Set(kvs[i], kvs[i+1])
	}
	return b.Map()
}

// MapBuilder accumulates entries for a new Map. Once it holds more than
// smallMap entries it keeps a hash index, so building n entries is O(n),
// and hands that index to the built map.
type MapBuilder struct {
	m   *Map
	idx map[uint64][]int32
}

// NewMapBuilder returns a builder with room for n entries.
func NewMapBuilder(n int) *MapBuilder {
	return &MapBuilder{m: &Map{keys: make([]Value, 0, n), vals: make([]Value, 0, n)}}
}

// Set adds or replaces the entry for k.
func (b *MapBuilder) Set(k, v Value) {
	if i := b.find(k); i >= 0 {
		b.m.vals[i] = v
		return
	}
	if b.idx != nil {
		h := Hash(k)
		b.idx[h] = append(b.idx[h], int32(len(b.m.keys)))
	}
	b.m.keys = append(b.m.keys, k)
	b.m.vals = append(b.m.vals, v)
}

// setAll sets every entry of m (none for a nil m), in m's insertion order.
func (b *MapBuilder) setAll(m *Map) {
	for i := range m.Len() {
		b.Set(m.keys[i], m.vals[i])
	}
}

// Has reports whether k has been set.
func (b *MapBuilder) Has(k Value) bool { return b.find(k) >= 0 }

func (b *MapBuilder) find(k Value) int {
	if b.idx == nil {
		if len(b.m.keys) <= smallMap {
			return b.m.find(k, false)
		}
		b.idx = hashIndex(b.m.keys, 2*len(b.m.keys)) // room to grow
	}
	return indexOf(b.idx, b.m.keys, k)
}

// Map returns the built map; the builder must not be used afterwards.
func (b *MapBuilder) Map() *Map {
	m := b.m
	if idx := b.idx; idx != nil && len(m.keys) > smallMap {
		m.once.Do(func() { m.index = idx })
	}
	b.m, b.idx = nil, nil
	return m
}

// Len returns the number of entries.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.keys)
}

// Get returns the value stored under k.
func (m *Map) Get(k Value) (Value, bool) {
	if m == nil {
		return Nil, false
	}
	if i := m.find(k, true); i >= 0 {
		return m.vals[i], true
	}
	return Nil, false
}

// GetKey returns the value under the keyword :name, or nil.
func (m *Map) GetKey(name string) Value {
	v, _ := m.Get(Keyword(name))
	return v
}

func (m *Map) find(k Value, useIndex bool) int {
	if len(m.keys) <= smallMap || !useIndex {
		for i := range m.keys {
			if Equal(m.keys[i], k) {
				return i
			}
		}
		return -1
	}
	m.once.Do(func() { m.index = hashIndex(m.keys, len(m.keys)) })
	return indexOf(m.index, m.keys, k)
}

// hashIndex maps the hash of each key to its indexes in keys.
func hashIndex(keys []Value, size int) map[uint64][]int32 {
	idx := make(map[uint64][]int32, size)
	for i, k := range keys {
		h := Hash(k)
		idx[h] = append(idx[h], int32(i))
	}
	return idx
}

// indexOf returns the index in keys of k, looked up through idx, or -1.
func indexOf(idx map[uint64][]int32, keys []Value, k Value) int {
	for _, i := range idx[Hash(k)] {
		if Equal(keys[i], k) {
			return int(i)
		}
	}
	return -1
}

// Assoc returns a copy of m with k set to v.
func (m *Map) Assoc(k, v Value) *Map {
	n := &Map{}
	i := m.find(k, true)
	if i >= 0 {
		n.keys = m.keys // keys are unchanged and never mutated
		n.vals = slices.Clone(m.vals)
		n.vals[i] = v
		return n
	}
	n.keys = make([]Value, len(m.keys), len(m.keys)+1)
	copy(n.keys, m.keys)
	n.keys = append(n.keys, k)
	n.vals = make([]Value, len(m.vals), len(m.vals)+1)
	copy(n.vals, m.vals)
	n.vals = append(n.vals, v)
	return n
}

// Dissoc returns a copy of m without k.
func (m *Map) Dissoc(k Value) *Map {
	i := m.find(k, true)
	if i < 0 {
		return m
	}
	n := &Map{keys: make([]Value, 0, len(m.keys)-1), vals: make([]Value, 0, len(m.vals)-1)}
	n.keys = append(append(n.keys, m.keys[:i]...), m.keys[i+1:]...)
	n.vals = append(append(n.vals, m.vals[:i]...), m.vals[i+1:]...)
	return n
}

// order returns entry indexes in canonical key order.
func (m *Map) order() []int32 {
	m.sortMu.Do(func() {
		idx := make([]int32, len(m.keys))
		if len(idx) < 2 { // one key is in order without printing it
			m.sorted = idx
			return
		}
		texts := make([]string, len(m.keys))
		for i, k := range m.keys {
			texts[i] = Print(k)
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, func(a, b int32) int {
			switch {
			case texts[a] < texts[b]:
				return -1
			case texts[a] > texts[b]:
				return 1
			}
			return 0
		})
		m.sorted = idx
	})
	return m.sorted
}

// Range calls f for every entry in canonical key order until f returns false.
func (m *Map) Range(f func(k, v Value) bool) {
	if m == nil {
		return
	}
	for _, i := range m.order() {
		if !f(m.keys[i], m.vals[i]) {
			return
		}
	}
}

// Keys returns the keys in canonical order.
func (m *Map) Keys() []Value {
	out := make([]Value, 0, m.Len())
	m.Range(func(k, _ Value) bool { out = append(out, k); return true })
	return out
}

// Vals returns the values in canonical key order.
func (m *Map) Vals() []Value {
	out := make([]Value, 0, m.Len())
	m.Range(func(_, v Value) bool { out = append(out, v); return true })
	return out
}

func mapEqual(a, b *Map, budget *int) bool {
	if a == b {
		return true
	}
	if a.Len() != b.Len() {
		return false
	}
	for i, k := range a.keys {
		if spend(k, budget); *budget < 0 { // hashing and comparing k visit it
			return false
		}
		v, ok := b.Get(k)
		if !ok || !equal(v, a.vals[i], budget) {
			return false
		}
	}
	return true
}
