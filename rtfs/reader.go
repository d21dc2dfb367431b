package rtfs

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ReadOptions bounds what the reader accepts. Zero fields take defaults.
type ReadOptions struct {
	File       string // name used in error messages
	MaxDepth   int    // deepest nesting of collections (default 256)
	MaxLiteral int    // longest string, regex or token in bytes (default 1 MiB)
}

const (
	defaultMaxDepth   = 256
	defaultMaxLiteral = 1 << 20
)

// Read parses every form of src. name is used in error positions.
func Read(src, name string) ([]*Node, error) {
	return ReadWith(src, ReadOptions{File: name})
}

// ReadWith parses every form of src under the given limits.
func ReadWith(src string, opts ReadOptions) ([]*Node, error) {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = defaultMaxDepth
	}
	if opts.MaxLiteral <= 0 {
		opts.MaxLiteral = defaultMaxLiteral
	}
	r := &reader{src: src, opts: opts, line: 1, col: 1}
	var forms []*Node
	for {
		n, err := r.next(0)
		if err != nil {
			return nil, err
		}
		if n == nil {
			if r.i < len(r.src) { // a closing delimiter at top level
				return nil, r.errAt(r.pos(), "unexpected %q with no matching opener; remove it", r.src[r.i])
			}
			return forms, nil
		}
		forms = append(forms, n)
	}
}

// ReadValue reads src as data (one form) and returns its value.
func ReadValue(src string) (Value, error) {
	forms, err := Read(src, "<value>")
	if err != nil {
		return Nil, err
	}
	if len(forms) != 1 {
		return Nil, errorf(ErrRead, Pos{1, 1}, "expected exactly one form, found %d", len(forms))
	}
	return forms[0].Value(), nil
}

type reader struct {
	src       string
	i         int
	line, col int
	opts      ReadOptions
	fnLit     *fnLit // the #(…) being read, or nil
}

// fnLit collects the % arguments of an anonymous function literal.
type fnLit struct {
	max  int  // highest %n used (% is %1)
	rest bool // %& used
}

func (r *reader) pos() Pos { return Pos{r.line, r.col} }

func (r *reader) errAt(p Pos, format string, args ...any) *Error {
	e := errorf(ErrRead, p, format, args...)
	e.File = r.opts.File
	return e
}

// advance moves past one byte, keeping line and column (in characters).
func (r *reader) advance() {
	c := r.src[r.i]
	r.i++
	if c == '\n' {
		r.line++
		r.col = 1
	} else if c < utf8.RuneSelf || c >= 0xC0 { // not a continuation byte
		r.col++
	}
}

func (r *reader) skipSpace() {
	for r.i < len(r.src) {
		c := r.src[r.i]
		switch {
		case c == ';':
			for r.i < len(r.src) && r.src[r.i] != '\n' {
				r.advance()
			}
		case c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			r.advance()
		default:
			return
		}
	}
}

// next reads one form. It returns (nil, nil) at end of input or when the
// next character is a closing delimiter, which it leaves in place.
func (r *reader) next(depth int) (*Node, error) {
	for {
		r.skipSpace()
		if r.i >= len(r.src) {
			return nil, nil
		}
		start := r.pos()
		c := r.src[r.i]
		if depth >= r.opts.MaxDepth && strings.IndexByte("([{'^#", c) >= 0 {
			return nil, r.errAt(start, "nesting is deeper than %d levels; flatten the expression", r.opts.MaxDepth)
		}
		switch c {
		case ')', ']', '}':
			return nil, nil
		case '(', '[', '{':
			return r.collection(depth, false)
		case '"':
			s, err := r.stringLit()
			if err != nil {
				return nil, err
			}
			return &Node{Kind: NodeAtom, Pos: start, Val: String(s)}, nil
		case '\'':
			r.advance()
			target, err := r.target(depth, start, "quote '")
			if err != nil {
				return nil, err
			}
			return &Node{Kind: NodeQuote, Pos: start, Items: []*Node{target}}, nil
		case '^':
			return r.meta(depth)
		case '#':
			n, skip, err := r.dispatch(depth)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
			return n, nil
		case '@':
			return nil, r.errAt(start, "deref '@' is not supported in RTFS")
		case '`', '~':
			return nil, r.errAt(start, "syntax-quote and unquote are not supported in RTFS; use quote '")
		case '\\':
			return nil, r.errAt(start, "character literals are not supported; use a one-character string")
		}
		return r.token()
	}
}

