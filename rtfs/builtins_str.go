package rtfs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// This file holds the string, regex, keyword and parsing builtins.
// Indexes into strings count characters (runes), not bytes.

// appendStr appends v as str renders it: nil as nothing, a string as its
// text, anything else in canonical printed form.
func appendStr(m *Machine, buf []byte, v Value) ([]byte, error) {
	switch v.k {
	case KindNil:
		return buf, nil
	case KindString:
		if err := chargeText(m, len(buf), v.Len()); err != nil {
			return nil, err
		}
		return append(buf, v.Str()...), nil
	}
	return appendPrinted(m, buf, v)
}

// chargeText charges for appending n bytes to text of length have.
func chargeText(m *Machine, have, n int) error {
	if err := chargeBytes(m, n); err != nil {
		return err
	}
	if have+n > maxElements {
		return &Error{Type: ErrValue, Msg: fmt.Sprintf("string would be longer than the limit of %d bytes", maxElements)}
	}
	return nil
}

// chargeElems charges for printing a collection of n elements (each at
// least two bytes: itself and a space) onto text of length have.
func chargeElems(m *Machine, have, n int) error {
	if err := m.Charge(int64(n) + 1); err != nil {
		return err
	}
	return chargeText(m, have, 2*n+2)
}

// appendPrinted is AppendValue charging fuel for every element and byte,
// so printing a structure that shares itself many times over ends in a
// fuel error instead of exhausting memory.
func appendPrinted(m *Machine, buf []byte, v Value) ([]byte, error) {
	var err error
	switch v.k {
	case KindList, KindVector:
		items := v.Items()
		if err := chargeElems(m, len(buf), len(items)); err != nil {
			return nil, err
		}
		if v.k == KindList && len(items) == 2 && items[0].k == KindSymbol && items[0].Str() == "quote" {
			return appendPrinted(m, append(buf, '\''), items[1])
		}
		open, closer := byte('('), byte(')')
		if v.k == KindVector {
			open, closer = '[', ']'
		}
		buf = append(buf, open)
		for i, it := range items {
			if i > 0 {
				buf = append(buf, ' ')
			}
			if buf, err = appendPrinted(m, buf, it); err != nil {
				return nil, err
			}
		}
		return append(buf, closer), nil
	case KindMap:
		mp := v.AsMap()
		if err := chargeElems(m, len(buf), 2*mp.Len()); err != nil {
			return nil, err
		}
		buf = append(buf, '{')
		first := true
		mp.Range(func(k, val Value) bool {
			if !first {
				buf = append(buf, ' ')
			}
			first = false
			if buf, err = appendPrinted(m, buf, k); err != nil {
				return false
			}
			buf = append(buf, ' ')
			buf, err = appendPrinted(m, buf, val)
			return err == nil
		})
		if err != nil {
			return nil, err
		}
		return append(buf, '}'), nil
	case KindSet:
		set := v.AsSet()
		if err := chargeElems(m, len(buf), set.Len()); err != nil {
			return nil, err
		}
		buf = append(buf, '#', '{')
		var err error
		for i, x := range set.Members() {
			if i > 0 {
				buf = append(buf, ' ')
			}
			if buf, err = appendPrinted(m, buf, x); err != nil {
				return nil, err
			}
		}
		return append(buf, '}'), nil
	}
	if err := chargeText(m, len(buf), len(v.Str())); err != nil {
		return nil, err
	}
	return AppendValue(buf, v), nil
}

// bytesString turns a buffer the caller will not touch again into a string
// without copying it.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func builtinStr(m *Machine, a []Value) (Value, error) {
	if len(a) == 1 && a[0].k == KindString {
		return a[0], nil
	}
	var buf []byte
	for _, v := range a {
		var err error
		if buf, err = appendStr(m, buf, v); err != nil {
			return Nil, err
		}
	}
	return String(bytesString(buf)), nil
}

func builtinPrStr(m *Machine, a []Value) (Value, error) {
	var buf []byte
	for i, v := range a {
		if i > 0 {
			buf = append(buf, ' ')
		}
		var err error
		if buf, err = appendPrinted(m, buf, v); err != nil {
			return Nil, err
		}
	}
	return String(bytesString(buf)), nil
}

func needString(name string, v Value) (string, error) {
	if v.k != KindString {
		return "", typeErr(name, "a string", v)
	}
	return v.Str(), nil
}

