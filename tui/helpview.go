package tui

import "strings"

// helpView lists every key binding (generated from the key map), the
// markers the panes use, and the filter syntax (?).
type helpView struct {
	st     *styles
	offset int
	h      int
	n      int
}

func (v *helpView) scrollBy(d int) { v.offset = min(max(v.offset+d, 0), max(0, v.n-v.h)) }

func (m *model) helpLines() []string {
	st := m.st
	full := m.help
	full.Width = max(0, m.w-4)
	out := []string{st.bold.Render("Keys"), ""}
	out = append(out, strings.Split(full.FullHelpView(m.keys.FullHelp()), "\n")...)
	out = append(out, "",
		st.bold.Render("Markers"),
		"",
		st.ok.Render("✓")+" succeeded   "+st.fail.Render("✗")+" failed or interrupted   "+st.running.Render("⟳")+
			" running   "+st.accent.Render("■")+" stopped the run   "+st.dim.Render("·")+" information",
		st.fail.Render("!")+" a call that ran but reported failure (exit ≠ 0, agent stopped); in stop conditions, timed out or could not run",
		st.warn.Render("⊘")+" cancelled by a skip, an abort or a signal   "+st.dim.Render("↷")+" a skipped iteration",
		st.dim.Render("▾")+" unfolded   "+st.dim.Render("▸")+" folded (→ opens)   "+st.accent.Render("›")+
			" selected row; in stop conditions, the one closest to firing",
		"",
		st.bold.Render("Filter (/)"),
		"",
		"  type:call     action type contains \"call\" (CapabilityCall, …)",
		"  fn:shell      function, step or capability name contains \"shell\"",
		"  is:failed     failed rows and calls that reported failure (also is:ok, is:running, is:cancelled, is:skipped)",
		"  other words   match the row's text; all words must match; enter keeps it, esc clears it",
		"  n / N         the next / previous match; each match shows its iteration (it 2)",
		"",
		st.bold.Render("Views"),
		"",
		"  v history     every stop-condition evaluation: progress changes, durations, cache hits, timeouts, what fired",
		"  enter detail  every field of the selected action, its hashes, checkpoint and verification",
		"  l log         the run's log lines",
		"",
		st.bold.Render("Quitting"),
		"",
		"  q or ctrl+c aborts a running loop (compensations run) and exits when it has ended;",
		"  pressing it again exits at once. After the run has ended, q exits.",
	)
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
	return m.st.frame("Help", "esc back", true, width, height, rows)
}
