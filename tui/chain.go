package tui

import (
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// chainPane shows the causal chain as a live tree: iteration → plan → step
// → call, with fold markers, ✓ ✗ ! ⊘ ↷ ⟳ status marks and durations. Only the
// rows in view are drawn, each kept in a rowCache under the row with its
// version, so a frame costs the same with a hundred actions or a million. A running row shows how long it has been running; with a
// filter, each match shows the iteration it belongs to.
type chainPane struct {
	t       *tree
	st      *styles
	w, h    int // content size inside the border
	cursor  int // position of the selected row in t.visible
	offset  int // first visible position drawn
	sel     int32
	follow  bool // keep the newest row selected
	focused bool
	cache   rowCache[int32, rowVer, string]
	// now is the clock for a running row's elapsed time (nil: none shown).
	now func() time.Time
}

// rowVer is what a chain row's text depends on besides the width: the
// node's version, the tree's epoch (bumped when every row must be drawn
// again) and a running row's elapsed seconds. A chain row is never
// finished: folding it or noting it changes it at any time.
type rowVer struct {
	ver   uint16
	epoch uint32
	secs  int64 // a running row's elapsed seconds; -1 for others
}

func newChainPane(t *tree, st *styles) *chainPane {
	return &chainPane{t: t, st: st, sel: -1, follow: true}
}

// SetSize sets the pane's outer size, border included.
func (p *chainPane) SetSize(w, h int) {
	p.w, p.h = max(0, w-2), max(0, h-2)
	p.scroll()
}

// sync brings the visible list and the selection up to date after rows
// were added, folded or filtered.
func (p *chainPane) sync() {
	rebuilt := p.t.dirty
	p.t.sync()
	n := len(p.t.visible)
	if n == 0 {
		p.cursor, p.offset, p.sel = 0, 0, -1
		return
	}
	switch {
	case p.follow:
		p.cursor = n - 1
	case rebuilt && p.sel >= 0:
		p.cursor = p.find(p.sel)
	}
	p.cursor = min(max(p.cursor, 0), n-1)
	p.sel = p.t.visible[p.cursor]
	p.scroll()
}

// find returns the position of row idx, or of its nearest shown ancestor.
func (p *chainPane) find(idx int32) int {
	for i := idx; i >= 0; i = p.t.at(i).parent {
		for pos, v := range p.t.visible {
			if v == i {
				return pos
			}
		}
	}
	return 0
}

func (p *chainPane) scroll() {
	n := len(p.t.visible)
	if p.h <= 0 {
		return
	}
	if p.cursor < p.offset {
		p.offset = p.cursor
	}
	if p.cursor >= p.offset+p.h {
		p.offset = p.cursor - p.h + 1
	}
	p.offset = min(max(p.offset, 0), max(0, n-p.h))
}

// move moves the selection by d rows; moving up leaves follow mode.
func (p *chainPane) move(d int) {
	n := len(p.t.visible)
	if n == 0 {
		return
	}
	p.cursor = min(max(p.cursor+d, 0), n-1)
	p.sel = p.t.visible[p.cursor]
	p.follow = d > 0 && p.cursor == n-1 // reaching the newest row follows again
	p.scroll()
}

func (p *chainPane) page(d int) { p.move(d * max(1, p.h-1)) }

func (p *chainPane) home() {
	p.follow = false
	p.move(-len(p.t.visible))
}

// end selects the newest row and follows from then on.
func (p *chainPane) end() {
	p.follow = true
	p.sync()
}

// jump moves the selection to the next (d > 0) or previous filter match,
// wrapping around at either end (n and N).
func (p *chainPane) jump(d int) {
	n := len(p.t.visible)
	if n == 0 {
		return
	}
	p.cursor = ((p.cursor+d)%n + n) % n
	p.sel = p.t.visible[p.cursor]
	p.follow = false
	p.scroll()
}

// restore selects row sel again (or its nearest shown ancestor), and
// follows again if the pane followed then.
func (p *chainPane) restore(sel int32, follow bool) {
	if follow || sel < 0 {
		p.follow = follow
		p.sync()
		return
	}
	p.follow, p.sel = false, sel
	p.t.sync()
	p.cursor = p.find(sel)
	p.sync()
}

func (p *chainPane) toggleFollow() {
	if p.follow {
		p.follow = false
		return
	}
	p.end()
}

// selected is the selected row, if any.
func (p *chainPane) selected() (int32, bool) {
	if p.sel < 0 || len(p.t.visible) == 0 {
		return -1, false
	}
	return p.sel, true
}

// fold folds the selected row, or selects its parent when it is folded or
// has no children (←).
func (p *chainPane) fold() {
	idx, ok := p.selected()
	if !ok {
		return
	}
	n := p.t.at(idx)
	if n.first >= 0 && n.flags&flagFolded == 0 && p.t.filter == nil {
		p.t.setFolded(idx, true, true)
	} else if n.parent >= 0 {
		p.sel = n.parent
		if p.t.filter == nil {
			p.t.dirty = true // re-find the parent's position
		}
	}
	p.follow = false
	p.sync()
	if p.t.filter != nil {
		p.cursor = p.find(p.sel)
		p.scroll()
	}
}

// unfold unfolds the selected row, or moves to its first child (→).
func (p *chainPane) unfold() {
	idx, ok := p.selected()
	if !ok || p.t.filter != nil {
		return
	}
	n := p.t.at(idx)
	switch {
	case n.first < 0:
		return
	case n.flags&flagFolded != 0:
		p.t.setFolded(idx, false, true)
		p.follow = false
		p.sync()
	default:
		p.move(1)
	}
}

// Render draws the pane in its border.
func (p *chainPane) Render(width, height int) string {
	return strings.Join(p.lines(width, height), "\n")
}

func (p *chainPane) lines(width, height int) []string {
	title := "Causal chain"
	n := len(p.t.visible)
	right := strconv.Itoa(int(p.t.n)) + " rows"
	if f := p.t.filter; f != nil {
		title = "Causal chain · filter " + strconvQuote(f.raw)
		right = strconv.Itoa(n) + " match"
	}
	if p.follow {
		right += " · follow"
	}
	inner := width - 2
	rows := make([]string, 0, height-2)
	for pos := p.offset; pos < n && len(rows) < height-2; pos++ {
		idx := p.t.visible[pos]
		row := p.row(idx, inner-1)
		gutter := " "
		if idx == p.sel {
			gutter = "›"
			if p.focused {
				gutter = p.st.accent.Render("›")
				row = p.st.selected.Render(ansi.Strip(row))
			}
		}
		rows = append(rows, gutter+row)
	}
	if n == 0 {
		rows = append(rows, p.st.dim.Render(" waiting for the first action…"))
		if p.t.filter != nil {
			rows[0] = p.st.dim.Render(" no row matches; esc clears the filter")
		}
	}
	return p.st.frame(title, right, p.focused, width, height, rows)
}

func strconvQuote(s string) string { return "“" + s + "”" }

// row is row idx drawn w cells wide, from the cache when it is current.
func (p *chainPane) row(idx int32, w int) string {
	n := p.t.at(idx)
	secs := int64(-1)
	if el, ok := p.elapsed(idx, n); ok {
		secs = int64(el / time.Second)
	}
	v := rowVer{ver: n.ver, epoch: p.t.epoch, secs: secs}
	return p.cache.get(idx, w, v, false, func() string { return p.drawRow(idx, n, w) })
}

// elapsed is how long row idx has been running, when it is running in a
// live run.
func (p *chainPane) elapsed(idx int32, n *node) (time.Duration, bool) {
	if n.st != stRunning || n.kind == kindRun || p.t.ended || p.now == nil { // the header shows the run's
		return 0, false
	}
	at, ok := p.t.opened[idx]
	if !ok {
		return 0, false
	}
	return max(p.now().Sub(at), 0), true
}

func (p *chainPane) drawRow(idx int32, n *node, w int) string {
	st := p.st
	indent := min(int(n.depth)*2, w/3)
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", indent))
	switch {
	case n.first < 0:
		b.WriteString("  ")
	case n.flags&flagFolded != 0:
		b.WriteString(st.dim.Render("▸ "))
	default:
		b.WriteString(st.dim.Render("▾ "))
	}
	b.WriteString(p.mark(n))
	b.WriteByte(' ')
	label := n.label
	switch n.kind {
	case kindIteration, kindRun, kindRunEnd:
		b.WriteString(st.bold.Render(label))
	case kindGovernance, kindContract, kindLLM, kindRetry, kindOther:
		b.WriteString(st.dim.Render(label))
	default:
		b.WriteString(label)
	}
	if note, ok := p.t.notes[idx]; ok {
		b.WriteString("  ")
		switch n.st {
		case stFailed, stReported:
			b.WriteString(st.fail.Render(note))
		case stUnmet:
			b.WriteString(st.warn.Render(note))
		default:
			b.WriteString(st.dim.Render(note))
		}
	}
	var right []string
	if p.t.filter != nil { // a match out of its tree: say which iteration it is in
		if it := p.t.iterationOf(idx); it != "" && n.kind != kindIteration {
			right = append(right, "it "+it)
		}
	}
	if el, ok := p.elapsed(idx, n); ok {
		right = append(right, fmtElapsed(el))
	} else if n.durMS > 0 && n.st != stRunning {
		right = append(right, fmtDur(time.Duration(n.durMS)*time.Millisecond))
	}
	return spread(b.String(), st.dim.Render(strings.Join(right, " · ")), w)
}

func (p *chainPane) mark(n *node) string {
	st := p.st
	switch n.st {
	case stOK:
		return st.ok.Render("✓")
	case stFailed:
		return st.fail.Render("✗")
	case stReported:
		return st.fail.Render("!")
	case stCancelled:
		return st.warn.Render("⊘")
	case stUnmet:
		return st.warn.Render("○")
	case stSkipped:
		return st.dim.Render("↷")
	case stStop:
		return st.accent.Render("■")
	case stRunning:
		if p.t.ended { // the run ended without closing it: interrupted
			return st.fail.Render("✗")
		}
		return st.running.Render("⟳")
	}
	return st.dim.Render("·")
}