// target reads the form a prefix (quote, metadata, discard) applies to.
func (r *reader) target(depth int, at Pos, what string) (*Node, error) {
	n, err := r.next(depth + 1)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, r.errAt(at, "%s has no form after it", what)
	}
	return n, nil
}

var closerOf = map[byte]byte{'(': ')', '[': ']', '{': '}'}

// collection reads (…), […], {…}, or with set the {…} of #{…}.
func (r *reader) collection(depth int, set bool) (*Node, error) {
	start := r.pos()
	open := r.src[r.i]
	r.advance()
	kind := NodeList
	switch open {
	case '[':
		kind = NodeVector
	case '{':
		kind = NodeMap
	}
	n := &Node{Kind: kind, Pos: start}
	for {
		item, err := r.next(depth + 1)
		if err != nil {
			return nil, err
		}
		if item != nil {
			n.Items = append(n.Items, item)
			continue
		}
		if r.i >= len(r.src) {
			return nil, r.errAt(start, "%q opened here is never closed; add %q", open, closerOf[open])
		}
		if c := r.src[r.i]; c != closerOf[open] {
			return nil, r.errAt(r.pos(), "mismatched %q: expected %q to close %q opened at %s", c, closerOf[open], open, start)
		}
		n.End = r.pos()
		r.advance()
		break
	}
	if kind == NodeMap && !set {
		if err := r.checkMap(n); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (r *reader) checkMap(n *Node) error {
	if len(n.Items)%2 != 0 {
		return r.errAt(n.Pos, "map literal has %d forms, an odd number; every key needs a value", len(n.Items))
	}
	seen := make(map[string]Pos, len(n.Items)/2)
	for i := 0; i < len(n.Items); i += 2 {
		k := n.Items[i]
		text := PrintNode(k)
		if first, dup := seen[text]; dup {
			return r.errAt(k.Pos, "duplicate map key %s (first at %s); remove one", text, first)
		}
		seen[text] = k.Pos
	}
	return nil
}

func (r *reader) checkSet(n *Node) error {
	seen := make(map[string]Pos, len(n.Items))
	for _, it := range n.Items {
		text := PrintNode(it)
		if first, dup := seen[text]; dup {
			return r.errAt(it.Pos, "duplicate set member %s (first at %s); remove one", truncate(text, 40), first)
		}
		seen[text] = it.Pos
	}
	return nil
}

// fnLiteral reads #(…) as (fn [%1 … %n & %&] (…)): % is %1, and the
// highest %n used sets the arity, as in Clojure. #() cannot nest.
func (r *reader) fnLiteral(depth int, start Pos) (*Node, error) {
	if r.fnLit != nil {
		return nil, r.errAt(start, "nested #()s are not allowed; write the inner one as (fn [x] …)")
	}
	lit := &fnLit{}
	r.fnLit = lit
	body, err := r.collection(depth, false)
	r.fnLit = nil
	if err != nil {
		return nil, err
	}
	body.Pos = Pos{start.Line, start.Col + 1}
	params := &Node{Kind: NodeVector, Pos: start}
	for i := 1; i <= lit.max; i++ {
		params.Items = append(params.Items, &Node{Kind: NodeSymbol, Pos: start, Val: Symbol("%" + strconv.Itoa(i))})
	}
	if lit.rest {
		params.Items = append(params.Items, &Node{Kind: NodeSymbol, Pos: start, Val: Symbol("&")},
			&Node{Kind: NodeSymbol, Pos: start, Val: Symbol("%&")})
	}
	head := &Node{Kind: NodeSymbol, Pos: start, Val: Symbol("fn")}
	return &Node{Kind: NodeList, Pos: start, End: body.End, Items: []*Node{head, params, body}}, nil
}

// fnArg renames % to %1 inside #(…) and records the arguments used.
func (r *reader) fnArg(tok string, at Pos) (string, error) {
	lit := r.fnLit
	switch {
	case tok == "%":
		lit.max = max(lit.max, 1)
		return "%1", nil
	case tok == "%&":
		lit.rest = true
		return tok, nil
	}
	n, err := strconv.Atoi(tok[1:])
	if err != nil || n < 1 || n > 20 || tok[1] == '0' {
		return "", r.errAt(at, "invalid argument %s in #(…); use %%, %%1 to %%20 or %%&", tok)
	}
	lit.max = max(lit.max, n)
	return tok, nil
}

func (r *reader) meta(depth int) (*Node, error) {
	start := r.pos()
	r.advance()
	m, err := r.next(depth + 1)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, r.errAt(start, "metadata ^ has no map or keyword after it")
	}
	switch {
	case m.Kind == NodeMap:
	case m.Kind == NodeAtom && m.Val.Kind() == KindKeyword:
		m = &Node{Kind: NodeMap, Pos: m.Pos, Items: []*Node{m, {Kind: NodeAtom, Pos: m.Pos, Val: True}}}
	default:
		return nil, r.errAt(m.Pos, "metadata must be a map ^{…} or a keyword ^:kw")
	}
	target, err := r.next(depth + 1)
	if err != nil {
		return nil, err
	}
	if target == nil {
		return nil, r.errAt(start, "metadata ^ has no form to attach to; put it before a form")
	}
	if target.Meta != nil { // ^:a ^:b x: merge, inner entries win
		merged := &Node{Kind: NodeMap, Pos: m.Pos, Items: append([]*Node{}, target.Meta.Items...)}
		for i := 0; i+1 < len(m.Items); i += 2 {
			if !hasKey(merged, m.Items[i]) {
				merged.Items = append(merged.Items, m.Items[i], m.Items[i+1])
			}
		}
		m = merged
	}
	target.Meta = m
	return target, nil
}

func hasKey(m *Node, k *Node) bool {
	text := PrintNode(k)
	for i := 0; i < len(m.Items); i += 2 {
		if PrintNode(m.Items[i]) == text {
			return true
		}
	}
	return false
}

// dispatch handles #: #_ discard, #"regex", ##Inf/##-Inf/##NaN, #{set}
// and #(anonymous fn).
func (r *reader) dispatch(depth int) (n *Node, skip bool, err error) {
	start := r.pos()
	r.advance()
	if r.i >= len(r.src) {
		return nil, false, r.errAt(start, "'#' at end of input")
	}
	switch r.src[r.i] {
	case '_':
		r.advance()
		if _, err := r.target(depth, start, "discard #_"); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	case '"':
		pat, err := r.regexLit(start)
		if err != nil {
			return nil, false, err
		}
		re, cerr := regexp.Compile(pat)
		if cerr != nil {
			return nil, false, r.errAt(start, "invalid regex: %v", cerr)
		}
		return &Node{Kind: NodeAtom, Pos: start, Val: Regex(re)}, false, nil
	case '#':
		r.advance()
		tok := r.scanToken()
		var f float64
		switch tok {
		case "Inf":
			f = math.Inf(1)
		case "-Inf":
			f = math.Inf(-1)
		case "NaN":
			f = math.NaN()
		default:
			return nil, false, r.errAt(start, "unknown symbolic value ##%s; use ##Inf, ##-Inf or ##NaN", tok)
		}
		return &Node{Kind: NodeAtom, Pos: start, Val: Float(f)}, false, nil
	case '{':
		n, err := r.collection(depth, true)
		if err != nil {
			return nil, false, err
		}
		n.Kind, n.Pos = NodeSet, start
		if err := r.checkSet(n); err != nil {
			return nil, false, err
		}
		return n, false, nil
	case '(':
		n, err := r.fnLiteral(depth, start)
		return n, false, err
	}
	return nil, false, r.errAt(start, "unknown dispatch '#%c'", r.src[r.i])
}

func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v', ',', '(', ')', '[', ']', '{', '}', '"', ';':
		return true
	}
	return false
}