// strFn wraps a string-to-string function, charging for the text.
func strFn(name string, f func(string) string) func(*Machine, []Value) (Value, error) {
	return func(m *Machine, a []Value) (Value, error) {
		s, err := needString(name, a[0])
		if err != nil {
			return Nil, err
		}
		if err := chargeBytes(m, len(s)); err != nil {
			return Nil, err
		}
		return String(f(s)), nil
	}
}

// strPred wraps a test of a string against a second string.
func strPred(name string, f func(s, sub string) bool) func(*Machine, []Value) (Value, error) {
	return func(m *Machine, a []Value) (Value, error) {
		s, err := needString(name, a[0])
		if err != nil {
			return Nil, err
		}
		sub, err := needString(name, a[1])
		if err != nil {
			return Nil, err
		}
		if err := chargeBytes(m, len(s)); err != nil {
			return Nil, err
		}
		return Bool(f(s, sub)), nil
	}
}

func builtinBlank(m *Machine, a []Value) (Value, error) {
	if a[0].IsNil() {
		return True, nil
	}
	s, err := needString("blank?", a[0])
	if err != nil {
		return Nil, err
	}
	if err := chargeBytes(m, len(s)); err != nil {
		return Nil, err
	}
	return Bool(strings.TrimSpace(s) == ""), nil
}

// builtinSplit is (split s sep) or (split s sep limit), sep a string or a
// regex. As in Clojure, trailing empty strings are dropped unless a limit
// is given; a limit > 0 caps the number of parts.
func builtinSplit(m *Machine, a []Value) (Value, error) {
	s, err := needString("split", a[0])
	if err != nil {
		return Nil, err
	}
	limit := int64(0)
	if len(a) == 3 {
		if a[2].k != KindInt {
			return Nil, typeErr("split", "an int limit", a[2])
		}
		limit = a[2].AsInt()
	}
	if err := chargeBytes(m, len(s)); err != nil {
		return Nil, err
	}
	n := -1
	if limit > 0 {
		n = int(min(limit, maxElements))
	}
	var parts []string
	switch sep := a[1]; sep.k {
	case KindString:
		count := strings.Count(s, sep.Str()) + 1
		if n > 0 {
			count = min(count, n)
		}
		if err := produce(m, "split", count); err != nil {
			return Nil, err
		}
		parts = strings.SplitN(s, sep.Str(), n)
	case KindRegex:
		if err := chargeRegex(m, sep.AsRegex(), len(s)); err != nil {
			return Nil, err
		}
		parts = sep.AsRegex().Split(s, n)
		if err := produce(m, "split", len(parts)); err != nil {
			return Nil, err
		}
	default:
		return Nil, typeErr("split", "a string or regex separator", sep)
	}
	if limit == 0 && len(parts) > 1 {
		for len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
	}
	out := make([]Value, len(parts))
	for i, p := range parts {
		out[i] = String(p)
	}
	return Vector(out), nil
}

// builtinJoin is (join coll) or (join sep coll); elements render as str.
func builtinJoin(m *Machine, a []Value) (Value, error) {
	sep := ""
	if len(a) == 2 {
		b, err := appendStr(m, nil, a[0])
		if err != nil {
			return Nil, err
		}
		sep = string(b)
	}
	xs, err := seqItems(m, "join", a[len(a)-1])
	if err != nil {
		return Nil, err
	}
	var buf []byte
	for i, x := range xs {
		if i > 0 {
			if err := chargeText(m, len(buf), len(sep)); err != nil {
				return Nil, err
			}
			buf = append(buf, sep...)
		}
		if buf, err = appendStr(m, buf, x); err != nil {
			return Nil, err
		}
	}
	return String(bytesString(buf)), nil
}

func regexArg(name string, v Value) (*regexp.Regexp, error) {
	switch v.k {
	case KindRegex:
		return v.AsRegex(), nil
	case KindString:
		re, err := regexp.Compile(v.Str())
		if err != nil {
			return nil, &Error{Type: ErrValue, Msg: fmt.Sprintf("%s: invalid regex %q: %v", name, v.Str(), err)}
		}
		return re, nil
	}
	return nil, typeErr(name, "a regex", v)
}

func regexArgs(m *Machine, name string, a []Value) (*regexp.Regexp, string, error) {
	re, err := regexArg(name, a[0])
	if err != nil {
		return nil, "", err
	}
	s, err := needString(name, a[1])
	if err != nil {
		return nil, "", err
	}
	return re, s, chargeRegex(m, re, len(s))
}

