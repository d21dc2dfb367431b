package rtfs

import (
	"context"
	"math"
)

// This file holds the builtins models write most often that the core
// library lacked: sets, int/float coercion, map-indexed, mapcat, subvec,
// partition-by, and the logging builtins println, prn and log.

// builtinSet is (set coll): the distinct elements of coll as a set.
func builtinSet(m *Machine, a []Value) (Value, error) {
	if a[0].k == KindSet {
		return a[0], nil
	}
	xs, err := seqItems(m, "set", a[0])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "set", len(xs)); err != nil {
		return Nil, err
	}
	if err := m.keys(xs); err != nil {
		return Nil, err
	}
	return SetValue(NewSet(xs...)), nil
}

// builtinHashSet is (hash-set x…).
func builtinHashSet(m *Machine, a []Value) (Value, error) {
	if err := produce(m, "hash-set", len(a)); err != nil {
		return Nil, err
	}
	if err := m.keys(a); err != nil {
		return Nil, err
	}
	return SetValue(NewSet(a...)), nil
}

// builtinDisj is (disj set x…): set without the xs; (disj nil x) is nil.
func builtinDisj(m *Machine, a []Value) (Value, error) {
	switch a[0].k {
	case KindNil:
		return Nil, nil
	case KindSet:
	default:
		return Nil, typeErr("disj", "a set or nil", a[0])
	}
	s := a[0].AsSet()
	if err := chargeMapCopy(m, s.Len()*max(1, len(a)-1)); err != nil {
		return Nil, err
	}
	for _, x := range a[1:] {
		if err := m.walk(x); err != nil {
			return Nil, err
		}
	}
	return SetValue(s.Disj(a[1:]...)), nil
}

// builtinInt truncates a number toward zero, as Clojure's int does; a
// float outside the int64 range or NaN is an error.
func builtinInt(_ *Machine, a []Value) (Value, error) {
	v := a[0]
	switch v.k {
	case KindInt:
		return v, nil
	case KindFloat:
		f := math.Trunc(v.AsFloat())
		if math.IsNaN(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return Nil, &Error{Type: ErrArith, Msg: "int: " + Print(v) + " does not fit in an int64"}
		}
		return Int(int64(f)), nil
	}
	return Nil, typeErr("int", "a number", v)
}

// builtinFloat converts a number to a float (Clojure's float and double).
func builtinFloat(name string) func(*Machine, []Value) (Value, error) {
	return func(_ *Machine, a []Value) (Value, error) {
		if !a[0].IsNumber() {
			return Nil, typeErr(name, "a number", a[0])
		}
		return Float(a[0].AsFloat()), nil
	}
}

// builtinMapIndexed is (map-indexed f coll): (f i x) for each element.
func builtinMapIndexed(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "map-indexed", a[1])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "map-indexed", len(xs)); err != nil {
		return Nil, err
	}
	out := make([]Value, len(xs))
	for i, x := range xs {
		if out[i], err = m.Apply(a[0], Int(int64(i)), x); err != nil {
			return Nil, err
		}
	}
	return Vector(out), nil
}

// builtinMapcat is (mapcat f coll…): the results of map concatenated.
func builtinMapcat(m *Machine, a []Value) (Value, error) {
	parts, err := builtinMap(m, a)
	if err != nil {
		return Nil, err
	}
	var out []Value
	for _, p := range parts.Items() {
		xs, err := seqItems(m, "mapcat", p)
		if err != nil {
			return Nil, err
		}
		if err := produce(m, "mapcat", len(xs)); err != nil {
			return Nil, err
		}
		out = append(out, xs...)
	}
	return Vector(out), nil
}

