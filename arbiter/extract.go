package arbiter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on what the pipeline reads of a model's answer.
const (
	// maxResponseBytes is how much of an answer is searched for a plan.
	maxResponseBytes = 256 << 10
	// maxCandidates bounds the openers tried, so a hostile answer costs
	// O(maxCandidates × maxResponseBytes) at worst.
	maxCandidates = 64
)

// extraction is the plan text found in an answer and where it starts.
type extraction struct {
	text      string
	line, col int // 1-based position of text in the answer; col counts characters
}

// shift converts a position in the extracted text to one in the answer.
func (e extraction) shift(line, col int) (int, int) {
	if line == 1 {
		return e.line, e.col + col - 1
	}
	return e.line + line - 1, col
}

// region is a byte range of the answer to search.
type region struct{ start, end int }

// cleanAnswer bounds an answer and makes it valid UTF-8.
func cleanAnswer(answer string) (string, bool) {
	cut := false
	if len(answer) > maxResponseBytes {
		n := maxResponseBytes
		for n > 0 && !utf8.RuneStart(answer[n]) {
			n--
		}
		answer, cut = answer[:n], true
	}
	if !utf8.ValidString(answer) {
		answer = strings.ToValidUTF8(answer, "\uFFFD")
	}
	return answer, cut
}

// searchRegions are the contents of every fenced code block, in order,
// then the whole answer: a plan inside a fence wins over text in prose.
func searchRegions(s string) []region {
	var out []region
	type fence struct {
		char  byte
		n     int
		start int // first byte of the content
	}
	var open *fence
	for i := 0; i < len(s); {
		end := strings.IndexByte(s[i:], '\n')
		next := len(s)
		if end >= 0 {
			next = i + end + 1
		}
		line := s[i:next]
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if indent <= 3 && len(trimmed) >= 3 && (trimmed[0] == '`' || trimmed[0] == '~') {
			c := trimmed[0]
			n := 0
			for n < len(trimmed) && trimmed[n] == c {
				n++
			}
			info := strings.TrimSpace(trimmed[n:])
			switch {
			case n < 3:
			case open == nil && !(c == '`' && strings.IndexByte(info, '`') >= 0):
				open = &fence{char: c, n: n, start: next}
			case open != nil && c == open.char && n >= open.n && info == "":
				out = append(out, region{open.start, i})
				open = nil
			}
		}
		i = next
	}
	if open != nil { // an unclosed fence runs to the end
		out = append(out, region{open.start, len(s)})
	}
	return append(out, region{0, len(s)})
}

// imbalance describes why a form does not close.
type imbalance struct {
	msg string
	at  int // byte offset the message is about
}

// extractRTFS finds the plan in a model's answer: the first balanced
// (do …) or (plan …) form, preferring one inside a code fence and one that
// holds a step or a call. Strings, regexes and comments are skipped when
// matching parentheses. When there is no such form the diagnostics say
// why, with positions in the answer.
func extractRTFS(answer string) (extraction, []Diagnostic) {
	s, cut := cleanAnswer(answer)
	ex, ok, bad := findForm(s, rtfsForms)
	if ok {
		return ex, nil
	}
	return extraction{}, noPlan{what: "(do …) form",
		closeFix:  "close every ( [ { you open and every string; write the whole plan again",
		unwrapped: holdsPlanForm(s),
		wrapFix:   "wrap the steps in one form: (do (step \"Name\" (call :cap {…})) …)",
		fix:       "answer with only an RTFS plan: (do (step \"Name\" (call :cap.id {:key value})))",
	}.diagnostics(s, cut, bad)
}

// formSyntax is what an extractor looks for in an answer.
type formSyntax struct {
	next func(s string, i int) int                          // offset of the next opener at or after i, or -1
	scan func(s string, start, limit int) (int, *imbalance) // the end of the form opening at start
	// wanted reports a form that holds a plan; another balanced form is
	// taken only when nothing else is found and nothing is unclosed.
	wanted func(text string) bool
	// piecesOfUnclosed: a form after an unclosed one whose text so far is
	// wanted is a piece of it, not a candidate.
	piecesOfUnclosed bool
}

