package tui

import (
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/rtfs"
)

// layoutForm lays a form out in lines of at most w cells. The text is the
// canonical printer's (rtfs.PrintNode: sorted map keys, single spaces);
// only line breaks and indentation are added: a form that fits stays on
// one line, otherwise its head (and, for step, call, let and friends, the
// name or bindings) stays on the first line and each further item goes on
// a line of its own, indented two cells.
func layoutForm(n *rtfs.Node, w int) []string {
	return pp(n, 0, max(w, 20))
}

// keepWithHead is how many items share the first line with the head.
var keepWithHead = map[string]int{
	"step": 2, "call": 2, "let": 2, "fn": 2, "defn": 3, "def": 2, "when": 2, "if": 2,
	"step-loop": 3, "try": 1, "catch": 2, "plan": 1, "do": 1, "cond": 1, "and": 1, "or": 1,
	"step-parallel": 1, "step.with-compensation": 1,
}

// pp lays n out starting at column col. The first line continues the
// current line; later lines carry their indentation.
func pp(n *rtfs.Node, col, w int) []string {
	flat := rtfs.PrintNode(n)
	if col+ansi.StringWidth(flat) <= w || len(n.Items) == 0 {
		return []string{flat}
	}
	prefix := ""
	if n.Meta != nil {
		prefix = "^" + rtfs.PrintNode(n.Meta) + " "
	}
	switch n.Kind {
	case rtfs.NodeList:
		return ppList(n, prefix, col, w)
	case rtfs.NodeVector:
		return ppSeq(n.Items, prefix+"[", "]", col, w)
	case rtfs.NodeMap:
		return ppMap(n, prefix, col, w)
	}
	return []string{flat}
}

func ppList(n *rtfs.Node, prefix string, col, w int) []string {
	head := n.Head()
	keep, ind := 1, col+len(prefix)+2
	if k, ok := keepWithHead[head]; ok {
		keep = k
	} else if head != "" && len(n.Items) > 1 {
		// A call: the first argument stays with the function and the rest
		// line up under it, unless that pushes them past half the width.
		if at := col + len(prefix) + 1 + ansi.StringWidth(head) + 1; at <= w/2 {
			keep, ind = 2, at
		}
	}
	keep = min(keep, len(n.Items))
	lines := []string{prefix + "("}
	for i := 0; i < keep; i++ {
		if i > 0 {
			lines[len(lines)-1] += " "
		}
		at := ansi.StringWidth(lines[len(lines)-1])
		if len(lines) == 1 {
			at += col
		}
		item := n.Items[i]
		var sub []string
		if i == 1 && (head == "let" || head == "loop") && item.Kind == rtfs.NodeVector {
			sub = ppPairs(item.Items, "[", "]", at, w)
		} else {
			sub = pp(item, at, w)
		}
		lines = joinInto(lines, sub)
	}
	for _, it := range n.Items[keep:] {
		sub := pp(it, ind, w)
		sub[0] = strings.Repeat(" ", ind) + sub[0]
		lines = append(lines, sub...)
	}
	lines[len(lines)-1] += ")"
	return lines
}

// ppPairs lays out let bindings: one name and its value per line.
func ppPairs(items []*rtfs.Node, open, closer string, col, w int) []string {
	ind := col + ansi.StringWidth(open)
	var lines []string
	for i := 0; i < len(items); i += 2 {
		head := rtfs.PrintNode(items[i])
		var sub []string
		if i+1 < len(items) {
			head += " "
			sub = pp(items[i+1], ind+ansi.StringWidth(head), w)
		} else {
			sub = []string{""}
		}
		lead := strings.Repeat(" ", ind)
		if i == 0 {
			lead = open
		}
		sub[0] = lead + head + sub[0]
		lines = append(lines, sub...)
	}
	if len(lines) == 0 {
		return []string{open + closer}
	}
	lines[len(lines)-1] += closer
	return lines
}

func ppSeq(items []*rtfs.Node, open, closer string, col, w int) []string {
	ind := col + ansi.StringWidth(open)
	var lines []string
	for i, it := range items {
		sub := pp(it, ind, w)
		if i == 0 {
			sub[0] = open + sub[0]
		} else {
			sub[0] = strings.Repeat(" ", ind) + sub[0]
		}
		lines = append(lines, sub...)
	}
	lines[len(lines)-1] += closer
	return lines
}

// ppMap lays a map out as ppPairs does, its entries sorted by key as the
// canonical printer sorts them.
func ppMap(n *rtfs.Node, prefix string, col, w int) []string {
	type entry struct {
		key  string
		k, v *rtfs.Node
	}
	var es []entry
	for i := 0; i+1 < len(n.Items); i += 2 {
		es = append(es, entry{rtfs.PrintNode(n.Items[i]), n.Items[i], n.Items[i+1]})
	}
	slices.SortStableFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	items := make([]*rtfs.Node, 0, 2*len(es))
	for _, e := range es {
		items = append(items, e.k, e.v)
	}
	return ppPairs(items, prefix+"{", "}", col, w)
}

// joinInto continues the last line of lines with the first of more.
func joinInto(lines, more []string) []string {
	lines[len(lines)-1] += more[0]
	return append(lines, more[1:]...)
}

// isFormName reports whether tok is coloured as a form name: rtfs's special
// forms, and catch, which try's clauses begin with.
func isFormName(tok string) bool { return tok == "catch" || rtfs.IsSpecialForm(tok) }

// highlight colours one line of RTFS: strings, keywords, numbers,
// constants, comments, delimiters, and special forms.
func highlight(st *styles, line string) string {
	if !st.color() {
		return line
	}
	var b strings.Builder
	i := 0
	emit := func(s interface{ Render(...string) string }, j int) {
		b.WriteString(s.Render(line[i:j]))
		i = j
	}
	for i < len(line) {
		c := line[i]
		switch {
		case c == ' ' || c == ',':
			b.WriteByte(c)
			i++
		case strings.IndexByte("()[]{}^'", c) >= 0:
			emit(st.synParen, i+1)
		case c == ';':
			emit(st.synComment, len(line))
		case c == '"' || (c == '#' && i+1 < len(line) && line[i+1] == '"'):
			j := i + 1
			if c == '#' {
				j++
			}
			for j < len(line) && line[j] != '"' {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			emit(st.synString, min(j+1, len(line)))
		default:
			j := i
			for j < len(line) && strings.IndexByte(" ,()[]{}\";", line[j]) < 0 {
				j++
			}
			if j == i {
				j = i + 1
			}
			tok := line[i:j]
			switch {
			case c == ':':
				emit(st.synKeyword, j)
			case c >= '0' && c <= '9' || (c == '-' || c == '+') && len(tok) > 1 && tok[1] >= '0' && tok[1] <= '9':
				emit(st.synNumber, j)
			case tok == "true" || tok == "false" || tok == "nil":
				emit(st.synConst, j)
			case isFormName(tok) && i > 0 && line[i-1] == '(':
				emit(st.synSpecial, j)
			default:
				emit(st.synSymbol, j)
			}
		}
	}
	return b.String()
}
