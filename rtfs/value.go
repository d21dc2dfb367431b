package rtfs

import (
	"fmt"
	"math"
	"regexp"
	"unsafe"
)

// Kind is the type tag of a Value.
type Kind uint8

// The kinds of RTFS values. The zero Value is nil.
const (
	KindNil Kind = iota
	KindBool
	KindInt
	KindFloat
	KindString
	KindKeyword
	KindSymbol
	KindList
	KindVector
	KindMap
	KindFn
	KindRegex
	KindSet
)

var kindNames = [...]string{
	KindNil:     "nil",
	KindBool:    "boolean",
	KindInt:     "int",
	KindFloat:   "float",
	KindString:  "string",
	KindKeyword: "keyword",
	KindSymbol:  "symbol",
	KindList:    "list",
	KindVector:  "vector",
	KindMap:     "map",
	KindFn:      "fn",
	KindRegex:   "regex",
	KindSet:     "set",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Value is an immutable RTFS value. It is three words and is passed by value;
// ints, floats, booleans and nil never allocate.
//
// Layout by kind:
//   - Bool, Int, Float: n holds the bits, p is nil.
//   - String, Keyword, Symbol: p points at the bytes, n is the length.
//   - List, Vector: p points at the first element, n is the length.
//   - Map: p is a *Map. Set: p is a *Set. Fn: p is a *Fn. Regex: p is a *regexp.Regexp.
//
// Values are never mutated after construction, so they may be shared freely
// between goroutines.
type Value struct {
	k Kind
	n uint64
	p unsafe.Pointer
}

// Nil is the nil value; it is also the zero Value.
var Nil = Value{}

// True and False are the two booleans.
var (
	True  = Value{k: KindBool, n: 1}
	False = Value{k: KindBool}
)

// Bool returns the boolean value b.
func Bool(b bool) Value {
	if b {
		return True
	}
	return False
}

// Int returns the integer value i.
func Int(i int64) Value { return Value{k: KindInt, n: uint64(i)} }

// Float returns the float value f.
func Float(f float64) Value { return Value{k: KindFloat, n: math.Float64bits(f)} }

// String returns the string value s.
func String(s string) Value { return strValue(KindString, s) }

// Keyword returns the keyword with name s, written without its colon (Keyword("a.b") is :a.b).
func Keyword(s string) Value { return strValue(KindKeyword, s) }

// Symbol returns the symbol named s.
func Symbol(s string) Value { return strValue(KindSymbol, s) }

func strValue(k Kind, s string) Value {
	if len(s) == 0 {
		return Value{k: k}
	}
	return Value{k: k, n: uint64(len(s)), p: unsafe.Pointer(unsafe.StringData(s))}
}

// Vector returns a vector holding items. The slice is owned by the value afterwards
// and must not be modified by the caller.
func Vector(items []Value) Value { return seqValue(KindVector, items) }

// List returns a list holding items; the slice is owned by the value afterwards.
func List(items []Value) Value { return seqValue(KindList, items) }

func seqValue(k Kind, items []Value) Value {
	if len(items) == 0 {
		return Value{k: k}
	}
	return Value{k: k, n: uint64(len(items)), p: unsafe.Pointer(unsafe.SliceData(items))}
}

// MapValue wraps m as a value.
func MapValue(m *Map) Value {
	if m == nil {
		m = emptyMap
	}
	return Value{k: KindMap, p: unsafe.Pointer(m)}
}

// FnValue wraps f as a value.
func FnValue(f *Fn) Value { return Value{k: KindFn, p: unsafe.Pointer(f)} }

// Regex wraps a compiled regular expression as a value.
func Regex(re *regexp.Regexp) Value { return Value{k: KindRegex, p: unsafe.Pointer(re)} }

// Kind reports the value's type tag.
func (v Value) Kind() Kind { return v.k }

// IsNil reports whether v is nil.
func (v Value) IsNil() bool { return v.k == KindNil }

// Truthy reports RTFS truth: everything but nil and false is true.
func (v Value) Truthy() bool {
	return !(v.k == KindNil || (v.k == KindBool && v.n == 0))
}

// AsBool returns the boolean held by v (false for non-booleans).
func (v Value) AsBool() bool { return v.k == KindBool && v.n != 0 }

// AsInt returns the integer held by v (0 for non-ints).
func (v Value) AsInt() int64 {
	if v.k != KindInt {
		return 0
	}
	return int64(v.n)
}

// AsFloat returns the number held by v as a float64 (ints are converted).
func (v Value) AsFloat() float64 {
	switch v.k {
	case KindFloat:
		return math.Float64frombits(v.n)
	case KindInt:
		return float64(int64(v.n))
	}
	return 0
}

// Str returns the text of a string, keyword (without colon) or symbol, else "".
func (v Value) Str() string {
	switch v.k {
	case KindString, KindKeyword, KindSymbol:
		if v.n == 0 {
			return ""
		}
		return unsafe.String((*byte)(v.p), int(v.n))
	}
	return ""
}

// Items returns the elements of a list or vector (nil otherwise). The slice
// is shared with the value and must not be modified.
func (v Value) Items() []Value {
	if (v.k == KindList || v.k == KindVector) && v.n > 0 {
		return unsafe.Slice((*Value)(v.p), int(v.n))
	}
	return nil
}

// AsMap returns the map held by v, or nil.
func (v Value) AsMap() *Map {
	if v.k != KindMap {
		return nil
	}
	return (*Map)(v.p)
}

// AsFn returns the function held by v, or nil.
func (v Value) AsFn() *Fn {
	if v.k != KindFn {
		return nil
	}
	return (*Fn)(v.p)
}

// AsRegex returns the regular expression held by v, or nil.
func (v Value) AsRegex() *regexp.Regexp {
	if v.k != KindRegex {
		return nil
	}
	return (*regexp.Regexp)(v.p)
}

// IsNumber reports whether v is an int or a float.
func (v Value) IsNumber() bool { return v.k == KindInt || v.k == KindFloat }

// IsSeq reports whether v is a list or a vector.
func (v Value) IsSeq() bool { return v.k == KindList || v.k == KindVector }

// Len returns the element count of a sequence, map or string (in bytes), else 0.
func (v Value) Len() int {
	switch v.k {
	case KindList, KindVector, KindString:
		return int(v.n)
	case KindMap:
		return (*Map)(v.p).Len()
	case KindSet:
		return (*Set)(v.p).Len()
	}
	return 0
}

// String renders v in canonical form.
func (v Value) String() string { return Print(v) }

// MaxCompareNodes bounds the nodes one Equal, EqualBounded or Hash visits.
// Values share structure, so (reduce (fn [v _] [v v]) 0 (range 64)) is
// cheap to build but has 2^64 nodes; past this bound Hash stops mixing (it
// hashes a prefix, which equality then decides), EqualBounded fails and
// Equal answers false, instead of running for ever.
const MaxCompareNodes = 1 << 24

// Equal reports RTFS equality: same kind (a list equals a vector with equal
// elements), equal contents. (= 1 1.0) is false. It is exact when either
// value has fewer than MaxCompareNodes nodes (a literal, a map key); past
// that bound it answers false unless the values share their storage, so
// code comparing two values that may both be that large uses EqualBounded,
// and an evaluation uses the fuel-charged comparison of =.
func Equal(a, b Value) bool {
	budget := MaxCompareNodes
	return equal(a, b, &budget)
}

// EqualBounded is Equal that fails rather than answer when comparing a and
// b takes more than MaxCompareNodes nodes: the error names the bound.
func EqualBounded(a, b Value) (bool, error) {
	budget := MaxCompareNodes
	eq := equal(a, b, &budget)
	if budget < 0 { // the walk stopped part way: false would be a guess
		return false, &Error{Type: ErrValue, Msg: fmt.Sprintf(
			"values too large to compare: %s and %s have more than %d nodes to visit; compare something smaller, such as an id or a hash",
			PrintLimit(a, 40), PrintLimit(b, 40), MaxCompareNodes)}
	}
	return eq, nil
}

// spend takes v's nodes from budget, stopping once it is spent, so that a
// look-up of v inside a comparison counts against the comparison's bound.
func spend(v Value, budget *int) {
	*budget--
	if *budget < 0 {
		return
	}
	switch v.k {
	case KindList, KindVector:
		for _, it := range v.Items() {
			if spend(it, budget); *budget < 0 {
				return
			}
		}
	case KindMap:
		m := v.AsMap()
		for i := range m.keys {
			if spend(m.keys[i], budget); *budget < 0 {
				return
			}
			if spend(m.vals[i], budget); *budget < 0 {
				return
			}
		}
	case KindSet:
		for _, k := range v.AsSet().m.keys {
			if spend(k, budget); *budget < 0 {
				return
			}
		}
	}
}

func equal(a, b Value, budget *int) bool {
	*budget--
	if *budget < 0 {
		return false
	}
	if a.k != b.k {
		if a.IsSeq() && b.IsSeq() {
			return seqEqual(a.Items(), b.Items(), budget)
		}
		return false
	}
	switch a.k {
	case KindNil:
		return true
	case KindBool, KindInt:
		return a.n == b.n
	case KindFloat:
		return a.AsFloat() == b.AsFloat()
	case KindString, KindKeyword, KindSymbol:
		return a.n == b.n && a.Str() == b.Str()
	case KindList, KindVector:
		return seqEqual(a.Items(), b.Items(), budget)
	case KindMap:
		return mapEqual(a.AsMap(), b.AsMap(), budget)
	case KindSet:
		return setEqual(a.AsSet(), b.AsSet(), budget)
	case KindFn:
		return a.p == b.p
	case KindRegex:
		return a.AsRegex().String() == b.AsRegex().String()
	}
	return false
}

func seqEqual(a, b []Value, budget *int) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] { // shared structure is equal to itself
		return true
	}
	for i := range a {
		if !equal(a[i], b[i], budget) {
			return false
		}
	}
	return true
}