var (
	rtfsForms = formSyntax{next: nextOpener, scan: scanForm, wanted: holdsPlanForm, piecesOfUnclosed: true}
	jsonForms = formSyntax{next: nextBrace, scan: scanJSON, wanted: func(text string) bool { return strings.Contains(text, `"steps"`) }}
)

// findForm returns the first wanted balanced form of s, searching the
// regions of searchRegions in order and trying at most maxCandidates
// openers. When there is none, bad is the first form that does not close.
func findForm(s string, syn formSyntax) (ex extraction, ok bool, bad *imbalance) {
	tried := 0
	var fallback *extraction
	for _, r := range searchRegions(s) {
		broken := -1 // the first opener of this region whose form does not close
		for i := r.start; i < r.end && tried < maxCandidates; {
			j := syn.next(s[:r.end], i)
			if j < 0 {
				break
			}
			tried++
			end, b := syn.scan(s, j, r.end)
			if b != nil {
				if bad == nil {
					bad = b
				}
				if broken < 0 {
					broken = j
				}
				i = j + 1
				continue
			}
			if syn.piecesOfUnclosed && broken >= 0 && syn.wanted(s[broken:j]) {
				// A form after steps of a plan that does not close is a
				// piece of that plan (an answer cut off by max_tokens
				// ends inside its last step): running it would run a
				// fragment. The unclosed form is the problem to report.
				i = end
				continue
			}
			line, col := lineCol(s, j)
			found := extraction{text: s[j:end], line: line, col: col}
			if syn.wanted(found.text) {
				return found, true, nil
			}
			if fallback == nil {
				fallback = &found
			}
			i = end
		}
	}
	if fallback != nil && bad == nil {
		return *fallback, true, nil
	}
	return extraction{}, false, bad
}

// holdsPlanForm reports whether text writes a step or a call.
func holdsPlanForm(text string) bool {
	return strings.Contains(text, "(step") || strings.Contains(text, "(call")
}

// noPlan explains why an answer held no plan.
type noPlan struct {
	what      string // "(do …)"
	closeFix  string // the fix for an unclosed form
	unwrapped bool   // the answer has steps without their wrapper
	wrapFix   string
	fix       string
}

func (n noPlan) diagnostics(s string, cut bool, bad *imbalance) []Diagnostic {
	var ds []Diagnostic
	add := func(pos, msg, fix string) {
		ds = append(ds, Diagnostic{Stage: "extract", Pos: pos, Message: msg, Fix: fix})
	}
	switch {
	case strings.TrimSpace(s) == "":
		add("", "the answer is empty", n.fix)
	case bad != nil:
		line, col := lineCol(s, bad.at)
		add(fmt.Sprintf("%d:%d", line, col), bad.msg, n.closeFix)
	case n.unwrapped:
		add("", "the answer has no "+n.what+" around its steps", n.wrapFix)
	default:
		add("", "the answer has no "+n.what, n.fix)
	}
	if cut {
		add("", fmt.Sprintf("the answer is longer than %d KiB and was cut there", maxResponseBytes>>10), "write a shorter answer")
	}
	return ds
}

// nextOpener returns the offset of the next "(do" or "(plan" at or after
// i that is followed by a delimiter, or -1.
func nextOpener(s string, i int) int {
	for i < len(s) {
		k := strings.IndexByte(s[i:], '(')
		if k < 0 {
			return -1
		}
		j := i + k
		for _, head := range []string{"(do", "(plan"} {
			if strings.HasPrefix(s[j:], head) && (j+len(head) == len(s) || isDelimiter(s[j+len(head)])) {
				return j
			}
		}
		i = j + 1
	}
	return -1
}

func isDelimiter(c byte) bool {
	return strings.IndexByte(" \t\r\n\f\v,()[]{}\"^;", c) >= 0
}

var closerOf = map[byte]byte{'(': ')', '[': ']', '{': '}'}

