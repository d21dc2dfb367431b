package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/progress"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/stop"
)

// condPane shows the stop conditions in priority order with a progress
// bar each, their class, detail ("7/20"), and whether the result came
// from the cache or timed out. The condition closest to firing — the one
// that fired, else the highest progress — is marked with › and coloured.
type condPane struct {
	st         *styles
	eval       *stop.Evaluation // the latest evaluation; nil before the first
	configured []stop.Result    // the configured conditions, shown until then
	focused    bool
	offset     int
	h          int
	bar        progress.Model
	cacheKey   condKey
	cache      []string
}

// condKey is what the pane's drawing depends on.
type condKey struct {
	eval         *stop.Evaluation
	n            int
	w, h, offset int
	focused      bool
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

// height is the pane's preferred outer height.
func (p *condPane) height() int { return max(1, len(p.results())) + 2 }

func (p *condPane) scrollBy(d int) {
	p.offset = min(max(p.offset+d, 0), max(0, len(p.results())-p.h))
}

// Render draws the pane in its border.
func (p *condPane) Render(width, height int) string {
	return strings.Join(p.lines(width, height), "\n")
}

func (p *condPane) lines(width, height int) []string {
	p.h = max(0, height-2)
	p.scrollBy(0)
	k := condKey{p.eval, len(p.configured), width, height, p.offset, p.focused}
	if k == p.cacheKey && p.cache != nil {
		return p.cache
	}
	p.cache, p.cacheKey = p.draw(width, height), k
	return p.cache
}

func (p *condPane) draw(width, height int) []string {
	right := "not evaluated yet"
	if ev := p.eval; ev != nil {
		right = fmt.Sprintf("iteration %d · %s", ev.Iteration, fmtDur(ev.Duration))
	}
	rs := p.results()
	hi := p.closest()
	w := width - 3 // border and gutter
	var rows []string
	for i := p.offset; i < len(rs) && len(rows) < p.h; i++ {
		gutter := " "
		if i == hi {
			gutter = p.st.accent.Render("›")
		}
		rows = append(rows, gutter+p.row(&rs[i], i == hi, w))
	}
	if len(rs) == 0 {
		rows = append(rows, p.st.dim.Render(" no stop conditions"))
	}
	return p.st.frame("Stop conditions", right, p.focused, width, height, rows)
}

func (p *condPane) row(r *stop.Result, closest bool, w int) string {
	st := p.st
	classW := 0
	if w >= 56 {
		classW = 8
	}
	barW := min(max(w/6, 5), 20)
	const markW, prioW, pctW = 2, 4, 5
	nameW := min(max(w-(markW+prioW+classW+barW+pctW+14), 8), 24)
	detailW := w - (markW + nameW + prioW + classW + barW + pctW + 1)

	mark := st.dim.Render("·")
	switch {
	case r.Err != "" || r.TimedOut:
		mark = st.warn.Render("!")
	case r.Met:
		mark = st.ok.Render("✓")
	}
	name := fit(r.Name, nameW)
	if closest {
		name = st.accent.Render(name)
	}
	class := ""
	if classW > 0 {
		class = " " + fit(string(r.Class), classW-1)
	}
	pct := padLeft(fmt.Sprintf("%d%%", stop.Percent(r.Progress, r.Met)), pctW-1)
	switch {
	case p.eval == nil || r.TimedOut || r.Err != "":
		pct = padLeft("—", pctW-1)
	case r.Met:
		pct = padLeft("100%", pctW-1)
	}
	bar := p.barView(r, closest, barW)
	detail := r.Detail
	if flags := r.Flags(); len(flags) > 0 {
		if detail != "" {
			detail += " · "
		}
		detail += strings.Join(flags, " · ")
	}
	if p.eval == nil {
		detail = r.Kind
	}
	return mark + " " + name + padLeft(fmt.Sprint(r.Priority), prioW) + class + " " + bar + " " + pct + " " +
		st.dim.Render(fit(detail, max(0, detailW-1)))
}

// barView is the condition's bubbles/progress bar, without its own label.
func (p *condPane) barView(r *stop.Result, closest bool, w int) string {
	p.bar.Width = w
	p.bar.FullColor = p.st.barFull
	p.bar.EmptyColor = p.st.barEmpty
	switch {
	case r.Met:
		p.bar.FullColor = p.st.barMet
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
