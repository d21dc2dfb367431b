package tui

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/stop"
)

// condView is one stop condition's latest result in full (enter on a
// condition): its class, progress, why, reason, and its evidence as
// readable text — the command's output line by line, not an escaped
// string — scrollable.
type condView struct {
	fullScreen
	st        *styles
	r         stop.Result
	iteration int // the evaluation's; 0 before the first
	offset    int
	h         int
	ver       int                               // bumped when another result is set
	cache     rowCache[struct{}, int, []string] // the content, kept as one row
	text      []string                          // the content as last drawn
}

func newCondView(st *styles) *condView {
	return &condView{fullScreen: fullScreen{"a condition's detail"}, st: st}
}

func (v *condView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) { return m.screenKey(v, k) }

func (v *condView) body(_ *model, width, height int) []string { return v.lines(width, height) }

// set shows r, as evaluated after iteration it.
func (v *condView) set(r stop.Result, it int) {
	v.r, v.iteration, v.offset, v.text = r, it, 0, nil
	v.ver++
}

func (v *condView) scrollBy(d int) {
	v.offset = min(max(v.offset+d, 0), max(0, len(v.text)-v.h))
}

func (v *condView) lines(width, height int) []string {
	v.h = max(0, height-2)
	w := width - 3
	v.text = v.cache.get(struct{}{}, w, v.ver, false, func() []string { return v.content(w) })
	v.scrollBy(0)
	rows := make([]string, 0, v.h)
	for _, l := range v.text[v.offset:min(len(v.text), v.offset+v.h)] {
		rows = append(rows, " "+l)
	}
	right := "not evaluated yet"
	if v.iteration > 0 {
		right = fmt.Sprintf("after iteration %d", v.iteration)
	}
	if len(v.text) > v.h {
		right = fmt.Sprintf("%s · lines %d–%d of %d", right, v.offset+1, min(len(v.text), v.offset+v.h), len(v.text))
	}
	return v.st.frame("Stop condition · "+v.r.Name, right, true, width, height, rows)
}

// content is the view's text at width w.
func (v *condView) content(w int) []string {
	st, r := v.st, &v.r
	var out []string
	field := func(label, text string) {
		if text == "" {
			return
		}
		const labelW = 10
		for i, l := range wrapWords(clean(text), max(10, w-labelW)) {
			lab := strings.Repeat(" ", labelW)
			if i == 0 {
				lab = fit(label, labelW)
			}
			out = append(out, st.dim.Render(lab)+l)
		}
	}
	state := "not met"
	switch {
	case v.iteration == 0:
		state = "not evaluated yet"
	case r.Err != "":
		state = "could not be checked"
	case r.TimedOut:
		state = "timed out"
	case r.Met:
		state = "MET: stops the run (" + string(r.Class) + ")"
	}
	head := condMark(st, r) + " " + st.bold.Render(r.Name) + st.dim.Render(fmt.Sprintf(" · %s · priority %d · %s", r.Class, r.Priority, r.Kind))
	out = append(out, cut(head, w), "")
	field("state", state)
	if v.iteration > 0 {
		prog := fmt.Sprintf("%d%%", stop.Percent(r.Progress, r.Met))
		if r.Detail != "" {
			prog += " · " + r.Detail
		}
		field("progress", prog)
		field("why", stop.Why(r))
		field("reason", r.Reason)
		field("error", r.Err)
		took := fmtDur(r.Duration.Round(time.Microsecond))
		if flags := r.Flags(); len(flags) > 0 {
			took += " · " + strings.Join(flags, " · ")
		}
		field("took", took)
	}
	out = append(out, "", st.bold.Render("Evidence"))
	if r.Evidence == "" {
		return append(out, st.dim.Render("  none recorded"))
	}
	for _, l := range wrapWords(clean(r.Evidence), max(10, w-2)) {
		out = append(out, "  "+l)
	}
	return out
}
