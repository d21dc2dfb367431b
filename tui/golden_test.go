package tui

import (
	"fmt"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

func sizeMsg(w, h int) tea.WindowSizeMsg { return tea.WindowSizeMsg{Width: w, Height: h} }

// keyTypes are the named keys keyMsg knows; anything else is typed runes.
var keyTypes = map[string]tea.KeyType{
	"enter": tea.KeyEnter, "esc": tea.KeyEsc, "up": tea.KeyUp, "down": tea.KeyDown,
	"left": tea.KeyLeft, "right": tea.KeyRight, "tab": tea.KeyTab, "ctrl+c": tea.KeyCtrlC,
}

func keyMsg(s string) tea.KeyMsg {
	if k, ok := keyTypes[s]; ok {
		return tea.KeyMsg{Type: k}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

// press sends a key and runs the commands it returns, synchronously,
// feeding their messages back (store reads included): what the program
// would do, without a program.
func press(m *model, k string) {
	_, cmd := m.Update(keyMsg(k))
	runCmd(m, cmd)
}

func runCmd(m *model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	if m.modes.typing() != nil {
		return // the filter input's cursor blinks forever
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			runCmd(m, c)
		}
	case detailMsg, historyMsg, verifyMsg:
		_, next := m.Update(msg)
		runCmd(m, next)
	}
}

// selectSeq selects the chain row of the action at seq.
func selectSeq(t *testing.T, m *model, seq uint64) {
	t.Helper()
	for pos, idx := range m.tree.visible {
		if m.tree.at(idx).seq == seq {
			m.chain.follow, m.chain.cursor, m.chain.sel = false, pos, idx
			m.chain.scroll()
			return
		}
	}
	t.Fatalf("seq %d is not a visible row", seq)
}

// seqOf finds the n-th (1-based) action of type typ named fn.
func seqOf(t *testing.T, acts []ledger.Action, typ ledger.ActionType, fn string, n int) uint64 {
	t.Helper()
	for _, a := range acts {
		if a.Type == typ && a.FunctionName == fn {
			if n--; n == 0 {
				return a.Seq
			}
		}
	}
	t.Fatalf("no %s %s", typ, fn)
	return 0
}

func TestGolden(t *testing.T) {
	acts := scriptRun(3, true)
	st, stored := fixtureStore(t, acts)
	// Running: iteration 3 is inside its Count step.
	countStarted := seqOf(t, stored, ledger.PlanStepStarted, "Count", 3)
	running := stored[:countStarted+1] // seqs start at 1: this ends with the kv.get call
	cases := []struct {
		name  string
		setup func(t *testing.T, m *model)
	}{
		{"running", func(t *testing.T, m *model) {
			feed(m, running)
			m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventState, State: loop.StateRunning}}})
		}},
		{"paused", func(t *testing.T, m *model) {
			feed(m, running)
			m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventState, State: loop.StatePaused}}})
		}},
		{"stopped", func(t *testing.T, m *model) {
			feed(m, stored)
			m.Update(runDoneMsg{})
		}},
		{"history", func(t *testing.T, m *model) {
			feed(m, stored)
			m.Update(runDoneMsg{})
			press(m, "v")
		}},
		{"detail", func(t *testing.T, m *model) {
			feed(m, stored)
			m.Update(runDoneMsg{})
			selectSeq(t, m, seqOf(t, stored, ledger.CapabilityCall, "ccos.echo", 3))
			press(m, "enter")
			// The checkpoint was signed when the fixture store was built:
			// show it signed with the action, as a live run would.
			if p := m.detail.msg.proof; p != nil {
				p.CheckpointTime = m.detail.msg.action.Timestamp
			}
		}},
	}
	for _, c := range cases {
		for _, size := range [][2]int{{80, 24}, {120, 40}} {
			t.Run(fmt.Sprintf("%s/%dx%d", c.name, size[0], size[1]), func(t *testing.T) {
				m := testModel(t, st, true, size[0], size[1])
				c.setup(t, m)
				golden.RequireEqual(t, []byte(m.View()+"\n"))
			})
		}
	}
}