func (r *reader) scanToken() string {
	start := r.i
	for r.i < len(r.src) && !isDelim(r.src[r.i]) {
		r.advance()
	}
	return r.src[start:r.i]
}

func (r *reader) token() (*Node, error) {
	start := r.pos()
	tok := r.scanToken()
	if len(tok) > r.opts.MaxLiteral {
		return nil, r.errAt(start, "token is longer than %d bytes", r.opts.MaxLiteral)
	}
	c := tok[0]
	if c >= '0' && c <= '9' || (c == '-' || c == '+') && len(tok) > 1 && tok[1] >= '0' && tok[1] <= '9' {
		v, err := parseNumber(tok)
		if err != nil {
			return nil, r.errAt(start, "%s", err.Error())
		}
		return &Node{Kind: NodeAtom, Pos: start, Val: v}, nil
	}
	switch tok {
	case "nil":
		return &Node{Kind: NodeAtom, Pos: start, Val: Nil}, nil
	case "true":
		return &Node{Kind: NodeAtom, Pos: start, Val: True}, nil
	case "false":
		return &Node{Kind: NodeAtom, Pos: start, Val: False}, nil
	}
	if c == ':' {
		name := tok[1:]
		if name == "" || name[0] == ':' || !validName(name) {
			return nil, r.errAt(start, "invalid keyword %q; write :name or :ns/name", tok)
		}
		return &Node{Kind: NodeAtom, Pos: start, Val: Keyword(name)}, nil
	}
	if !validName(tok) {
		return nil, r.errAt(start, "invalid symbol %q", tok)
	}
	if r.fnLit != nil && c == '%' {
		name, err := r.fnArg(tok, start)
		if err != nil {
			return nil, err
		}
		tok = name
	}
	return &Node{Kind: NodeSymbol, Pos: start, Val: Symbol(tok)}, nil
}