// scanForm finds the end of the RTFS form opening at start, reading no
// further than limit. Strings, regexes (#"…") and ; comments are skipped.
func scanForm(s string, start, limit int) (int, *imbalance) {
	var stack []int
	for i := start; i < limit; i++ {
		switch c := s[i]; c {
		case '(', '[', '{':
			if len(stack) == planMaxDepth {
				return 0, &imbalance{fmt.Sprintf("the plan nests deeper than %d levels", planMaxDepth), i}
			}
			stack = append(stack, i)
		case ')', ']', '}':
			if len(stack) == 0 {
				return 0, &imbalance{fmt.Sprintf("%q has no matching opener", c), i}
			}
			top := stack[len(stack)-1]
			if closerOf[s[top]] != c {
				line, col := lineCol(s, top)
				return 0, &imbalance{fmt.Sprintf("%q does not close the %q opened at %d:%d; write %q there", c, s[top], line, col, closerOf[s[top]]), i}
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i + 1, nil
			}
		case '"':
			end, ok := skipString(s, i, limit)
			if !ok {
				return 0, &imbalance{"this string is never closed; add a closing \"", i}
			}
			i = end
		case ';':
			for i < limit && s[i] != '\n' {
				i++
			}
		}
	}
	if len(stack) == 0 {
		return 0, &imbalance{"the form is empty", start}
	}
	top := stack[len(stack)-1]
	if n := len(stack); n > 1 {
		line, col := lineCol(s, start)
		return 0, &imbalance{fmt.Sprintf("the form opened at %d:%d is never closed: %d brackets are still open at the end, the innermost opened here", line, col, n), top}
	}
	return 0, &imbalance{fmt.Sprintf("the %q opened here is never closed; add %q where the form ends", s[top], closerOf[s[top]]), top}
}

// skipString returns the offset of the closing quote of the string opening
// at i (a \ escapes the next byte).
func skipString(s string, i, limit int) (int, bool) {
	for j := i + 1; j < limit; j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j, true
		}
	}
	return 0, false
}

// extractJSON finds the IR object in a model's answer: the first balanced
// {…} that mentions "steps", preferring one inside a code fence.
func extractJSON(answer string) (extraction, []Diagnostic) {
	s, cut := cleanAnswer(answer)
	ex, ok, bad := findForm(s, jsonForms)
	if ok {
		return ex, nil
	}
	return extraction{}, noPlan{what: "JSON object {…}",
		closeFix:  "close every { [ you open and every string; write the whole JSON again",
		unwrapped: strings.Contains(s, `"steps"`),
		wrapFix:   `answer with one JSON object {"steps": […]}`,
		fix:       `answer with only one JSON object: {"steps": [{"id": …, "name": …, "capability": …, "args": …, "deps": […]}]}`,
	}.diagnostics(s, cut, bad)
}

// nextBrace returns the offset of the next '{' at or after i, or -1.
func nextBrace(s string, i int) int {
	if k := strings.IndexByte(s[i:], '{'); k >= 0 {
		return i + k
	}
	return -1
}

// scanJSON finds the end of the JSON object opening at start.
func scanJSON(s string, start, limit int) (int, *imbalance) {
	var stack []int
	for i := start; i < limit; i++ {
		switch c := s[i]; c {
		case '{', '[':
			if len(stack) == 2*maxJSONDepth {
				return 0, &imbalance{fmt.Sprintf("the JSON nests deeper than %d levels", 2*maxJSONDepth), i}
			}
			stack = append(stack, i)
		case '}', ']':
			if len(stack) == 0 {
				return 0, &imbalance{fmt.Sprintf("%q has no matching opener", c), i}
			}
			top := stack[len(stack)-1]
			if closerOf[s[top]] != c {
				line, col := lineCol(s, top)
				return 0, &imbalance{fmt.Sprintf("%q does not close the %q opened at %d:%d", c, s[top], line, col), i}
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i + 1, nil
			}
		case '"':
			end, ok := skipString(s, i, limit)
			if !ok {
				return 0, &imbalance{"this string is never closed; add a closing \"", i}
			}
			i = end
		}
	}
	line, col := lineCol(s, start)
	return 0, &imbalance{fmt.Sprintf("the object opened at %d:%d is never closed", line, col), stack[len(stack)-1]}
}

// lineCol is the 1-based line and column (in characters) of byte offset off.
func lineCol(s string, off int) (int, int) {
	off = min(off, len(s))
	line := 1 + strings.Count(s[:off], "\n")
	lineStart := strings.LastIndexByte(s[:off], '\n') + 1
	return line, 1 + utf8.RuneCountInString(s[lineStart:off])
}
