package agent

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jdoc is one JSON text parsed into a flat list of nodes in document
// order, for the stream parsers: it validates a line as strictly as
// encoding/json does, without reflection and without allocating once its
// node slice has grown, and the parsers then read only the fields they
// need from it. A jdoc is reused line after line.
type jdoc struct {
	src   []byte
	nodes []jnode
	depth int
}

type jkind uint8

const (
	jObject jkind = iota + 1
	jArray
	jString
	jNumber
	jTrue
	jFalse
	jNull
)

// jnode is one value. For an object member, key is the raw key between
// its quotes. after is the index of the first node after this value's
// subtree, so a value's first child is the next node and its next sibling
// is nodes[child].after.
type jnode struct {
	kind       jkind
	esc        bool // a string value or key with a backslash escape
	keyEsc     bool
	start, end int32 // the value's bytes in src (a string's include its quotes)
	keyStart   int32
	keyEnd     int32
	after      int32
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// parse reads src as one JSON value surrounded by optional whitespace. It
// reports false, as json.Valid would, for anything else. src must not
// change while the jdoc is in use.
func (d *jdoc) parse(src []byte) bool {
	if len(src) > 1<<31-1 {
		return false
	}
	d.src, d.nodes, d.depth = src, d.nodes[:0], 0
	i, ok := d.value(skipWS(src, 0), -1, -1, false)
	return ok && skipWS(src, i) == len(src)
}

func skipWS(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// value parses the value at s[i:] as a new node and returns the index
// after it.
func (d *jdoc) value(i, keyStart, keyEnd int, keyEsc bool) (int, bool) {
	s := d.src
	if i >= len(s) {
		return i, false
	}
	n := len(d.nodes)
	d.nodes = append(d.nodes, jnode{start: int32(i), keyStart: int32(keyStart), keyEnd: int32(keyEnd), keyEsc: keyEsc})
	var ok bool
	switch c := s[i]; {
	case c == '{':
		d.nodes[n].kind = jObject
		i, ok = d.object(i + 1)
	case c == '[':
		d.nodes[n].kind = jArray
		i, ok = d.array(i + 1)
	case c == '"':
		d.nodes[n].kind = jString
		var esc bool
		i, esc, ok = scanString(s, i+1)
		d.nodes[n].esc = esc
	case c == '-' || (c >= '0' && c <= '9'):
		d.nodes[n].kind = jNumber
		i, ok = scanNumber(s, i)
	case c == 't':
		d.nodes[n].kind = jTrue
		i, ok = scanLiteral(s, i, "true")
	case c == 'f':
		d.nodes[n].kind = jFalse
		i, ok = scanLiteral(s, i, "false")
	case c == 'n':
		d.nodes[n].kind = jNull
		i, ok = scanLiteral(s, i, "null")
	}
	d.nodes[n].end = int32(i)
	d.nodes[n].after = int32(len(d.nodes))
	return i, ok
}

func (d *jdoc) object(i int) (int, bool) {
	if d.depth++; d.depth > maxJSONDepth {
		return i, false
	}
	defer func() { d.depth-- }()
	s := d.src
	i = skipWS(s, i)
	if i < len(s) && s[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return i, false
		}
		ks := i + 1
		ke, esc, ok := scanString(s, ks)
		if !ok {
			return ke, false
		}
		i = skipWS(s, ke)
		if i >= len(s) || s[i] != ':' {
			return i, false
		}
		if i, ok = d.value(skipWS(s, i+1), ks, ke-1, esc); !ok {
			return i, false
		}
		i = skipWS(s, i)
		if i >= len(s) {
			return i, false
		}
		switch s[i] {
		case ',':
			i = skipWS(s, i+1)
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

func (d *jdoc) array(i int) (int, bool) {
	if d.depth++; d.depth > maxJSONDepth {
		return i, false
	}
	defer func() { d.depth-- }()
	s := d.src
	i = skipWS(s, i)
	if i < len(s) && s[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = d.value(i, -1, -1, false); !ok {
			return i, false
		}
		i = skipWS(s, i)
		if i >= len(s) {
			return i, false
		}
		switch s[i] {
		case ',':
			i = skipWS(s, i+1)
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// scanString scans a string body from s[i:] (after its opening quote) and
// returns the index after the closing quote and whether it has escapes.
func scanString(s []byte, i int) (int, bool, bool) {
	esc := false
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(s) {
				return i, esc, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) {
					return i, esc, false
				}
				for _, h := range s[i+2 : i+6] {
					if !isHex(h) {
						return i, esc, false
					}
				}
				i += 6
			default:
				return i, esc, false
			}
		case c < 0x20:
			return i, esc, false
		default:
			i++
		}
	}
	return i, esc, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func scanNumber(s []byte, i int) (int, bool) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i, true
}

func scanLiteral(s []byte, i int, lit string) (int, bool) {
	if len(s)-i < len(lit) || string(s[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// Reading a parsed document. A node index of -1 stands for "absent".

// field is the member name of object node obj; -1 when obj is not an
// object or has no such member. Like encoding/json, the last of duplicate
// members wins; unlike it, names match exactly (every format read here
// spells its fields in one case).
func (d *jdoc) field(obj int, name string) int {
	if obj < 0 || d.nodes[obj].kind != jObject {
		return -1
	}
	found := -1
	for c := obj + 1; c < int(d.nodes[obj].after); c = int(d.nodes[c].after) {
		n := &d.nodes[c]
		key := d.src[n.keyStart:n.keyEnd]
		if n.keyEsc {
			if unquoteBytes(key) == name {
				found = c
			}
		} else if string(key) == name {
			found = c
		}
	}
	return found
}

// path follows member names from node i.
func (d *jdoc) path(i int, names ...string) int {
	for _, n := range names {
		i = d.field(i, n)
	}
	return i
}

// elems calls fn with each element of array node arr (none when arr is not
// an array).
func (d *jdoc) elems(arr int, fn func(int)) {
	if arr < 0 || d.nodes[arr].kind != jArray {
		return
	}
	for c := arr + 1; c < int(d.nodes[arr].after); c = int(d.nodes[c].after) {
		fn(c)
	}
}

// members calls fn with the name and node of each member of object node
// obj (none when obj is not an object).
func (d *jdoc) members(obj int, fn func(name string, i int)) {
	if obj < 0 || d.nodes[obj].kind != jObject {
		return
	}
	for c := obj + 1; c < int(d.nodes[obj].after); c = int(d.nodes[c].after) {
		n := &d.nodes[c]
		key := d.src[n.keyStart:n.keyEnd]
		if n.keyEsc {
			fn(unquoteBytes(key), c)
		} else {
			fn(string(key), c)
		}
	}
}

func (d *jdoc) kind(i int) jkind {
	if i < 0 {
		return 0
	}
	return d.nodes[i].kind
}

// raw is node i's bytes.
func (d *jdoc) raw(i int) []byte {
	if i < 0 {
		return nil
	}
	return d.src[d.nodes[i].start:d.nodes[i].end]
}

// The typed readers follow encoding/json's rules for a field of that Go
// type: absent or null is the zero value; a value of another JSON type is
// an error (ok false), which makes the whole line one the parser does not
// know.

func (d *jdoc) str(i int) (string, bool) {
	switch d.kind(i) {
	case 0, jNull:
		return "", true
	case jString:
		n := &d.nodes[i]
		body := d.src[n.start+1 : n.end-1]
		if !n.esc && utf8.Valid(body) {
			return string(body), true
		}
		return unquoteBytes(body), true
	}
	return "", false
}

// is reports whether node i is the string s, without allocating.
func (d *jdoc) is(i int, s string) bool {
	if d.kind(i) != jString {
		return false
	}
	n := &d.nodes[i]
	if n.esc {
		v, _ := d.str(i)
		return v == s
	}
	return string(d.src[n.start+1:n.end-1]) == s
}

func (d *jdoc) int(i int) (int64, bool) {
	switch d.kind(i) {
	case 0, jNull:
		return 0, true
	case jNumber:
		b := d.raw(i)
		neg := b[0] == '-'
		if neg {
			b = b[1:]
		}
		if len(b) > 18 { // may overflow: let strconv say
			v, err := strconv.ParseInt(string(d.raw(i)), 10, 64)
			return v, err == nil
		}
		var v int64
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false // a fraction or an exponent: not an integer, as encoding/json says
			}
			v = v*10 + int64(c-'0')
		}
		if neg {
			v = -v
		}
		return v, true
	}
	return 0, false
}

func (d *jdoc) float(i int) (float64, bool) {
	switch d.kind(i) {
	case 0, jNull:
		return 0, true
	case jNumber:
		v, err := strconv.ParseFloat(string(d.raw(i)), 64)
		return v, err == nil
	}
	return 0, false
}

func (d *jdoc) bool(i int) (bool, bool) {
	switch d.kind(i) {
	case 0, jNull, jFalse:
		return false, true
	case jTrue:
		return true, true
	}
	return false, false
}

// compact is node i's JSON without insignificant whitespace, cut at max
// bytes (on a rune boundary, with "…").
func (d *jdoc) compact(i, max int) string {
	raw := d.raw(i)
	out := make([]byte, 0, min(len(raw), max+4))
	inStr := false
	for j := 0; j < len(raw); j++ {
		c := raw[j]
		switch {
		case inStr:
			if c == '\\' && j+1 < len(raw) {
				out = append(out, c)
				j++
				c = raw[j]
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		out = append(out, c)
		if len(out) > max {
			break
		}
	}
	return cut(strings.ToValidUTF8(string(out), "\uFFFD"), max)
}

// unquoteBytes decodes a string body (between its quotes) the way
// encoding/json does: escapes, surrogate pairs, and U+FFFD for invalid
// UTF-8 and unpaired surrogates. The body must have passed scanString.
func unquoteBytes(s []byte) string {
	var out strings.Builder // its String does not copy
	out.Grow(len(s))
	for i := 0; i < len(s); {
		// A run of plain ASCII is copied at once: most of a long text is.
		j := i
		for j < len(s) && s[j] != '\\' && s[j] < utf8.RuneSelf {
			j++
		}
		out.Write(s[i:j])
		if i = j; i >= len(s) {
			break
		}
		if s[i] != '\\' {
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				out.WriteString("\uFFFD")
			} else {
				out.Write(s[i : i+n])
			}
			i += n
			continue
		}
		switch s[i+1] {
		case '"', '\\', '/':
			out.WriteByte(s[i+1])
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r := hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, hex4(s[i+2:i+6])); dec != utf8.RuneError {
						out.WriteRune(dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out.WriteRune(r)
			continue
		}
		i += 2
	}
	return out.String()
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// jread reads fields of a parsed line into a parser's typed struct,
// noting a field of the wrong JSON type (bad) instead of failing at once.
type jread struct {
	*jdoc
	bad bool
}

func (r *jread) str(i int) string {
	s, ok := r.jdoc.str(i)
	r.bad = r.bad || !ok
	return s
}

func (r *jread) int(i int) int64 {
	v, ok := r.jdoc.int(i)
	r.bad = r.bad || !ok
	return v
}

func (r *jread) float(i int) float64 {
	v, ok := r.jdoc.float(i)
	r.bad = r.bad || !ok
	return v
}

func (r *jread) bool(i int) bool {
	v, ok := r.jdoc.bool(i)
	r.bad = r.bad || !ok
	return v
}

// object notes a value that must be an object (or absent, or null) and
// returns its node, or -1.
func (r *jread) object(i int) int { return r.ofKind(i, jObject) }

// members calls fn with each member of object node obj; obj of another
// kind than object (or null, or absent) has none, and one that is not an
// object or null makes the line bad.
func (r *jread) members(obj int, fn func(name string, i int)) {
	r.jdoc.members(r.object(obj), fn)
}

// array is object for arrays.
func (r *jread) array(i int) int { return r.ofKind(i, jArray) }

// ofKind returns node i when it has kind k, and -1 when it is absent or
// null; any other kind is noted as bad.
func (r *jread) ofKind(i int, k jkind) int {
	switch r.kind(i) {
	case k:
		return i
	case 0, jNull:
		return -1
	}
	r.bad = true
	return -1
}