// builtinSubvec is (subvec v start end?): shares v's elements.
func builtinSubvec(m *Machine, a []Value) (Value, error) {
	if a[0].k != KindVector {
		return Nil, typeErr("subvec", "a vector", a[0])
	}
	items := a[0].Items()
	if err := needInt("subvec", a[1]); err != nil {
		return Nil, err
	}
	start, end := a[1].AsInt(), int64(len(items))
	if len(a) == 3 {
		if err := needInt("subvec", a[2]); err != nil {
			return Nil, err
		}
		end = a[2].AsInt()
	}
	if start < 0 || end < start || end > int64(len(items)) {
		return Nil, &Error{Type: ErrIndex, Msg: "subvec range " + itoa(start) + ".." + itoa(end) + " out of range for vector of " + itoa(int64(len(items)))}
	}
	return Vector(items[start:end]), nil
}

// builtinPartitionBy is (partition-by f coll): runs of elements for which
// (f x) gives equal values.
func builtinPartitionBy(m *Machine, a []Value) (Value, error) {
	xs, err := seqItems(m, "partition-by", a[1])
	if err != nil {
		return Nil, err
	}
	if err := produce(m, "partition-by", len(xs)); err != nil {
		return Nil, err
	}
	var out []Value
	start := 0
	var prev Value
	for i, x := range xs {
		k, err := m.Apply(a[0], x)
		if err != nil {
			return Nil, err
		}
		if i > 0 {
			eq, err := m.equal(k, prev)
			if err != nil {
				return Nil, err
			}
			if !eq {
				out = append(out, Vector(xs[start:i]))
				start = i
			}
		}
		prev = k
	}
	if len(xs) > 0 {
		out = append(out, Vector(xs[start:]))
	}
	return Vector(out), nil
}

// Logger is implemented by hosts that record what println, prn and log
// print: the orchestrator makes each a log action on the causal chain. A
// pure program writes the line to the log its caller gave instead
// (Options.Log; ralph eval's is stderr), or nowhere.
type Logger interface {
	Log(ctx context.Context, req *LogRequest) error
}

// LogRequest is one line printed by println, prn or log.
type LogRequest struct {
	Fn   string // "println", "prn" or "log"
	Text string // the line, without its newline
	Pos  Pos
	File string
}

// logLine renders args as println (str-like, space-separated) or prn
// (readable) does, and hands the line to the host or the caller's log.
func logLine(name string, readable bool) func(*Machine, []Value) (Value, error) {
	return func(m *Machine, a []Value) (Value, error) {
		var buf []byte
		for i, v := range a {
			if i > 0 {
				buf = append(buf, ' ')
			}
			var err error
			if readable || v.k != KindString {
				buf, err = appendPrinted(m, buf, v)
			} else {
				buf, err = appendStr(m, buf, v)
			}
			if err != nil {
				return Nil, err
			}
		}
		req := &LogRequest{Fn: name, Text: string(buf), Pos: m.callPos, File: m.file}
		if lg, ok := m.host.(Logger); ok {
			if err := lg.Log(m.ctx, req); err != nil {
				return Nil, err
			}
			return Nil, nil
		}
		if m.logw != nil {
			buf = append(buf, '\n')
			if _, err := m.logw.Write(buf); err != nil {
				return Nil, &Error{Type: ErrHost, Msg: name + ": cannot write the log: " + err.Error(), cause: err}
			}
		}
		return Nil, nil
	}
}

func init() {
	def("set", 1, 1, builtinSet)
	def("hash-set", 0, -1, builtinHashSet)
	def("disj", 1, -1, builtinDisj)
	def("int", 1, 1, builtinInt)
	def("float", 1, 1, builtinFloat("float"))
	def("double", 1, 1, builtinFloat("double"))
	def("map-indexed", 2, 2, builtinMapIndexed)
	def("mapcat", 2, -1, builtinMapcat)
	def("subvec", 2, 3, builtinSubvec)
	def("partition-by", 2, 2, builtinPartitionBy)
	for _, b := range []struct {
		name     string
		readable bool
	}{{"println", false}, {"prn", true}, {"log", false}} {
		def(b.name, 0, -1, logLine(b.name, b.readable))
		coreBuiltins[b.name].positioned = true
	}
}
