package arbiter

import (
	"fmt"
	"strings"
)

// Hint limits: a repair prompt carries at most maxHints bytes of hints,
// each problem on one line of at most maxHintLine bytes.
const (
	maxHints    = 1024
	maxHintLine = 300
)

// hints renders diagnostics as compact repair hints: one line per problem,
// "- line:col message; fix: …", at most maxHints bytes in all. Problems
// that do not fit are counted on a last line.
func hints(ds []Diagnostic) string {
	var b strings.Builder
	for i, d := range ds {
		line := hintLine(d)
		rest := len(ds) - i
		more := fmt.Sprintf("- and %d more problem%s\n", rest, plural(rest))
		reserve := 0
		if rest > 1 {
			reserve = len(fmt.Sprintf("- and %d more problems\n", rest-1))
		}
		if b.Len()+len(line)+reserve > maxHints {
			if b.Len()+len(more) <= maxHints {
				b.WriteString(more)
			}
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func hintLine(d Diagnostic) string {
	s := "- "
	switch {
	case lineColRE.MatchString(d.Pos):
		s += d.Pos + " "
	case d.Pos != "":
		s += d.Pos + ": " // a JSON path
	}
	s += oneLine(d.Message)
	if d.Fix != "" {
		s += "; fix: " + oneLine(d.Fix)
	}
	return truncate(s, maxHintLine-len("…\n")) + "\n" // truncate adds "…" when it cuts
}

// oneLine folds whitespace runs (newlines included) into single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
