package rtfs

import (
	"cmp"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file bounds the operations that walk values. Values share
// structure, so (reduce (fn [v _] (conj v v)) [] (range 40)) builds in
// microseconds a vector of 2^40 nodes. Everything an evaluation does to a
// value's insides — equality, ordering, hashing for distinct, map keys and
// set members, printing — visits nodes one at a time and charges one unit
// of fuel per node, so a walk ends in the fuel error (which checks
// cancellation on every refill) instead of exhausting time or memory, and
// never answers a wrong result. Error messages print at most a fixed
// budget of a value (PrintLimit) without walking the rest.

// MaxKeyBytes bounds the canonical text of a map key or set member: maps
// order their keys by that text, so a key must be small enough to print.
const MaxKeyBytes = 64 << 10

// PrintLimit returns v's canonical text cut to at most max bytes (plus
// "…" when cut). It stops printing once max bytes are written, so it costs
// O(max) however large v is.
func PrintLimit(v Value, max int) string {
	buf := appendLimited(make([]byte, 0, min(max+8, 256)), v, max)
	if len(buf) <= max {
		return string(buf)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(buf[cut]) {
		cut--
	}
	return string(buf[:cut]) + "…"
}

// appendLimited is AppendValue that returns as soon as buf holds more than
// max bytes.
func appendLimited(buf []byte, v Value, max int) []byte {
	if len(buf) > max {
		return buf
	}
	switch v.k {
	case KindString:
		s := v.Str()
		if room := max - len(buf); len(s) > room {
			s = s[:room+1]
		}
		return appendQuoted(buf, s)
	case KindList, KindVector:
		open, closer := byte('('), byte(')')
		if v.k == KindVector {
			open, closer = '[', ']'
		}
		buf = append(buf, open)
		for i, it := range v.Items() {
			if i > 0 {
				buf = append(buf, ' ')
			}
			if buf = appendLimited(buf, it, max); len(buf) > max {
				return buf
			}
		}
		return append(buf, closer)
	case KindMap:
		buf = append(buf, '{')
		first := true
		v.AsMap().Range(func(k, val Value) bool {
			if !first {
				buf = append(buf, ' ')
			}
			first = false
			buf = append(appendLimited(buf, k, max), ' ')
			buf = appendLimited(buf, val, max)
			return len(buf) <= max
		})
		return append(buf, '}')
	case KindSet:
		buf = append(buf, '#', '{')
		first := true
		v.AsSet().Range(func(x Value) bool {
			if !first {
				buf = append(buf, ' ')
			}
			first = false
			buf = appendLimited(buf, x, max)
			return len(buf) <= max
		})
		return append(buf, '}')
	}
	return AppendValue(buf, v)
}

// poll returns the cancellation error once the evaluation's context is
// done; builtins that loop without charging fuel call it now and then.
func (m *Machine) poll() error {
	if err := m.ctx.Err(); err != nil {
		return &Error{Type: ErrCancelled, Msg: "evaluation cancelled: " + err.Error(), cause: err}
	}
	return nil
}

// walk charges one unit of fuel for every node of v (v itself and
// everything inside it, shared parts once per appearance), so that a
// look-up or hash of v afterwards is paid for.
func (m *Machine) walk(v Value) error {
	switch v.k {
	case KindList, KindVector:
		if err := m.tick(); err != nil {
			return err
		}
		for _, it := range v.Items() {
			if err := m.walk(it); err != nil {
				return err
			}
		}
	case KindMap:
		if err := m.tick(); err != nil {
			return err
		}
		mp := v.AsMap()
		for i := range mp.keys {
			if err := m.walk(mp.keys[i]); err != nil {
				return err
			}
			if err := m.walk(mp.vals[i]); err != nil {
				return err
			}
		}
	case KindSet:
		if err := m.tick(); err != nil {
			return err
		}
		for _, k := range v.AsSet().m.keys {
			if err := m.walk(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// probe charges for looking k up in coll: hashing and comparing it walks
// k when coll is a map or a set.
func (m *Machine) probe(coll, k Value) error {
	if k.k < KindList || (coll.k != KindMap && coll.k != KindSet) {
		return nil
	}
	return m.walk(k)
}

// key checks that k can be a map key or set member: its canonical text is
// at most MaxKeyBytes. It charges a unit of fuel per node it visits.
func (m *Machine) key(k Value) error {
	switch {
	case k.k < KindString || k.k == KindKeyword || k.k == KindFn || k.k == KindRegex:
		return nil
	case k.k == KindString && k.n <= MaxKeyBytes/2: // quoting at most doubles it
		return nil
	}
	n, err := m.keyBytes(k, 0)
	if err != nil {
		return err
	}
	if n > MaxKeyBytes {
		return &Error{Type: ErrValue, Msg: fmt.Sprintf("a map key or set member must print in at most %d bytes; %s is larger: key by something smaller, such as an id",
			MaxKeyBytes, PrintLimit(k, 60))}
	}
	return nil
}

// keys is key for each of xs.
func (m *Machine) keys(xs []Value) error {
	for _, x := range xs {
		if err := m.key(x); err != nil {
			return err
		}
	}
	return nil
}

// positioned gives an *Error without a position the position pos.
func positioned(err error, pos Pos) error {
	if e, ok := err.(*Error); ok {
		return withPos(e, pos)
	}
	return err
}

// keyBytes adds to have an upper bound of the printed size of v, stopping
// once it passes MaxKeyBytes.
func (m *Machine) keyBytes(v Value, have int) (int, error) {
	if have > MaxKeyBytes {
		return have, nil
	}
	if err := m.tick(); err != nil {
		return 0, err
	}
	var err error
	switch v.k {
	case KindString:
		return have + 2*len(v.Str()) + 2, nil
	case KindKeyword, KindSymbol:
		return have + len(v.Str()) + 1, nil
	case KindList, KindVector:
		have += 2
		for _, it := range v.Items() {
			if have, err = m.keyBytes(it, have+1); err != nil || have > MaxKeyBytes {
				return have, err
			}
		}
		return have, nil
	case KindMap:
		have += 2
		mp := v.AsMap()
		for i := range mp.keys {
			if have, err = m.keyBytes(mp.keys[i], have+1); err != nil || have > MaxKeyBytes {
				return have, err
			}
			if have, err = m.keyBytes(mp.vals[i], have+1); err != nil || have > MaxKeyBytes {
				return have, err
			}
		}
		return have, nil
	case KindSet:
		have += 3
		for _, k := range v.AsSet().m.keys {
			if have, err = m.keyBytes(k, have+1); err != nil || have > MaxKeyBytes {
				return have, err
			}
		}
		return have, nil
	case KindRegex:
		return have + 2*len(v.AsRegex().String()) + 3, nil
	}
	return have + 32, nil // numbers, nil, booleans, fns
}

// equal is Equal charging a unit of fuel per node pair it visits; it
// fails with the fuel error rather than answer when the budget runs out.
func (m *Machine) equal(a, b Value) (bool, error) {
	if a.k < KindList && b.k < KindList {
		return Equal(a, b), nil
	}
	if err := m.tick(); err != nil {
		return false, err
	}
	if a.k != b.k && !(a.IsSeq() && b.IsSeq()) {
		return false, nil
	}
	switch a.k {
	case KindList, KindVector:
		x, y := a.Items(), b.Items()
		if len(x) != len(y) {
			return false, nil
		}
		if len(x) == 0 || &x[0] == &y[0] { // shared storage is equal to itself
			return true, nil
		}
		for i := range x {
			if eq, err := m.equal(x[i], y[i]); !eq || err != nil {
				return false, err
			}
		}
		return true, nil
	case KindMap:
		p, q := a.AsMap(), b.AsMap()
		if p == q {
			return true, nil
		}
		if p.Len() != q.Len() {
			return false, nil
		}
		for i, k := range p.keys {
			if err := m.walk(k); err != nil {
				return false, err
			}
			v, ok := q.Get(k)
			if !ok {
				return false, nil
			}
			if eq, err := m.equal(p.vals[i], v); !eq || err != nil {
				return false, err
			}
		}
		return true, nil
	case KindSet:
		p, q := a.AsSet(), b.AsSet()
		if p == q {
			return true, nil
		}
		if p.Len() != q.Len() {
			return false, nil
		}
		for _, k := range p.m.keys {
			if err := m.walk(k); err != nil {
				return false, err
			}
			if !q.Has(k) {
				return false, nil
			}
		}
		return true, nil
	}
	return Equal(a, b), nil
}

// hash is Hash after charging for v's nodes.
func (m *Machine) hash(v Value) (uint64, error) {
	if err := m.walk(v); err != nil {
		return 0, err
	}
	return Hash(v), nil
}

// compare is the natural order of sort and compare: nil first, numbers
// numerically, strings lexically, keywords and symbols by name, false
// before true, sequences by length and then element by element. Other
// kinds, and values of different kinds, cannot be compared. Each node
// pair it visits costs a unit of fuel.
func (m *Machine) compare(name string, a, b Value) (int, error) {
	switch {
	case a.k == KindNil || b.k == KindNil:
		switch {
		case a.k == b.k:
			return 0, nil
		case a.k == KindNil:
			return -1, nil
		}
		return 1, nil
	case a.IsNumber() && b.IsNumber():
		return compareNum(a, b), nil
	case a.IsSeq() && b.IsSeq():
		if err := m.tick(); err != nil {
			return 0, err
		}
		x, y := a.Items(), b.Items()
		if len(x) != len(y) {
			return cmp.Compare(len(x), len(y)), nil
		}
		if len(x) == 0 || &x[0] == &y[0] {
			return 0, nil
		}
		for i := range x {
			if c, err := m.compare(name, x[i], y[i]); c != 0 || err != nil {
				return c, err
			}
		}
		return 0, nil
	case a.k == b.k && (a.k == KindString || a.k == KindKeyword || a.k == KindSymbol):
		return strings.Compare(a.Str(), b.Str()), nil
	case a.k == KindBool && b.k == KindBool:
		return cmp.Compare(int(a.n), int(b.n)), nil
	}
	return 0, &Error{Type: ErrType, Msg: fmt.Sprintf("%s cannot compare %s %s with %s %s", name,
		a.k, PrintLimit(a, 40), b.k, PrintLimit(b, 40))}
}
