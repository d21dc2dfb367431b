package rtfs

import (
	"fmt"
	"strings"
)

// Type is a parsed RTFS type expression (a schema), written as data:
//
//	:any :nil :boolean :int :float :number :string :keyword :symbol :fn :regex
//	[:vector T]  [:tuple T1 T2 …]  [:map [:key T] [:key {:optional true} T] …]
//	[:map-of K V]  [:or T…]  [:and T…]  [:maybe T]  [:enum v…]  [:= v]
//
// Capabilities declare their input and output schemas this way, e.g.
// [:map [:message :string]] or [:tuple :number :number].
type Type struct {
	src    Value
	kind   string
	elems  []*Type     // vector (1), tuple, or, and, maybe (1), map-of (2)
	fields []typeField // map
	vals   []Value     // enum, =
}

type typeField struct {
	key      Value
	optional bool
	t        *Type
}

var primitiveTypes = map[string]func(Value) bool{
	"any":     func(Value) bool { return true },
	"nil":     func(v Value) bool { return v.IsNil() },
	"boolean": func(v Value) bool { return v.Kind() == KindBool },
	"bool":    func(v Value) bool { return v.Kind() == KindBool },
	"int":     func(v Value) bool { return v.Kind() == KindInt },
	"float":   func(v Value) bool { return v.Kind() == KindFloat },
	"number":  func(v Value) bool { return v.IsNumber() },
	"string":  func(v Value) bool { return v.Kind() == KindString },
	"keyword": func(v Value) bool { return v.Kind() == KindKeyword },
	"symbol":  func(v Value) bool { return v.Kind() == KindSymbol },
	"fn":      func(v Value) bool { return v.Kind() == KindFn },
	"regex":   func(v Value) bool { return v.Kind() == KindRegex },
	"map":     func(v Value) bool { return v.Kind() == KindMap },
	"vector":  func(v Value) bool { return v.IsSeq() },
}

// ParseType reads a type expression from its source text.
func ParseType(src string) (*Type, error) {
	v, err := ReadValue(src)
	if err != nil {
		return nil, err
	}
	return TypeOf(v)
}

// MustParseType is ParseType for schemas written in Go source; it panics on a
// malformed literal, which is a programming error.
func MustParseType(src string) *Type {
	t, err := ParseType(src)
	if err != nil {
		panic(fmt.Sprintf("rtfs: bad type literal %q: %v", src, err))
	}
	return t
}

// TypeOf parses a type expression held as a value.
func TypeOf(v Value) (*Type, error) {
	t := &Type{src: v}
	if v.Kind() == KindKeyword {
		if primitiveTypes[v.Str()] == nil {
			return nil, fmt.Errorf("unknown type %s; use one of :any :nil :boolean :int :float :number :string :keyword :map :vector", Print(v))
		}
		t.kind = v.Str()
		return t, nil
	}
	items := v.Items()
	if v.Kind() != KindVector || len(items) == 0 || items[0].Kind() != KindKeyword {
		return nil, fmt.Errorf("type %s must be a keyword like :string or a vector like [:vector :int]", PrintLimit(v, 60))
	}
	t.kind = items[0].Str()
	if err := t.setArgs(items[1:]); err != nil {
		return nil, err
	}
	return t, nil
}

// setArgs reads the arguments of a constructed type [:kind args…] into t
// by its kind: element types, map fields or values.
func (t *Type) setArgs(args []Value) error {
	switch t.kind {
	case "vector", "maybe":
		return t.setElems(args, 1)
	case "map-of":
		return t.setElems(args, 2)
	case "tuple", "or", "and":
		return t.setElems(args, -1)
	case "enum":
		t.vals = args
		return nil
	case "=":
		t.vals = args
		return t.needArgs(args, 1)
	case "map":
		return t.setFields(args)
	}
	return fmt.Errorf("unknown type constructor :%s; use :vector :tuple :map :map-of :or :and :maybe :enum or :=", t.kind)
}

// needArgs fails unless t has n arguments.
func (t *Type) needArgs(args []Value, n int) error {
	if len(args) != n {
		return fmt.Errorf("[:%s …] takes %d type argument(s), got %d", t.kind, n, len(args))
	}
	return nil
}

// setElems parses each of args as an element type of t; n is how many it
// must have, −1 for any number.
func (t *Type) setElems(args []Value, n int) error {
	if n >= 0 {
		if err := t.needArgs(args, n); err != nil {
			return err
		}
	}
	for _, a := range args {
		e, err := TypeOf(a)
		if err != nil {
			return err
		}
		t.elems = append(t.elems, e)
	}
	return nil
}

// setFields parses the fields of a [:map …] type: [key type] or
// [key {:optional true} type].
func (t *Type) setFields(args []Value) error {
	for _, f := range args {
		fi := f.Items()
		if f.Kind() != KindVector || len(fi) < 2 || len(fi) > 3 {
			return fmt.Errorf("map field %s must be [key type] or [key {:optional true} type]", PrintLimit(f, 60))
		}
		field := typeField{key: fi[0]}
		if len(fi) == 3 {
			field.optional = fi[1].AsMap().GetKey("optional").Truthy()
		}
		var err error
		if field.t, err = TypeOf(fi[len(fi)-1]); err != nil {
			return err
		}
		t.fields = append(t.fields, field)
	}
	return nil
}

// Value returns the type expression as data.
func (t *Type) Value() Value { return t.src }

// String prints the type expression canonically.
func (t *Type) String() string { return Print(t.src) }

// IsMap reports whether the type is a [:map …] with named fields.
func (t *Type) IsMap() bool { return t.kind == "map" && t.fields != nil }

