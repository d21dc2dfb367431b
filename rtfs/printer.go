package rtfs

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Print renders v in canonical form: map keys sorted by their canonical
// text, single spaces, no commas, shortest floats with a decimal point.
// For every value without functions, Read(Print(v)) is equal to v.
func Print(v Value) string {
	return string(AppendValue(nil, v))
}

// AppendValue appends the canonical form of v to buf.
func AppendValue(buf []byte, v Value) []byte {
	switch v.k {
	case KindNil:
		return append(buf, "nil"...)
	case KindBool:
		if v.n != 0 {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case KindInt:
		return strconv.AppendInt(buf, int64(v.n), 10)
	case KindFloat:
		return appendFloat(buf, v.AsFloat())
	case KindString:
		return appendQuoted(buf, v.Str())
	case KindKeyword:
		return append(append(buf, ':'), v.Str()...)
	case KindSymbol:
		return append(buf, v.Str()...)
	case KindList, KindVector:
		return appendSeq(buf, v)
	case KindMap:
		return appendMap(buf, v.AsMap())
	case KindSet:
		return appendSet(buf, v.AsSet())
	case KindFn:
		f := v.AsFn()
		buf = append(buf, "#fn["...)
		buf = append(buf, f.Name()...)
		return append(buf, ']')
	case KindRegex:
		return appendRegex(buf, v.AsRegex().String())
	}
	return buf
}

// appendSeq appends a list as (a b …), a vector as [a b …], and a list
// (quote x) as 'x.
func appendSeq(buf []byte, v Value) []byte {
	open, closer := byte('('), byte(')')
	if v.k == KindVector {
		open, closer = '[', ']'
	}
	if v.k == KindList {
		if it := v.Items(); len(it) == 2 && it[0].k == KindSymbol && it[0].Str() == "quote" {
			return AppendValue(append(buf, '\''), it[1])
		}
	}
	buf = append(buf, open)
	for i, it := range v.Items() {
		if i > 0 {
			buf = append(buf, ' ')
		}
		buf = AppendValue(buf, it)
	}
	return append(buf, closer)
}

// appendMap appends a map as {k v …}, in canonical key order.
func appendMap(buf []byte, m *Map) []byte {
	buf = append(buf, '{')
	first := true
	m.Range(func(k, val Value) bool {
		if !first {
			buf = append(buf, ' ')
		}
		first = false
		buf = AppendValue(buf, k)
		buf = append(buf, ' ')
		buf = AppendValue(buf, val)
		return true
	})
	return append(buf, '}')
}

// appendSet appends a set as #{x …}, in canonical order.
func appendSet(buf []byte, s *Set) []byte {
	buf = append(buf, '#', '{')
	first := true
	s.Range(func(x Value) bool {
		if !first {
			buf = append(buf, ' ')
		}
		first = false
		buf = AppendValue(buf, x)
		return true
	})
	return append(buf, '}')
}

func appendFloat(buf []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, "##NaN"...)
	case math.IsInf(f, 1):
		return append(buf, "##Inf"...)
	case math.IsInf(f, -1):
		return append(buf, "##-Inf"...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e21) {
		s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1e+21, 1.5e-07
		mant, exp, _ := strings.Cut(s, "e")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		e, _ := strconv.Atoi(exp)
		buf = append(buf, mant...)
		buf = append(buf, 'e')
		return strconv.AppendInt(buf, int64(e), 10)
	}
	start := len(buf)
	buf = strconv.AppendFloat(buf, f, 'f', -1, 64)
	if !slices.Contains(buf[start:], '.') {
		buf = append(buf, ".0"...)
	}
	return buf
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes s as a string literal. Quote, backslash, newline and
// tab use their short escapes; other control characters use \uXXXX; bytes
// that are not valid UTF-8 use \xHH so the exact bytes read back.
func appendQuoted(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				buf = append(buf, '\\', '"')
			case c == '\\':
				buf = append(buf, '\\', '\\')
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20 || c == 0x7f:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			i++
			continue
		}
		buf = append(buf, s[i:i+size]...)
		i += size
	}
	return append(buf, '"')
}

// appendRegex writes #"pattern": the pattern is raw except that a quote
// is written \" (which the regex engine reads as a plain quote).
func appendRegex(buf []byte, pat string) []byte {
	buf = append(buf, '#', '"')
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		if c == '\\' && i+1 < len(pat) {
			buf = append(buf, c, pat[i+1])
			i++
			continue
		}
		if c == '"' {
			buf = append(buf, '\\')
		}
		buf = append(buf, c)
	}
	return append(buf, '"')
}

// PrintNode renders source forms canonically: like Print, with metadata
// written as ^{…} before its form and quotes as 'x. Comments are dropped.
func PrintNode(n *Node) string {
	return string(appendNode(nil, n))
}

// PrintProgram renders each top-level form canonically on its own line.
func PrintProgram(forms []*Node) string {
	var buf []byte
	for _, f := range forms {
		buf = appendNode(buf, f)
		buf = append(buf, '\n')
	}
	return string(buf)
}

func appendNode(buf []byte, n *Node) []byte {
	if n.Meta != nil {
		buf = append(buf, '^')
		buf = appendNode(buf, n.Meta)
		buf = append(buf, ' ')
	}
	switch n.Kind {
	case NodeAtom, NodeSymbol:
		return AppendValue(buf, n.Val)
	case NodeQuote:
		return appendNode(append(buf, '\''), n.Items[0])
	case NodeList, NodeVector:
		open, closer := byte('('), byte(')')
		if n.Kind == NodeVector {
			open, closer = '[', ']'
		}
		buf = append(buf, open)
		for i, it := range n.Items {
			if i > 0 {
				buf = append(buf, ' ')
			}
			buf = appendNode(buf, it)
		}
		return append(buf, closer)
	case NodeSet:
		texts := make([]string, len(n.Items))
		for i, it := range n.Items {
			texts[i] = string(appendNode(nil, it))
		}
		slices.Sort(texts)
		buf = append(buf, '#', '{')
		buf = append(buf, strings.Join(texts, " ")...)
		return append(buf, '}')
	case NodeMap:
		type entry struct {
			key  string
			k, v *Node
		}
		entries := make([]entry, 0, len(n.Items)/2)
		for i := 0; i+1 < len(n.Items); i += 2 {
			entries = append(entries, entry{string(appendNode(nil, n.Items[i])), n.Items[i], n.Items[i+1]})
		}
		slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		buf = append(buf, '{')
		for i, e := range entries {
			if i > 0 {
				buf = append(buf, ' ')
			}
			buf = append(buf, e.key...)
			buf = append(buf, ' ')
			buf = appendNode(buf, e.v)
		}
		return append(buf, '}')
	}
	return buf
}