// chargeRegex charges for matching re against n bytes: the regex engine
// is linear in the text, with a factor that grows with the pattern.
func chargeRegex(m *Machine, re *regexp.Regexp, n int) error {
	return chargeBytes(m, n*(1+len(re.String())/64))
}

// matchValue renders a match: the matched text when the regex has no
// groups, else [whole g1 g2 …] with nil for groups that did not take part.
func matchValue(s string, loc []int) Value {
	if len(loc) == 2 {
		return String(s[loc[0]:loc[1]])
	}
	out := make([]Value, len(loc)/2)
	for i := range out {
		if loc[2*i] >= 0 {
			out[i] = String(s[loc[2*i]:loc[2*i+1]])
		}
	}
	return Vector(out)
}

// builtinReMatches is (re-matches re s): a match of the whole of s, or nil.
func builtinReMatches(m *Machine, a []Value) (Value, error) {
	re, s, err := regexArgs(m, "re-matches", a)
	if err != nil {
		return Nil, err
	}
	loc := re.FindStringSubmatchIndex(s)
	if loc == nil {
		return Nil, nil
	}
	if loc[0] != 0 || loc[1] != len(s) {
		// The preferred match is not the whole string; a whole-string
		// match, if any, needs the pattern anchored at both ends.
		if err := chargeBytes(m, 16*len(re.String())); err != nil {
			return Nil, err
		}
		anchored, err := regexp.Compile(`^(?:` + re.String() + `)\z`)
		if err != nil {
			return Nil, &Error{Type: ErrValue, Msg: "re-matches: " + err.Error()}
		}
		if loc = anchored.FindStringSubmatchIndex(s); loc == nil {
			return Nil, nil
		}
	}
	return matchValue(s, loc), nil
}

func builtinReFind(m *Machine, a []Value) (Value, error) {
	re, s, err := regexArgs(m, "re-find", a)
	if err != nil {
		return Nil, err
	}
	loc := re.FindStringSubmatchIndex(s)
	if loc == nil {
		return Nil, nil
	}
	return matchValue(s, loc), nil
}

// builtinReSeq is (re-seq re s): every match, as a vector.
func builtinReSeq(m *Machine, a []Value) (Value, error) {
	re, s, err := regexArgs(m, "re-seq", a)
	if err != nil {
		return Nil, err
	}
	locs := re.FindAllStringSubmatchIndex(s, -1)
	if err := produce(m, "re-seq", len(locs)); err != nil {
		return Nil, err
	}
	out := make([]Value, len(locs))
	for i, loc := range locs {
		out[i] = matchValue(s, loc)
	}
	return Vector(out), nil
}

// builtinSubs is (subs s start) or (subs s start end), in characters.
func builtinSubs(m *Machine, a []Value) (Value, error) {
	s, err := needString("subs", a[0])
	if err != nil {
		return Nil, err
	}
	for _, v := range a[1:] {
		if v.k != KindInt {
			return Nil, typeErr("subs", "int indexes", v)
		}
	}
	if err := chargeBytes(m, len(s)); err != nil {
		return Nil, err
	}
	n := int64(utf8.RuneCountInString(s))
	start, end := a[1].AsInt(), n
	if len(a) == 3 {
		end = a[2].AsInt()
	}
	if start < 0 || end > n || start > end {
		return Nil, &Error{Type: ErrIndex, Msg: fmt.Sprintf("subs range %d..%d out of range for string of %d characters", start, end, n)}
	}
	if n == int64(len(s)) { // ASCII: characters are bytes
		return String(s[start:end]), nil
	}
	bs, be := len(s), len(s)
	for off, i := 0, int64(0); off < len(s); i++ {
		if i == start {
			bs = off
		}
		if i == end {
			be = off
			break
		}
		_, size := utf8.DecodeRuneInString(s[off:])
		off += size
	}
	return String(s[bs:be]), nil
}

// parseArg is the string argument of parse-int and parse-double: nil
// parses to nil, other kinds are a type error.
func parseArg(name string, v Value) (string, bool, error) {
	if v.IsNil() {
		return "", false, nil
	}
	s, err := needString(name, v)
	return s, err == nil, err
}

func builtinParseInt(_ *Machine, a []Value) (Value, error) {
	s, ok, err := parseArg("parse-int", a[0])
	if !ok {
		return Nil, err
	}
	i, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		return Nil, nil
	}
	return Int(i), nil
}

