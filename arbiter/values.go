package arbiter

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ralphloop/ralph/rtfs"
)

// JSON IR carries RTFS data as JSON. The mapping is exact in both
// directions:
//
//   - null, booleans, strings and arrays are nil, booleans, strings and
//     vectors; a number without '.', 'e' or 'E' is an int, any other a float.
//   - An object is a map with keyword keys, except where the capability's
//     schema says the keys are strings ([:map-of :string …]).
//   - A string where the schema wants a keyword (or a keyword enum) becomes
//     that keyword; a leading colon is optional.
//   - {"$rtfs": "text"} is the RTFS form written in text: an expression such
//     as (:stdout ctx), or any value JSON cannot express (:kw, #"re", a map
//     with string keys). Canonical IR writes every such value this way.
const rtfsKey = "$rtfs"

// maxJSONDepth bounds the nesting of JSON values in IR args.
const maxJSONDepth = 64

// node builds syntax nodes without positions (compiled plans are printed
// and read again, which positions them).
func atom(v rtfs.Value) *rtfs.Node { return &rtfs.Node{Kind: rtfs.NodeAtom, Val: v} }

func symbol(name string) *rtfs.Node {
	return &rtfs.Node{Kind: rtfs.NodeSymbol, Val: rtfs.Symbol(name)}
}

func list(items ...*rtfs.Node) *rtfs.Node { return &rtfs.Node{Kind: rtfs.NodeList, Items: items} }

// jsonNode converts a decoded JSON value (numbers as json.Number) to an RTFS
// node shaped by t (nil: no schema). path names the value in errors.
func jsonNode(x any, t *rtfs.Type, path string, depth int) (*rtfs.Node, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d levels; flatten it", path, maxJSONDepth)
	}
	t = unwrapMaybe(t)
	switch v := x.(type) {
	case nil:
		return atom(rtfs.Nil), nil
	case bool:
		return atom(rtfs.Bool(v)), nil
	case json.Number:
		return numberNode(v, path)
	case string:
		if wantsKeyword(t, v) {
			// Only a string that reads as one keyword becomes one: the
			// keyword is printed as it is, so anything else would be RTFS
			// source in the compiled plan.
			k, _, err := keywordKey(v, path, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a keyword; write a name of letters, digits and the marks - . / _ ? ! only", path, truncate(v, 40))
			}
			return atom(k), nil
		}
		return atom(rtfs.String(v)), nil
	case []any:
		n := &rtfs.Node{Kind: rtfs.NodeVector, Items: make([]*rtfs.Node, 0, len(v))}
		for i, it := range v {
			c, err := jsonNode(it, elemType(t, i), fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			n.Items = append(n.Items, c)
		}
		return n, nil
	case map[string]any:
		if src, ok := v[rtfsKey]; ok {
			return rtfsNode(v, src, path)
		}
		keys := sortedKeys(v)
		n := &rtfs.Node{Kind: rtfs.NodeMap, Items: make([]*rtfs.Node, 0, 2*len(v))}
		seen := make(map[string]string, len(keys))
		for _, k := range keys {
			key, ft, err := fieldKey(t, k, path)
			if err != nil {
				return nil, err
			}
			// "message" and ":message" are the same keyword: a map
			// holding both does not read.
			if first, dup := seen[rtfs.Print(key)]; dup {
				return nil, fmt.Errorf("%s: key %s is written twice, as %q and %q; keep one", path, rtfs.Print(key), first, k)
			}
			seen[rtfs.Print(key)] = k
			c, err := jsonNode(v[k], ft, path+"."+k, depth+1)
			if err != nil {
				return nil, err
			}
			n.Items = append(n.Items, atom(key), c)
		}
		return n, nil
	}
	return nil, fmt.Errorf("%s: unsupported JSON value %T", path, x)
}

func numberNode(v json.Number, path string) (*rtfs.Node, error) {
	s := string(v)
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: integer %s does not fit in 64 bits; use a smaller number or a string", path, truncate(s, 40))
		}
		return atom(rtfs.Int(i)), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%s: number %s is out of range; use a smaller number", path, truncate(s, 40))
	}
	return atom(rtfs.Float(f)), nil
}

// rtfsNode reads {"$rtfs": "text"}: exactly one form.
func rtfsNode(obj map[string]any, src any, path string) (*rtfs.Node, error) {
	text, ok := src.(string)
	if !ok || len(obj) != 1 {
		return nil, fmt.Errorf(`%s: {"$rtfs": …} must be an object with only that key, holding a string of RTFS`, path)
	}
	forms, err := rtfs.ReadWith(text, rtfs.ReadOptions{File: path, MaxDepth: maxJSONDepth, MaxLiteral: maxResponseBytes})
	if err != nil {
		return nil, fmt.Errorf(`%s: {"$rtfs": %q} does not read: %s`, path, truncate(text, 60), rtfsMessage(err))
	}
	if len(forms) != 1 {
		return nil, fmt.Errorf(`%s: {"$rtfs": %q} must hold exactly one form, found %d`, path, truncate(text, 60), len(forms))
	}
	if f := planForm(forms[0]); f != "" {
		return nil, fmt.Errorf(`%s: {"$rtfs": …} holds a (%s …) form; an argument must be a pure expression — write each call as a step of its own`, path, f)
	}
	return forms[0], nil
}

