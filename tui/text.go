package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// Every width here is measured in terminal cells with x/ansi, which skips
// escape sequences and counts wide runes twice; nothing is cut by bytes.

// fit returns s cut or padded with spaces to exactly w cells, on one line
// (see oneLine). A cut line ends with "…".
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = oneLine(s)
	sw := ansi.StringWidth(s)
	switch {
	case sw == w:
		return s
	case sw < w:
		return s + strings.Repeat(" ", w-sw)
	}
	return ansi.Truncate(s, w, "…")
}

// cut shortens s to at most w cells, on one line (see oneLine), ending a
// cut with "…".
func cut(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = oneLine(s)
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// oneLine turns the control characters that move the terminal's cursor —
// newlines, carriage returns, tabs, and the rest of C0 but ESC — into
// spaces: text from the run (a goal over two lines, a multi-line error in
// a log line) would otherwise break a line of the layout in two. ESC is
// kept: it starts the styles' escape sequences.
func oneLine(s string) string {
	for i := 0; i < len(s); i++ {
		if isCursorControl(rune(s[i])) {
			return strings.Map(func(r rune) rune {
				if isCursorControl(r) {
					return ' '
				}
				return r
			}, s)
		}
	}
	return s
}

func isCursorControl(r rune) bool { return (r < 0x20 && r != 0x1b) || r == 0x7f }

// padLeft right-aligns s in w cells.
func padLeft(s string, w int) string {
	sw := ansi.StringWidth(s)
	if sw >= w {
		return s
	}
	return strings.Repeat(" ", w-sw) + s
}

// spread puts left and right on one line of w cells with spaces between,
// cutting left first when both do not fit.
func spread(left, right string, w int) string {
	rw := ansi.StringWidth(right)
	if rw >= w {
		return cut(right, w)
	}
	lw := w - rw - 1
	if rw == 0 {
		lw = w
	}
	l := cut(left, lw)
	gap := w - ansi.StringWidth(l) - rw
	return l + strings.Repeat(" ", gap) + right
}

// wrap breaks s into lines of at most w cells, at spaces where it can and
// anywhere where it must; existing newlines are kept.
func wrap(s string, w int) []string {
	if w <= 0 {
		return nil
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if ansi.StringWidth(line) <= w {
			out = append(out, line)
			continue
		}
		out = append(out, strings.Split(ansi.Wrap(line, w, " "), "\n")...)
	}
	return out
}

// firstLine is s up to its first newline, marked "…" when there was more.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// shortID abbreviates a run id for the header: "01a2…cc".
func shortID(id string) string {
	if len(id) <= 10 {
		return id
	}
	return id[:4] + "…" + id[len(id)-2:]
}

// fmtDur is a compact duration: 12ms, 4.1s, 3m05s, 2h10m.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0ms"
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// fmtClock is an elapsed time as mm:ss, or h:mm:ss past an hour.
func fmtClock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d.Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}

// fmtTokens is a token count: 950, 18.2k, 3.4M.
func fmtTokens(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1_000_000)
}

// titleCase upper-cases the first letter of an ASCII word.
func titleCase(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// fmtElapsed is a running row's elapsed time, in whole seconds: 0s, 42s,
// 3m05s, 1h02m.
func fmtElapsed(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// wrapWords wraps plain text at spaces only, so an id or a path with
// hyphens stays on one line; a word longer than w is cut into pieces of w.
func wrapWords(s string, w int) []string {
	if w <= 0 {
		return nil
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		body := strings.TrimLeft(line, " ")
		indent := line[:min(len(line)-len(body), w/2)] // kept, on every piece of the line
		w := w - len(indent)
		start := len(out)
		cur, curW := "", 0
		for _, word := range strings.Split(body, " ") {
			ww := ansi.StringWidth(word)
			if curW > 0 && curW+1+ww > w {
				out, cur, curW = append(out, cur), "", 0
			}
			for ww > w { // longer than a line: hard pieces
				if curW > 0 {
					out, cur, curW = append(out, cur), "", 0
				}
				out = append(out, ansi.Truncate(word, w, ""))
				word = ansi.TruncateLeft(word, w, "")
				ww = ansi.StringWidth(word)
			}
			if curW > 0 {
				cur += " "
				curW++
			}
			cur += word
			curW += ww
		}
		out = append(out, cur)
		for i := start; i < len(out); i++ {
			out[i] = indent + out[i]
		}
	}
	return out
}
