package tui

import (
	"slices"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// Modal input is a stack of modes, as crush's dialog overlay: a key goes
// to the top mode; a mode that does not take it passes it to the one
// below, and the last one to the page (pageKey: the panes). A full-screen
// view (history, detail, diff, log, help, a condition) is a mode that
// draws the body (screen); a question in the status line (quit?, abort?,
// the filter's input, a plan awaiting y/n) is a mode that draws the status
// line (prompt). Opening one is a push, closing it a remove; nothing else
// says which is open. tui/README.md says how to add one.

// layer orders the stack: a mode is pushed above the modes of its layer
// and the lower ones, and under the rest, so a plan that asks for approval
// while a question is open waits under the question.
type layer uint8

const (
	layerScreen   layer = iota // a full-screen view: takes every key it is given
	layerApproval              // a plan awaiting y/n: takes y and n, passes the rest down
	layerQuestion              // a question or the filter's input: takes every key
)

// mode is one modal input state of the UI.
type mode interface {
	layer() layer
	// key handles k; handled false passes k to the mode below, or to the
	// page under the last one. A mode that closes itself removes itself
	// from m.modes.
	key(m *model, k tea.KeyMsg) (handled bool, cmd tea.Cmd)
}

// screen is a mode that fills the body: a full-screen view. At most one
// screen is open, and the help over it (the one ? was pressed in).
type screen interface {
	mode
	scroller // the scroll keys and the mouse wheel
	body(m *model, width, height int) []string
	// footer is the short help under the view.
	footer(k *keyMap) []key.Binding
	// keysHelp is what ? lists over the view: a title and the bindings
	// that act in it.
	keysHelp(k *keyMap) (title string, groups []helpGroup)
}

// framer is a screen that draws the header and status line too, under
// the views opened over it (the batch view: a batch's, not a run's).
type framer interface {
	screen
	header(m *model) string
	status(m *model) []string
}

// drawer is a screen that draws the whole screen itself: a model of its
// own (a task's run opened from the batch view).
type drawer interface {
	screen
	view() string
}

// pinner is a screen that may be the UI's page (ralph view BATCH's batch
// view): the views opened in place of others open over it.
type pinner interface{ pinned() bool }

// prompt is a mode that fills the status line: its question or input.
type prompt interface {
	mode
	status(m *model) []string
}

// textMode is a mode that takes what is typed as text (the filter's
// input): the rest of a read of several runes reaches it whole, and the
// messages Update does not know (its cursor's blink) go to its field.
type textMode interface {
	mode
	// field is the input it types into. (Update calls the field's Update:
	// a message passed to an interface's method would escape, one
	// allocation for every message the UI gets.)
	field(m *model) *textinput.Model
}

// modeStack is the open modes, the top one last.
type modeStack []mode

// push opens md above the modes of its layer and the lower ones.
func (s *modeStack) push(md mode) {
	i := len(*s)
	for i > 0 && (*s)[i-1].layer() > md.layer() {
		i--
	}
	*s = slices.Insert(*s, i, md)
}

// remove closes md, wherever it is on the stack.
func (s *modeStack) remove(md mode) {
	*s = slices.DeleteFunc(*s, func(x mode) bool { return x == md })
}

// top is the top-most open mode of type T (a mode type or one of the
// interfaces above).
func top[T mode](s modeStack) (T, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if md, ok := s[i].(T); ok {
			return md, true
		}
	}
	var zero T
	return zero, false
}

// drop closes every open mode of type T.
func drop[T mode](s *modeStack) {
	*s = slices.DeleteFunc(*s, func(x mode) bool { _, ok := x.(T); return ok })
}

// screen is the full-screen view shown, nil while the panes show.
func (s modeStack) screen() screen {
	v, _ := top[screen](s)
	return v
}

// typing is the top mode when it takes text, else nil.
func (s modeStack) typing() textMode {
	if len(s) == 0 {
		return nil
	}
	t, _ := s[len(s)-1].(textMode)
	return t
}

// key routes one key: ctrl+c interrupts whatever is open; any other key
// goes down the stack from the top mode until one takes it, and to the
// page when none does.
func (m *model) key(k tea.KeyMsg) tea.Cmd {
	if k.String() == "ctrl+c" {
		return m.interrupt()
	}
	for i := len(m.modes) - 1; i >= 0; i-- {
		if handled, cmd := m.modes[i].key(m, k); handled {
			return cmd
		}
	}
	return m.pageKey(k)
}

// pageKey is a key no mode took: the keys that open views (switchKey),
// then the panes' (mainKey).
func (m *model) pageKey(k tea.KeyMsg) tea.Cmd {
	if ok, cmd := m.switchKey(k); ok {
		return cmd
	}
	return m.mainKey(k)
}

// switchKey handles the keys that act on the page and in every view: q
// asks to quit, ? opens the help over what is shown (or closes it), v the
// history and l the log in place of any view (or close them).
func (m *model) switchKey(k tea.KeyMsg) (bool, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Quit):
		return true, m.askQuit()
	case key.Matches(k, m.keys.Help):
		m.toggleHelp()
	case key.Matches(k, m.keys.History):
		if m.toggle(m.history) {
			return true, m.openHistory()
		}
	case key.Matches(k, m.keys.Log):
		m.toggle(m.logs)
	default:
		return false, nil
	}
	return true, nil
}

// screenKey is what a full-screen view does with a key: esc closes it,
// the keys of switchKey act, the rest scroll it. It takes every key, so
// none reaches the panes under it.
func (m *model) screenKey(s screen, k tea.KeyMsg) (bool, tea.Cmd) {
	if key.Matches(k, m.keys.Back) {
		m.modes.remove(s)
		return true, nil
	}
	if ok, cmd := m.switchKey(k); ok {
		return true, cmd
	}
	m.scrollKey(k, s)
	return true, nil
}

// show opens s in place of any open view but a pinned one (the page).
func (m *model) show(s screen) {
	m.modes = slices.DeleteFunc(m.modes, func(x mode) bool {
		_, isScreen := x.(screen)
		p, ok := x.(pinner)
		return isScreen && !(ok && p.pinned())
	})
	m.modes.push(s)
}

// toggle opens s in place of any open view, or closes it when it is the
// view shown; it reports whether s is open now.
func (m *model) toggle(s screen) bool {
	if m.modes.screen() == s {
		m.modes.remove(s)
		return false
	}
	m.show(s)
	return true
}

// toggleHelp opens the help over what is shown, listing its keys, or
// closes it, going back to that.
func (m *model) toggleHelp() {
	from := m.modes.screen()
	if from == m.helpV {
		m.modes.remove(m.helpV)
		return
	}
	m.helpV.from, m.helpV.offset = from, 0
	m.modes.push(m.helpV)
}

// fullScreen gives a view the keys of one that only scrolls: its footer
// and what ? lists over it. A view embeds it, named for the help's title
// ("Keys in " + name).
type fullScreen struct{ name string }

func (fullScreen) layer() layer { return layerScreen }

func (fullScreen) footer(k *keyMap) []key.Binding {
	return []key.Binding{k.move, k.PageDown, k.Back, k.Quit}
}

func (f fullScreen) keysHelp(k *keyMap) (string, []helpGroup) {
	return "Keys in " + f.name, []helpGroup{scrollGroup(k), {"This view", []key.Binding{k.Back, k.Help, k.Quit}}}
}

// scrollGroup is the help's group of the keys that move.
func scrollGroup(k *keyMap) helpGroup {
	return helpGroup{"Move", []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}}
}