// FieldKeys returns the keys of a [:map …] type in declaration order.
func (t *Type) FieldKeys() []Value {
	out := make([]Value, len(t.fields))
	for i, f := range t.fields {
		out[i] = f.key
	}
	return out
}

// Kind names the type: a primitive ("string", "int", "any", "map", …) or
// a constructor ("vector", "tuple", "map", "map-of", "or", "and", "maybe",
// "enum", "=").
func (t *Type) Kind() string { return t.kind }

// Elems returns the element types of [:vector T], [:tuple T…], [:map-of K V],
// [:maybe T], [:or T…] and [:and T…], in order; nil for other types.
func (t *Type) Elems() []*Type { return t.elems }

// Field is one field of a [:map …] type.
type Field struct {
	Key      Value
	Optional bool
	Type     *Type
}

// Fields returns the fields of a [:map …] type in declaration order.
func (t *Type) Fields() []Field {
	out := make([]Field, len(t.fields))
	for i, f := range t.fields {
		out[i] = Field{Key: f.key, Optional: f.optional, Type: f.t}
	}
	return out
}

// TypeError says where a value departs from its type.
type TypeError struct {
	Path []string // :key for map fields, [i] for positions
	Want string
	Got  Value
}

func (e *TypeError) Error() string {
	got := e.Got.Kind().String()
	if e.Got.IsNil() {
		got = "nil"
	}
	msg := fmt.Sprintf("expected %s, got %s", e.Want, got)
	if e.Want == "no such key" {
		msg = "is not a known key"
	}
	if len(e.Path) == 0 {
		return msg
	}
	return strings.Join(e.Path, "") + " " + msg
}

// Check validates v against the type and returns a *TypeError naming the
// exact path of the first mismatch (e.g. ":message expected string, got int").
func (t *Type) Check(v Value) error {
	return t.check(v, nil)
}

// check validates v at path, the path of the value within the one Check
// was given.
func (t *Type) check(v Value, path []string) error {
	if ok := primitiveTypes[t.kind]; ok != nil && t.elems == nil && t.fields == nil {
		if !ok(v) {
			return mismatch(path, t.kind, v)
		}
		return nil
	}
	switch t.kind {
	case "vector":
		return t.checkVector(v, path)
	case "tuple":
		return t.checkTuple(v, path)
	case "map":
		return t.checkMap(v, path)
	case "map-of":
		return t.checkMapOf(v, path)
	case "maybe":
		if v.IsNil() {
			return nil
		}
		return t.elems[0].check(v, path)
	case "or":
		for _, e := range t.elems {
			if e.check(v, path) == nil {
				return nil
			}
		}
		return mismatch(path, t.String(), v)
	case "and":
		for _, e := range t.elems {
			if err := e.check(v, path); err != nil {
				return err
			}
		}
	case "enum", "=":
		for _, x := range t.vals {
			if Equal(x, v) {
				return nil
			}
		}
		return mismatch(path, "one of "+Print(Vector(t.vals)), v)
	}
	return nil
}

// mismatch says that v at path is not what was wanted.
func mismatch(path []string, want string, v Value) error {
	return &TypeError{Path: append([]string(nil), path...), Want: want, Got: v}
}

// checkVector checks [:vector T]: a sequence whose every item is a T.
func (t *Type) checkVector(v Value, path []string) error {
	if !v.IsSeq() {
		return mismatch(path, "vector", v)
	}
	for i, it := range v.Items() {
		if err := t.elems[0].check(it, append(path, fmt.Sprintf("[%d]", i))); err != nil {
			return err
		}
	}
	return nil
}

// checkTuple checks [:tuple T…]: a sequence of exactly those types.
func (t *Type) checkTuple(v Value, path []string) error {
	items := v.Items()
	if !v.IsSeq() || len(items) != len(t.elems) {
		return mismatch(path, fmt.Sprintf("a vector of %d", len(t.elems)), v)
	}
	for i, it := range items {
		if err := t.elems[i].check(it, append(path, fmt.Sprintf("[%d]", i))); err != nil {
			return err
		}
	}
	return nil
}

// checkMap checks [:map …]: every required field present, every field of
// its type, and no key the type does not name.
func (t *Type) checkMap(v Value, path []string) error {
	if v.Kind() != KindMap {
		return mismatch(path, "map", v)
	}
	m := v.AsMap()
	for _, f := range t.fields {
		fv, ok := m.Get(f.key)
		if !ok || fv.IsNil() {
			if f.optional {
				continue
			}
			if !ok {
				return &TypeError{Path: append(append([]string(nil), path...), Print(f.key)), Want: f.t.String() + " (required)", Got: Nil}
			}
		}
		if err := f.t.check(fv, append(path, Print(f.key))); err != nil {
			return err
		}
	}
	var unknown error
	m.Range(func(k, _ Value) bool {
		for _, f := range t.fields {
			if Equal(f.key, k) {
				return true
			}
		}
		unknown = &TypeError{Path: append(append([]string(nil), path...), Print(k)), Want: "no such key", Got: Nil}
		return false
	})
	return unknown
}

// checkMapOf checks [:map-of K V]: every key a K and every value a V.
func (t *Type) checkMapOf(v Value, path []string) error {
	if v.Kind() != KindMap {
		return mismatch(path, "map", v)
	}
	var err error
	v.AsMap().Range(func(k, val Value) bool {
		p := append(path, Print(k))
		if err = t.elems[0].check(k, p); err == nil {
			err = t.elems[1].check(val, p)
		}
		return err == nil
	})
	return err
}