// validName accepts symbol and keyword names: letters, digits and
// . ? ! - _ * + / < > = ' & % $ # |, with / only between two parts.
func validName(s string) bool {
	if s == "/" {
		return true
	}
	if strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Count(s, "/") > 1 {
		return false
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".?!-_*+/<>='&%$#|", r) {
			continue
		}
		return false
	}
	return true
}

type numError string

func (e numError) Error() string { return string(e) }

func parseNumber(tok string) (Value, error) {
	digits := strings.TrimLeft(tok, "+-")
	isFloat := strings.ContainsAny(digits, ".eE")
	if !isFloat {
		for i := 0; i < len(digits); i++ {
			if digits[i] < '0' || digits[i] > '9' {
				return Nil, numError("invalid number " + strconv.Quote(tok))
			}
		}
		if len(digits) > 1 && digits[0] == '0' {
			return Nil, numError("invalid number " + strconv.Quote(tok) + ": leading zeros are not allowed")
		}
		i, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return Nil, numError("integer " + tok + " overflows int64 (range -9223372036854775808..9223372036854775807)")
		}
		return Int(i), nil
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+') {
			return Nil, numError("invalid number " + strconv.Quote(tok))
		}
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return Nil, numError("float " + tok + " is out of range")
		}
		return Nil, numError("invalid number " + strconv.Quote(tok))
	}
	return Float(f), nil
}

