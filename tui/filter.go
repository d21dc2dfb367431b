package tui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// filter selects chain rows. Its text is words separated by spaces, all of
// which must match:
//
//	type:call     the action type contains "call" (CapabilityCall, …)
//	fn:shell      the function, step or capability name contains "shell"
//	is:failed     the row failed, or is a call that reported failure (also is:ok, is:running,
//	              is:cancelled, is:skipped)
//	anything      the row's text (type, name, error, details) contains it
//
// Matching ignores case.
type filter struct {
	raw    string
	types  []string
	fns    []string
	words  []string
	status []status
}

func parseFilter(s string) *filter {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	f := &filter{raw: s}
	for _, w := range strings.Fields(s) {
		switch {
		case strings.HasPrefix(w, "type:") && len(w) > 5:
			f.types = append(f.types, w[5:])
		case strings.HasPrefix(w, "fn:") && len(w) > 3:
			f.fns = append(f.fns, w[3:])
		case w == "is:failed":
			f.status = append(f.status, stFailed)
		case w == "is:ok":
			f.status = append(f.status, stOK)
		case w == "is:running":
			f.status = append(f.status, stRunning)
		case w == "is:cancelled":
			f.status = append(f.status, stCancelled)
		case w == "is:skipped":
			f.status = append(f.status, stSkipped)
		default:
			f.words = append(f.words, w)
		}
	}
	return f
}

// dependsOnStatus reports whether a row's match can change when it closes.
func (f *filter) dependsOnStatus() bool { return len(f.status) > 0 }

func (f *filter) match(t *tree, idx int32) bool {
	n := t.at(idx)
	for _, st := range f.status {
		if n.st != st && (st != stFailed || n.st != stReported) && (st != stOK || n.st != stUnmet) {
			return false
		}
	}
	typ := n.typ.String()
	for _, x := range f.types {
		if !containsFold(typ, x) {
			return false
		}
	}
	for _, x := range f.fns {
		if !containsFold(n.label, x) {
			return false
		}
	}
	if len(f.words) == 0 {
		return true
	}
	note := t.notes[idx]
	for _, x := range f.words {
		if !containsFold(n.label, x) && !containsFold(typ, x) && !containsFold(note, x) {
			return false
		}
	}
	return true
}

// containsFold reports whether sub occurs in s, ignoring case, without
// allocating.
func containsFold(s, sub string) bool {
	if sub == "" {
		return true
	}
	n := len(sub)
	for i := 0; i+n <= len(s); {
		if strings.EqualFold(s[i:i+n], sub) {
			return true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return false
}

// filterLiveLimit is the chain size up to which the filter applies as you
// type; past it, on enter.
const filterLiveLimit = 200_000

// filterMode is the filter's input in the status line (/), a mode
// (modes.go): everything typed is its text, applied as typed; enter keeps
// the filter, esc clears it and puts the chain back where it was when /
// opened.
type filterMode struct {
	sel    int32 // the chain's selection when / opened
	follow bool
}

// openFilter opens the filter's input, empty: the applied filter stays
// until typing replaces it.
func (m *model) openFilter() tea.Cmd {
	m.input.SetValue("")
	m.modes.push(&filterMode{sel: m.chain.sel, follow: m.chain.follow})
	return m.input.Focus()
}

func (*filterMode) layer() layer { return layerQuestion }

func (*filterMode) status(m *model) []string { return []string{" " + m.input.View()} }

func (*filterMode) field(m *model) *textinput.Model { return &m.input }

func (f *filterMode) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) {
	switch k.Type {
	case tea.KeyEnter:
		m.closeFilter(f)
		m.setFilter(m.input.Value())
		return true, nil
	case tea.KeyEsc: // no filter, and the chain where it was when / opened
		m.closeFilter(f)
		m.input.SetValue("")
		m.setFilter("")
		m.chain.restore(f.sel, f.follow)
		return true, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	if m.tree.n <= filterLiveLimit {
		m.setFilter(m.input.Value())
	}
	return true, cmd
}

func (m *model) closeFilter(f *filterMode) {
	m.modes.remove(f)
	m.input.Blur()
}

// setFilter applies the filter s says (none for "") to the chain.
func (m *model) setFilter(s string) {
	f := parseFilter(s)
	if (f == nil) == (m.tree.filter == nil) && (f == nil || f.raw == m.tree.filter.raw) {
		return
	}
	m.tree.setFilter(f)
	m.chain.follow = f == nil && m.chain.follow
	m.chain.sync()
}
