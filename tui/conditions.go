package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/stop"
)

// condPane shows the stop conditions in priority order, two lines each:
// the first has the condition's glyph (its class when it has fired), name,
// priority, class, a progress bar, the percentage and its detail ("7/20");
// the second its one-line why (stop.Why: the first failing test, …), after
// the detail when the first line has no room for it. The condition closest
// to firing — the one that fired, else the highest progress — is coloured,
// and marked with › unless the pane is focused, when › is the selection
// (enter opens its full evidence). Conditions that do not fit are counted
// on a last line.
type condPane struct {
	st         *styles
	eval       *stop.Evaluation // the latest evaluation; nil before the first
	configured []stop.Result    // the configured conditions, shown until then
	focused    bool
	offset     int // the first condition shown
	sel        int // the selected condition, while focused
	h          int // inner height, in lines
	bar        progress.Model
	cache      rowCache[struct{}, condKey, []string] // the pane's lines, kept as one row
	prefKey    condKey                               // what pref was measured for
	pref       int
}

// condKey is what the pane's drawing depends on besides its width.
type condKey struct {
	eval              *stop.Evaluation
	n                 int
	w, h, offset, sel int
	focused           bool
}

func newCondPane(st *styles) *condPane {
	return &condPane{st: st, bar: progress.New(progress.WithoutPercentage(), progress.WithFillCharacters('█', '░'),
		progress.WithColorProfile(st.profile))}
}

// configuredConditions lists the conditions a config declares, so the pane
// is not empty before the first evaluation. Building them compiles
// predicates and looks commands up on PATH, so it runs where I/O belongs
// (the loader, or before the program starts), never in Update.
func configuredConditions(cfg *config.Config) []stop.Result {
	if cfg == nil {
		return nil
	}
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil { // the runner refused this config already; nothing to show in advance
		return nil
	}
	rs := make([]stop.Result, 0, len(conds))
	for _, c := range conds {
		rs = append(rs, stop.Result{Name: c.Name, Kind: c.Kind, Class: c.Class, Priority: c.Priority})
	}
	// Priority order, ties in config order, as the evaluator reports them.
	slices.SortStableFunc(rs, func(a, b stop.Result) int { return cmp.Compare(b.Priority, a.Priority) })
	return rs
}

func (p *condPane) setEvaluation(ev *stop.Evaluation) { p.eval = ev }

func (p *condPane) results() []stop.Result {
	if p.eval != nil {
		return p.eval.Results
	}
	return p.configured
}

// closest is the index of the condition closest to firing, or -1.
func (p *condPane) closest() int {
	rs := p.results()
	if p.eval == nil {
		return -1
	}
	if p.eval.ShouldStop {
		for i, r := range rs {
			if r.Name == p.eval.TriggeredBy {
				return i
			}
		}
	}
	best, bp := -1, 0.0
	for i, r := range rs {
		if r.Met {
			return i
		}
		if !r.TimedOut && r.Progress > bp {
			best, bp = i, r.Progress
		}
	}
	return best
}

// maxWhyLines is how many lines a condition's why may wrap to when the
// pane has the room.
const maxWhyLines = 3

// heightAt is the pane's preferred outer height at width: each condition's
// first line and its why, wrapped.
func (p *condPane) heightAt(width int) int {
	k := condKey{eval: p.eval, n: len(p.configured), w: width}
	if k == p.prefKey {
		return p.pref
	}
	rs := p.results()
	p.pref, p.prefKey = max(1, p.linesAt(rs, p.columns(rs, width-3), maxWhyLines))+2, k
	return p.pref
}

