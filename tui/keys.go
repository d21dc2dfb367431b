package tui

import "github.com/charmbracelet/bubbles/key"

// keyMap holds every binding; the footer's short help and the help view
// (?) are generated from it, so what the UI says is what it does.
type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Fold, Unfold, Focus, Follow, Detail     key.Binding
	Back, Verify                            key.Binding
	Pause, Abort, Skip, Yes, No             key.Binding
	History, Log, Help, Filter, Quit        key.Binding
	Next, Prev                              key.Binding // filter matches
	Output                                  key.Binding // the agent's output or the plan
	Diff                                    key.Binding // the selected iteration's diff
	Batch                                   key.Binding // the batch a task's run is in

	// Display-only bindings: one help entry for a pair of keys.
	move, fold key.Binding
}

func newKeyMap() keyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return keyMap{
		Up:       b("↑/k", "up", "up", "k"),
		Down:     b("↓/j", "down", "down", "j"),
		PageUp:   b("pgup", "page up", "pgup", "ctrl+b"),
		PageDown: b("pgdn", "page down", "pgdown", "ctrl+f", " "),
		Top:      b("g", "first", "g", "home"),
		Bottom:   b("G", "last (follow)", "G", "end"),
		Fold:     b("←", "fold / parent", "left"),
		Unfold:   b("→", "unfold / child", "right"),
		Focus:    b("tab", "pane", "tab", "shift+tab"),
		Follow:   b("f", "follow", "f"),
		Detail:   b("enter", "detail", "enter"),
		Back:     b("esc", "back", "esc"),
		Verify:   b("r", "verify chain", "r"),
		Pause:    b("p", "pause", "p"),
		Abort:    b("a", "abort", "a"),
		Skip:     b("s", "skip", "s"),
		Yes:      b("y", "approve", "y"),
		No:       b("n", "decline", "n"),
		History:  b("v", "history", "v"),
		Log:      b("l", "log", "l"),
		Help:     b("?", "help", "?"),
		Filter:   b("/", "filter", "/"),
		Output:   b("o", "output/plan", "o"),
		Diff:     b("D", "iteration diff", "D"),
		Batch:    b("b", "its batch", "b"),
		Next:     b("n", "next match", "n"),
		Prev:     b("N", "prev match", "N"),
		Quit:     b("q", "quit", "q", "ctrl+c"),
		move:     b("↑↓", "move", "up", "down"),
		fold:     b("←→", "fold", "left", "right"),
	}
}

// live enables the bindings that control a run; a recorded run (ralph
// view), or one that has ended, has nothing to pause, abort or skip.
func (k *keyMap) live(on bool) {
	for _, b := range []*key.Binding{&k.Pause, &k.Abort, &k.Skip} {
		b.SetEnabled(on)
	}
}

// paused makes p say what it does now: resume a paused run, else pause.
func (k *keyMap) paused(on bool) {
	if on {
		k.Pause.SetHelp("p", "resume")
	} else {
		k.Pause.SetHelp("p", "pause")
	}
}

// filtered enables n and N while a filter is applied.
func (k *keyMap) filtered(on bool) {
	k.Next.SetEnabled(on)
	k.Prev.SetEnabled(on)
}

// ShortHelp is the footer line in the main layout, most useful first: the
// help bar cuts it at the screen's width, and disabled bindings (a
// control of a run that has ended, n/N without a filter) are left out.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Pause, k.Skip, k.Abort, k.Next, k.Prev, k.Focus, k.Follow, k.Log, k.Help, k.Quit, k.Batch, k.Filter,
		k.Output, k.Detail, k.History, k.move, k.fold}
}

// FullHelp is the help view's columns.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Fold, k.Unfold},
		{k.Focus, k.Follow, k.Output, k.Detail, k.Diff, k.Filter, k.Next, k.Prev, k.Back, k.Verify},
		{k.Pause, k.Abort, k.Skip, k.Yes, k.No},
		{k.History, k.Batch, k.Log, k.Help, k.Quit},
	}
}

// keyBinding is a binding in help lists.
type keyBinding = key.Binding