// Hash returns a hash of v consistent with Equal.
func Hash(v Value) uint64 {
	budget := MaxCompareNodes
	return hash(v, &budget)
}

func hash(v Value, budget *int) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	mix := func(x uint64) { h = (h ^ x) * prime }
	*budget--
	if *budget < 0 {
		return h
	}
	switch v.k {
	case KindList, KindVector:
		mix(uint64(KindVector))
		for _, it := range v.Items() {
			mix(hash(it, budget))
		}
		return h
	case KindString, KindKeyword, KindSymbol:
		mix(uint64(v.k))
		s := v.Str()
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		return h
	case KindMap:
		// Order-independent: sum of entry hashes.
		var sum uint64
		m := v.AsMap()
		for i := range m.keys {
			sum += hash(m.keys[i], budget)*31 + hash(m.vals[i], budget)
		}
		mix(uint64(KindMap))
		mix(sum)
		return h
	case KindSet:
		// Order-independent: sum of member hashes.
		var sum uint64
		for _, k := range v.AsSet().m.keys {
			sum += hash(k, budget)
		}
		mix(uint64(KindSet))
		mix(sum)
		return h
	case KindFloat:
		f := v.AsFloat()
		if f == 0 { // 0.0 and -0.0 are equal
			f = 0
		}
		mix(uint64(KindFloat))
		mix(math.Float64bits(f))
		return h
	case KindRegex:
		mix(uint64(KindRegex))
		s := v.AsRegex().String()
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		return h
	default:
		mix(uint64(v.k))
		mix(v.n)
		mix(uint64(uintptr(v.p)))
		return h
	}
}

// MaxPrintNodes is the size above which callers should refuse to print,
// hash or store a value (see Size).
const MaxPrintNodes = 1 << 22

// Size counts the nodes of v (v itself and everything inside it), giving up
// once the count passes limit. Values share structure, so a short program
// can build a value whose printed form is astronomically large, such as
// (reduce (fn [v _] [v v]) 0 (range 64)); code that prints, hashes or
// stores values checks Size first. ok is false when the limit was passed.
func Size(v Value, limit int) (n int, ok bool) {
	n = sizeOf(v, limit)
	return n, n <= limit
}

func sizeOf(v Value, budget int) int {
	switch v.k {
	case KindList, KindVector:
		n := 1
		for _, it := range v.Items() {
			n += sizeOf(it, budget-n)
			if n > budget {
				return n
			}
		}
		return n
	case KindMap:
		n := 1
		v.AsMap().Range(func(k, x Value) bool {
			n += sizeOf(k, budget-n)
			if n <= budget {
				n += sizeOf(x, budget-n)
			}
			return n <= budget
		})
		return n
	case KindSet:
		n := 1
		for _, k := range v.AsSet().m.keys {
			n += sizeOf(k, budget-n)
			if n > budget {
				return n
			}
		}
		return n
	}
	return 1
}