// whyLines shares the pane's spare lines among the shown conditions'
// whys, one line each at least and maxWhyLines at most: first the one
// closest to firing (hi), then the success conditions that do not hold
// (their why is what is left to fix), then the others in order.
func (p *condPane) whyLines(rs []stop.Result, c condCols, hi int, marker bool) []int {
	n := make([]int, len(rs))
	want := make([]int, len(rs))
	for i := range rs {
		n[i] = 1
		if !marker {
			_, why := p.row(&rs[i], false, c, maxWhyLines)
			want[i] = len(why)
		}
	}
	spare := p.h - 2*len(rs)
	order := make([]int, 0, len(rs))
	if hi >= 0 && hi < len(rs) {
		order = append(order, hi)
	}
	for pass := 0; pass < 2; pass++ {
		for i := range rs {
			first := rs[i].Class == stop.ClassSuccess && !rs[i].Met
			if i != hi && first == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		give := min(spare, want[i]-n[i])
		if give > 0 {
			n[i] += give
			spare -= give
		}
	}
	return n
}

// linesAt counts the lines all conditions take with whys of up to whyLines.
func (p *condPane) linesAt(rs []stop.Result, c condCols, whyLines int) int {
	n := 0
	for i := range rs {
		_, why := p.row(&rs[i], false, c, whyLines)
		n += 1 + len(why)
	}
	return n
}

// shown is how many conditions fit, and whether a line is left for the
// count of the hidden ones.
func (p *condPane) shown() (n int, marker bool) {
	all := len(p.results())
	if 2*all <= p.h {
		return all, false
	}
	return max(0, (p.h-1)/2), true
}

func (p *condPane) scrollBy(d int) {
	p.sel = min(max(p.sel+d, 0), max(0, len(p.results())-1))
	p.scroll()
}

// scroll keeps the selection in view.
func (p *condPane) scroll() {
	n, _ := p.shown()
	if p.sel < p.offset {
		p.offset = p.sel
	}
	if n > 0 && p.sel >= p.offset+n {
		p.offset = p.sel - n + 1
	}
	p.offset = min(max(p.offset, 0), max(0, len(p.results())-n))
}

// focus selects the condition closest to firing when the pane gets focus.
func (p *condPane) focus() {
	if c := p.closest(); c >= 0 {
		p.sel = c
	}
	p.scroll()
}

// selected is the selected condition, or nil.
func (p *condPane) selected() *stop.Result {
	rs := p.results()
	if p.sel < 0 || p.sel >= len(rs) {
		return nil
	}
	return &rs[p.sel]
}

// Render draws the pane in its border.
func (p *condPane) Render(width, height int) string {
	return strings.Join(p.lines(width, height), "\n")
}

func (p *condPane) lines(width, height int) []string {
	p.h = max(0, height-2)
	p.scroll()
	k := condKey{p.eval, len(p.configured), width, height, p.offset, p.sel, p.focused}
	return p.cache.get(struct{}{}, width, k, false, func() []string { return p.draw(width, height) })
}

func (p *condPane) draw(width, height int) []string {
	right := "not evaluated yet"
	if ev := p.eval; ev != nil {
		right = fmt.Sprintf("iteration %d · %s", ev.Iteration, fmtDur(ev.Duration))
		if width < 50 {
			right = fmt.Sprintf("iteration %d", ev.Iteration)
		}
	}
	rs := p.results()
	hi := p.closest()
	w := width - 3 // border and gutter
	cols := p.columns(rs, w)
	n, marker := p.shown()
	end := min(len(rs), p.offset+n)
	whyLines := p.whyLines(rs[p.offset:end], cols, hi-p.offset, marker)
	var rows []string
	for i := p.offset; i < end; i++ {
		gutter := " "
		if p.focused && i == p.sel || !p.focused && i == hi {
			gutter = p.st.accent.Render("›")
		}
		l1, why := p.row(&rs[i], i == hi, cols, whyLines[i-p.offset])
		rows = append(rows, gutter+l1)
		for _, l := range why { // the why under the name
			rows = append(rows, " "+l)
		}
	}
	if marker && len(rs) > 0 {
		rows = append(rows, p.st.dim.Render(cut(hiddenMarker(p.offset, len(rs)-p.offset-n), w+1)))
	}
	if len(rs) == 0 {
		rows = append(rows, p.st.dim.Render(" no stop conditions"))
	}
	return p.st.frame("Stop conditions", right, p.focused, width, height, rows)
}

// hiddenMarker says how many conditions are out of view and how to see them.
func hiddenMarker(above, below int) string {
	var parts []string
	if above > 0 {
		parts = append(parts, fmt.Sprintf("▲ %d above", above))
	}
	if below > 0 {
		parts = append(parts, fmt.Sprintf("▼ %d more", below))
	}
	return " " + strings.Join(parts, " · ") + " (tab here, ↑↓)"
}

// condCols is the layout of the condition rows at one width.
type condCols struct {
	w, nameW, barW int
	prio, class    bool
	detailW        int // room for the detail on the first line; a longer one goes to the second
}

// columns lays the rows out: the name at its full length, the percentage
// and the detail are never cut; the bar, the priority and the class give
// way first, and the detail moves to the second line when it must.
func (p *condPane) columns(rs []stop.Result, w int) condCols {
	c := condCols{w: w, barW: 4}
	detailW := 0
	for i := range rs {
		c.nameW = max(c.nameW, ansi.StringWidth(rs[i].Name))
		detailW = max(detailW, ansi.StringWidth(p.detail(&rs[i])))
	}
	const markW, pctW = 2, 5 // "✓ ", " 100%"
	const minBar = 6
	c.nameW = min(c.nameW, max(8, w-markW-pctW-1-minBar))
	rem := w - markW - c.nameW - 1 - pctW // what the bar, priority, detail and class share
	if rem >= minBar+4 {
		c.prio, rem = true, rem-4
	}
	if room := min(detailW, rem-minBar-1); room >= 6 {
		c.detailW = room
		rem -= 1 + room
	}
	if rem >= minBar+8 {
		c.class, rem = true, rem-8
	}
	c.barW = min(max(c.barW, rem), 20)
	return c
}

// detail is what the first line says after the percentage when it has
// room ("7/20"); nothing before the first evaluation.
func (p *condPane) detail(r *stop.Result) string {
	if p.eval == nil {
		return ""
	}
	return r.Detail
}

// condMark is a condition's glyph: · not met, ! timed out or could not
// run; once met, its class: ✓ success, ✗ failure, ■ a limit or an abort.
func condMark(st *styles, r *stop.Result) string {
	switch {
	case r.Err != "" || r.TimedOut:
		return st.warn.Render("!")
	case !r.Met:
		return st.dim.Render("·")
	case r.Class == stop.ClassSuccess:
		return st.ok.Render("✓")
	case r.Class == stop.ClassFailure:
		return st.fail.Render("✗")
	}
	return st.warn.Render("■")
}

// classStyle colours what belongs to a met condition by its class.
func classStyle(st *styles, c stop.Class) lipgloss.Style {
	switch c {
	case stop.ClassSuccess:
		return st.ok
	case stop.ClassFailure:
		return st.fail
	}
	return st.warn
}

// row is a condition's first line and its why, wrapped to at most
// whyLines lines, without the gutter.
func (p *condPane) row(r *stop.Result, closest bool, c condCols, whyLines int) (string, []string) {
	st := p.st
	name := fit(r.Name, c.nameW)
	switch {
	case r.Met:
		name = classStyle(st, r.Class).Bold(true).Render(name)
	case closest:
		name = st.accent.Render(name)
	}
	var b strings.Builder
	b.WriteString(condMark(st, r) + " " + name)
	if c.prio {
		b.WriteString(padLeft(fmt.Sprint(r.Priority), 4))
	}
	if c.class {
		b.WriteString(" " + fit(string(r.Class), 7))
	}
	pct := padLeft(fmt.Sprintf("%d%%", stop.Percent(r.Progress, r.Met)), 4)
	switch {
	case p.eval == nil || r.TimedOut || r.Err != "":
		pct = padLeft("—", 4)
	case r.Met:
		pct = "100%"
	}
	b.WriteString(" " + p.barView(r, closest, c.barW) + " " + pct)
	detail := p.detail(r)
	onFirst := detail != "" && ansi.StringWidth(detail) <= c.detailW
	if onFirst {
		b.WriteString(" " + st.dim.Render(detail))
	}
	second := r.Kind
	if p.eval != nil { // the detail when the first line had no room, the flags (cached, timed out, error), the why
		var parts []string
		if !onFirst && detail != "" {
			parts = append(parts, detail)
		}
		parts = append(parts, r.Flags()...)
		second = strings.Join(append(parts, stop.Why(r)), " · ")
	}
	style := st.dim
	switch {
	case r.Err != "" || r.TimedOut:
		style = st.warn
	case r.Met:
		style = classStyle(st, r.Class)
	}
	lines := wrap(second, max(1, c.w-2))
	if len(lines) > whyLines { // the last line shown ends in … (enter shows it all)
		lines[whyLines-1] = cut(strings.Join(lines[whyLines-1:], " "), max(0, c.w-2))
		lines = lines[:whyLines]
	}
	for i, l := range lines {
		lines[i] = "  " + style.Render(l)
	}
	return b.String(), lines
}

// barView is the condition's bubbles/progress bar, without its own label.
func (p *condPane) barView(r *stop.Result, closest bool, w int) string {
	p.bar.Width = w
	p.bar.FullColor = p.st.barFull
	p.bar.EmptyColor = p.st.barEmpty
	switch {
	case r.Met && r.Class == stop.ClassSuccess:
		p.bar.FullColor = p.st.barMet
	case r.Met && r.Class == stop.ClassFailure:
		p.bar.FullColor = p.st.barFail
	case r.Met:
		p.bar.FullColor = p.st.barLimit
	case closest:
		p.bar.FullColor = p.st.barClosest
	}
	v := r.Progress
	if r.Met {
		v = 1
	}
	if p.eval == nil || r.TimedOut || r.Err != "" {
		v = 0
	}
	return p.bar.ViewAs(v)
}