func (r *reader) stringLit() (string, error) {
	start := r.pos()
	r.advance() // opening quote
	var b strings.Builder
	for {
		if r.i >= len(r.src) {
			return "", r.errAt(start, "string starting here is never closed; add a closing \"")
		}
		if b.Len() > r.opts.MaxLiteral {
			return "", r.errAt(start, "string literal is longer than %d bytes", r.opts.MaxLiteral)
		}
		c := r.src[r.i]
		switch c {
		case '"':
			r.advance()
			return b.String(), nil
		case '\\':
			escPos := r.pos()
			r.advance()
			if r.i >= len(r.src) {
				return "", r.errAt(start, "string starting here is never closed; add a closing \"")
			}
			e := r.src[r.i]
			r.advance()
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '"':
				b.WriteByte('"')
			case '\\':
				b.WriteByte('\\')
			case 'u':
				h, ok := r.hex(4)
				if !ok {
					return "", r.errAt(escPos, "invalid escape: \\u needs four hex digits, as in \\u00e9")
				}
				if h, ok = r.surrogatePair(h); !ok {
					return "", r.errAt(escPos, "lone surrogate \\u%04x in string; pair a \\uD800–\\uDBFF escape with a \\uDC00–\\uDFFF one, as in \\ud83d\\ude00", h)
				}
				b.WriteRune(rune(h))
			case 'x':
				h, ok := r.hex(2)
				if !ok {
					return "", r.errAt(escPos, "invalid escape: \\x needs two hex digits")
				}
				b.WriteByte(byte(h))
			default:
				return "", r.errAt(escPos, "invalid escape \\%c in string; use \\n \\t \\\" \\\\ or \\uXXXX", e)
			}
		default:
			b.WriteByte(c)
			r.advance()
		}
	}
}

func (r *reader) hex(n int) (int, bool) {
	if r.i+n > len(r.src) {
		return 0, false
	}
	v, err := strconv.ParseUint(r.src[r.i:r.i+n], 16, 32)
	if err != nil {
		return 0, false
	}
	for range n {
		r.advance()
	}
	return int(v), true
}

// surrogatePair combines a high surrogate h (just read from \\uXXXX) with
// the \\uXXXX low surrogate that must follow it into one code point, as
// Clojure and Java read "\\ud83d\\ude00". ok is false for a lone surrogate.
func (r *reader) surrogatePair(h int) (int, bool) {
	switch {
	case h < 0xd800 || h > 0xdfff:
		return h, true
	case h >= 0xdc00:
		return h, false
	}
	if r.i+6 > len(r.src) || r.src[r.i] != '\\' || r.src[r.i+1] != 'u' {
		return h, false
	}
	lo, err := strconv.ParseUint(r.src[r.i+2:r.i+6], 16, 32)
	if err != nil || lo < 0xdc00 || lo > 0xdfff {
		return h, false
	}
	for range 6 {
		r.advance()
	}
	return int(utf16.DecodeRune(rune(h), rune(lo))), true
}

// regexLit reads the body of #"…": raw text where \" stands for a quote
// (a quote needs no escape in a regex) and every other backslash pair is
// passed to the regex engine unchanged.
func (r *reader) regexLit(start Pos) (string, error) {
	r.advance() // opening quote
	begin := r.i
	for {
		if r.i >= len(r.src) {
			return "", r.errAt(start, "regex starting here is never closed; add a closing \"")
		}
		if r.i-begin > r.opts.MaxLiteral {
			return "", r.errAt(start, "regex literal is longer than %d bytes", r.opts.MaxLiteral)
		}
		switch r.src[r.i] {
		case '"':
			pat := strings.ReplaceAll(r.src[begin:r.i], `\"`, `"`)
			r.advance()
			return pat, nil
		case '\\':
			r.advance()
			if r.i < len(r.src) {
				r.advance()
			}
		default:
			r.advance()
		}
	}
}