// planForm names the first call, step or plan form inside n, or "".
func planForm(n *rtfs.Node) string {
	switch h := n.Head(); h {
	case "call", rtfs.FormStep, rtfs.FormStepLoop, rtfs.FormStepParallel, rtfs.FormWithCompensation, "plan":
		return h
	}
	if n.Meta != nil {
		if f := planForm(n.Meta); f != "" {
			return f
		}
	}
	for _, it := range n.Items {
		if f := planForm(it); f != "" {
			return f
		}
	}
	return ""
}

// rtfsMessage is an RTFS error's text without its file name.
func rtfsMessage(err error) string {
	if re, ok := err.(*rtfs.Error); ok {
		if re.Pos.Line > 0 {
			return fmt.Sprintf("%d:%d: %s", re.Pos.Line, re.Pos.Col, re.Msg)
		}
		return re.Msg
	}
	return err.Error()
}

func unwrapMaybe(t *rtfs.Type) *rtfs.Type {
	for t != nil && t.Kind() == "maybe" {
		t = t.Elems()[0]
	}
	return t
}

// wantsKeyword reports whether the schema wants a keyword where JSON has s.
func wantsKeyword(t *rtfs.Type, s string) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case "keyword":
		return true
	case "enum", "=":
		name := strings.TrimPrefix(s, ":")
		matched := false
		src := t.Value().Items()
		for _, v := range src[1:] {
			if v.Kind() == rtfs.KindString && v.Str() == s {
				return false
			}
			if v.Kind() == rtfs.KindKeyword && v.Str() == name {
				matched = true
			}
		}
		return matched
	case "or":
		for _, e := range t.Elems() {
			if e.Kind() == "string" {
				return false
			}
		}
		for _, e := range t.Elems() {
			if wantsKeyword(e, s) {
				return true
			}
		}
	}
	return false
}

// elemType is the type of element i of a sequence of type t.
func elemType(t *rtfs.Type, i int) *rtfs.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case "vector":
		return t.Elems()[0]
	case "tuple":
		if i < len(t.Elems()) {
			return t.Elems()[i]
		}
	}
	return nil
}

// fieldKey is the RTFS key for JSON object key k under type t, and the
// type of its value.
func fieldKey(t *rtfs.Type, k, path string) (rtfs.Value, *rtfs.Type, error) {
	if t != nil {
		switch t.Kind() {
		case "map":
			for _, f := range t.Fields() {
				if (f.Key.Kind() == rtfs.KindKeyword && f.Key.Str() == strings.TrimPrefix(k, ":")) || (f.Key.Kind() == rtfs.KindString && f.Key.Str() == k) {
					return f.Key, f.Type, nil
				}
			}
		case "map-of":
			kt, vt := unwrapMaybe(t.Elems()[0]), t.Elems()[1]
			if kt.Kind() == "string" {
				return rtfs.String(k), vt, nil
			}
			return keywordKey(k, path, vt)
		}
	}
	return keywordKey(k, path, nil)
}

func keywordKey(k, path string, vt *rtfs.Type) (rtfs.Value, *rtfs.Type, error) {
	name := strings.TrimPrefix(k, ":")
	if v, err := rtfs.ReadValue(":" + name); err != nil || v.Kind() != rtfs.KindKeyword || v.Str() != name {
		return rtfs.Nil, nil, fmt.Errorf("%s: key %q cannot be a keyword; use letters, digits and the marks - . / _ ? ! only", path, truncate(k, 40))
	}
	return rtfs.Keyword(name), vt, nil
}

// nodeJSON converts a syntax node to canonical JSON IR data. Data JSON can
// hold exactly (nil, booleans, ints, finite floats, strings, vectors, maps
// whose keys are all keywords) becomes JSON; anything else becomes
// {"$rtfs": canonical text}.
func nodeJSON(n *rtfs.Node) any {
	if n.Meta != nil {
		return map[string]any{rtfsKey: rtfs.PrintNode(n)}
	}
	switch n.Kind {
	case rtfs.NodeAtom:
		v := n.Val
		switch v.Kind() {
		case rtfs.KindNil:
			return nil
		case rtfs.KindBool:
			return v.AsBool()
		case rtfs.KindInt:
			return json.Number(strconv.FormatInt(v.AsInt(), 10))
		case rtfs.KindFloat:
			f := v.AsFloat()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				break
			}
			s := strconv.FormatFloat(f, 'g', -1, 64)
			if !strings.ContainsAny(s, ".eE") {
				s += ".0"
			}
			return json.Number(s)
		case rtfs.KindString:
			return v.Str()
		}
	case rtfs.NodeVector:
		out := make([]any, len(n.Items))
		for i, it := range n.Items {
			out[i] = nodeJSON(it)
		}
		return out
	case rtfs.NodeMap:
		if obj, ok := keywordObject(n); ok {
			return obj
		}
	}
	return map[string]any{rtfsKey: rtfs.PrintNode(n)}
}

// keywordObject converts a map node whose keys are all keywords.
func keywordObject(n *rtfs.Node) (map[string]any, bool) {
	obj := make(map[string]any, len(n.Items)/2)
	for i := 0; i+1 < len(n.Items); i += 2 {
		k := n.Items[i]
		if k.Kind != rtfs.NodeAtom || k.Val.Kind() != rtfs.KindKeyword || k.Meta != nil || k.Val.Str() == rtfsKey {
			return nil, false
		}
		obj[k.Val.Str()] = nodeJSON(n.Items[i+1])
	}
	return obj, true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