func builtinParseDouble(_ *Machine, a []Value) (Value, error) {
	s, ok, err := parseArg("parse-double", a[0])
	if !ok {
		return Nil, err
	}
	digits := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-':
		default:
			return Nil, nil // rejects inf, nan, hex and underscores, which ParseFloat accepts
		}
	}
	f, perr := strconv.ParseFloat(s, 64)
	if !digits || perr != nil {
		return Nil, nil
	}
	return Float(f), nil
}

// builtinKeyword is (keyword x) or (keyword ns name). The name must be one
// the reader accepts, so the keyword prints and reads back unchanged.
func builtinKeyword(_ *Machine, a []Value) (Value, error) {
	var name string
	if len(a) == 2 {
		ns, err := nameArg("keyword", a[0], true)
		if err != nil {
			return Nil, err
		}
		n, err := nameArg("keyword", a[1], false)
		if err != nil {
			return Nil, err
		}
		name = n
		if ns != "" {
			name = ns + "/" + n
		}
	} else {
		switch v := a[0]; v.k {
		case KindNil:
			return Nil, nil
		case KindKeyword:
			return v, nil
		}
		n, err := nameArg("keyword", a[0], false)
		if err != nil {
			return Nil, err
		}
		name = n
	}
	if name == "" || name[0] == ':' || !validName(name) {
		return Nil, &Error{Type: ErrValue, Msg: fmt.Sprintf("keyword: %q is not a valid keyword name (letters, digits and .?!-_*+<>='&%%$#| with at most one /)", name)}
	}
	return Keyword(name), nil
}

// nameArg accepts a string, symbol or keyword (and nil when nilOK) and
// returns its text.
func nameArg(name string, v Value, nilOK bool) (string, error) {
	switch v.k {
	case KindString, KindSymbol, KindKeyword:
		return v.Str(), nil
	case KindNil:
		if nilOK {
			return "", nil
		}
	}
	return "", typeErr(name, "a string, symbol or keyword", v)
}

// splitName splits ns/name; "/" alone is a name.
func splitName(s string) (ns, name string, hasNS bool) {
	if i := strings.IndexByte(s, '/'); i > 0 && i < len(s)-1 {
		return s[:i], s[i+1:], true
	}
	return "", s, false
}

func builtinName(_ *Machine, a []Value) (Value, error) {
	switch v := a[0]; v.k {
	case KindString:
		return v, nil
	case KindKeyword, KindSymbol:
		_, name, _ := splitName(v.Str())
		return String(name), nil
	}
	return Nil, typeErr("name", "a keyword, symbol or string", a[0])
}

func builtinNamespace(_ *Machine, a []Value) (Value, error) {
	switch v := a[0]; v.k {
	case KindKeyword, KindSymbol:
		if ns, _, ok := splitName(v.Str()); ok {
			return String(ns), nil
		}
		return Nil, nil
	}
	return Nil, typeErr("namespace", "a keyword or symbol", a[0])
}

func init() {
	def("str", 0, -1, builtinStr)
	def("pr-str", 0, -1, builtinPrStr)
	def("lower-case", 1, 1, strFn("lower-case", strings.ToLower))
	def("upper-case", 1, 1, strFn("upper-case", strings.ToUpper))
	def("trim", 1, 1, strFn("trim", strings.TrimSpace))
	def("triml", 1, 1, strFn("triml", func(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }))
	def("trimr", 1, 1, strFn("trimr", func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }))
	def("blank?", 1, 1, builtinBlank)
	def("split", 2, 3, builtinSplit)
	def("join", 1, 2, builtinJoin)
	def("starts-with?", 2, 2, strPred("starts-with?", strings.HasPrefix))
	def("ends-with?", 2, 2, strPred("ends-with?", strings.HasSuffix))
	def("includes?", 2, 2, strPred("includes?", strings.Contains))
	def("re-matches", 2, 2, builtinReMatches)
	def("re-find", 2, 2, builtinReFind)
	def("re-seq", 2, 2, builtinReSeq)
	def("subs", 2, 3, builtinSubs)
	def("parse-int", 1, 1, builtinParseInt)
	def("parse-double", 1, 1, builtinParseDouble)
	def("keyword", 1, 2, builtinKeyword)
	def("name", 1, 1, builtinName)
	def("namespace", 1, 1, builtinNamespace)
}
