package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// helpView lists the keys of the view it was opened from (generated from
// the key map: only bindings that act there and then), the markers the
// panes use, and the filter syntax (?), wrapped to the screen's width.
type helpView struct {
	fullScreen
	st     *styles
	from   screen // the view ? was pressed in (nil: the panes); the help lists its keys
	offset int
	h      int
	n      int
}

func newHelpView(st *styles) *helpView { return &helpView{fullScreen: fullScreen{"the help"}, st: st} }

func (v *helpView) scrollBy(d int) { v.offset = min(max(v.offset+d, 0), max(0, v.n-v.h)) }

func (v *helpView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) { return m.screenKey(v, k) }

func (v *helpView) body(m *model, width, height int) []string { return m.renderHelp(width, height) }

// helpGroup is a titled list of bindings.
type helpGroup struct {
	title string
	keys  []key.Binding
}

// pageHelp is the bindings that act on the panes, grouped.
func (m *model) pageHelp() []helpGroup {
	k := &m.keys
	scroll := scrollGroup(k)
	scroll.keys = append(scroll.keys, k.Fold, k.Unfold)
	detail := key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "detail of a row/condition"))
	run := []key.Binding{k.Pause, k.Abort, k.Skip}
	if m.canApprove() { // y/n answer a plan only where a plan can be approved
		run = append(run, k.Yes, k.No)
	}
	return []helpGroup{
		scroll,
		{"Panes", []key.Binding{k.Focus, k.Follow, k.Output, detail, k.Filter, k.Next, k.Prev, k.Back}},
		{"The run", run},
		{"Views", []key.Binding{k.History, k.Batch, k.Log, k.Help, k.Quit}},
	}
}

// keyLines lays a group's enabled bindings out in as many columns as fit w.
func (m *model) keyLines(g helpGroup, w int) []string {
	st := m.st
	var keys []key.Binding
	keyW, descW := 0, 0
	for _, b := range g.keys {
		if !b.Enabled() {
			continue
		}
		keys = append(keys, b)
		keyW = max(keyW, ansi.StringWidth(b.Help().Key))
		descW = max(descW, ansi.StringWidth(b.Help().Desc))
	}
	if len(keys) == 0 {
		return nil
	}
	colW := min(keyW+1+descW+3, w)
	cols := max(1, w/colW)
	rows := (len(keys) + cols - 1) / cols
	out := []string{st.bold.Render(g.title)}
	for r := 0; r < rows; r++ {
		var line strings.Builder
		for c := 0; c < cols; c++ {
			i := c*rows + r
			if i >= len(keys) {
				break
			}
			h := keys[i].Help()
			cell := st.helpKey.Render(fit(h.Key, keyW)) + " " + st.helpDesc.Render(h.Desc)
			line.WriteString(fit(cell, colW))
		}
		out = append(out, "  "+strings.TrimRight(cut(line.String(), w), " "))
	}
	return out
}

// quitText says what q and ctrl+c do now.
func (m *model) quitText() string {
	switch {
	case !m.live || m.ended():
		return "q or ctrl+c exits."
	case m.attached:
		return "q or ctrl+c detaches: the run goes on in its own process, `ralph attach` reopens it; a aborts it, after asking."
	}
	return "q asks: y aborts the run (compensations run) and exits when it has ended · d detaches: the run goes on, " +
		"`ralph attach` reopens it · n stays. ctrl+c aborts without asking; pressed again, it exits at once."
}

func (m *model) helpLines() []string {
	st := m.st
	w := max(20, m.w-4)
	var out []string
	para := func(lines ...string) {
		for _, l := range lines {
			for _, p := range wrapWords(l, w-2) {
				out = append(out, "  "+p)
			}
		}
	}
	from := m.helpV.from
	title, groups := "Keys", m.pageHelp()
	if from != nil {
		title, groups = from.keysHelp(&m.keys)
	}
	out = append(out, st.bold.Render(title), "")
	for _, g := range groups {
		out = append(out, m.keyLines(g, w)...)
	}
	out = append(out, "", st.bold.Render("Quitting"))
	para(m.quitText())
	if from != nil {
		return out
	}
	out = append(out, "", st.bold.Render("Markers"))
	para("✓ succeeded · ✗ failed or interrupted · ⟳ running · ■ stopped the run · · information",
		"○ an iteration that ran, after which no success condition held (its note: the first one's why)",
		"! a call that ran but reported failure (exit ≠ 0, agent stopped); in stop conditions, timed out or could not run",
		"⊘ cancelled by a skip, an abort or a signal · ↷ a skipped iteration",
		"▾ unfolded · ▸ folded (→ opens) · › the selected row",
		"Stop conditions: · not met; once met, by class: ✓ success, ✗ failure, ■ limit. › is the one closest to "+
			"firing, or the selection while the pane has focus; the line under each is its why.")
	out = append(out, "", st.bold.Render("Filter (/)"))
	para(`type:call    action type contains "call" (CapabilityCall, …)`,
		`fn:shell     function, step or capability name contains "shell"`,
		"is:failed    failed rows and calls that reported failure (also is:ok, is:running, is:cancelled, is:skipped)",
		"other words  match the row's text; all words must match; enter keeps it, esc clears it",
		"n / N        the next / previous match; each match shows its iteration (it 2)")
	out = append(out, "", st.bold.Render("Views"))
	para("v history    every stop-condition evaluation: progress changes, whys, durations, cache hits, what fired",
		"enter        on the chain: every field of the action, its hashes, checkpoint and verification; "+
			"on a stop condition: its result and evidence in full",
		"l log        the run's log lines")
	return out
}

func (m *model) renderHelp(width, height int) []string {
	v := m.helpV
	v.h = max(0, height-2)
	lines := m.helpLines()
	v.n = len(lines)
	v.scrollBy(0)
	rows := make([]string, 0, v.h)
	for _, l := range lines[v.offset:min(len(lines), v.offset+v.h)] {
		rows = append(rows, " "+l)
	}
	right := "esc back"
	if v.n > v.h {
		right = "↑↓ more · esc back"
	}
	return m.st.frame("Help", right, true, width, height, rows)
}
