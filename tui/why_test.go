package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/ledger"
)

// runesMsg is several runes in one read, as a terminal delivers tmux
// send-keys jjj, key repeat over SSH or a paste.
func runesMsg(s string, paste bool) tea.KeyMsg {
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s), Paste: paste}
}

func TestRunesInOneReadAreSeveralKeys(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	for _, paste := range []bool{false, true} {
		m := testModel(t, st, false, 120, 40)
		feed(m, stored)
		press(m, "g")
		from := m.chain.cursor
		_, cmd := m.Update(runesMsg("jjj", paste))
		runCmd(m, cmd)
		if got := m.chain.cursor - from; got != 3 {
			t.Errorf("paste %t: jjj in one read moved %d rows, want 3", paste, got)
		}
		// / opens the filter; the rest of the read is its text, and what
		// follows while it is open is text too, j included.
		m.Update(runesMsg("/kv.p", paste))
		m.Update(runesMsg("ut j", paste))
		if m.modes.typing() == nil || m.input.Value() != "kv.put j" {
			t.Errorf("paste %t: filter open %t, input %q; want the filter open with %q", paste, m.modes.typing() != nil, m.input.Value(), "kv.put j")
		}
	}
}

func TestConditionDetailAndClassColours(t *testing.T) {
	t.Parallel()
	m, _ := agentLoopModel(t, agentStuck, 80, 24)
	view := m.View()
	// The fired failure is a ✗, not a ✓, on its row and in the chain.
	if !strings.Contains(view, "›✗ stuck") || strings.Contains(view, "✓ stuck") {
		t.Errorf("the fired failure condition is not drawn as a failure:\n%s", view)
	}
	if !strings.Contains(view, "✗ stop conditions · STOP by stuck") {
		t.Errorf("the evaluation that stopped the run is not drawn as a failure:\n%s", view)
	}
	// tab to the conditions, down to the tests, enter: the evidence in full,
	// one output line a screen line, not an escaped string.
	press(m, "tab")
	if m.focus != focusConds || m.conds.sel != 2 {
		t.Fatalf("tab: focus %d, selection %d; want the conditions, on stuck (2)", m.focus, m.conds.sel)
	}
	press(m, "down")
	press(m, "down")
	press(m, "enter")
	if m.modes.screen() != m.condV {
		t.Fatalf("enter on a condition opened %T, want its detail", m.modes.screen())
	}
	view = ansi.Strip(m.View())
	for _, want := range []string{"Stop condition · tests", "why       FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5",
		"  $ go test ./...  ", "  --- FAIL: TestAdd (0.00s)", "      calc_test.go:7: Add(2, 3) = -1, want 5", "  FAIL calc 0.002s"} {
		if !strings.Contains(view, want) {
			t.Errorf("the condition's detail lacks %q:\n%s", want, view)
		}
	}
	if strings.Contains(view, `\n`) {
		t.Errorf("the evidence is escaped:\n%s", view)
	}
	press(m, "esc")
	if m.modes.screen() != nil {
		t.Errorf("esc left %T, want the main view", m.modes.screen())
	}
}

func TestHiddenConditionsAreCounted(t *testing.T) {
	t.Parallel()
	m, _ := agentLoopModel(t, agentMidRun, 60, 16)
	view := m.View()
	if !strings.Contains(view, "▼ 4 more") {
		t.Errorf("at 60×16 the hidden conditions are not counted:\n%s", view)
	}
	press(m, "tab")
	for i := 0; i < 4; i++ {
		press(m, "down")
	}
	if view := m.View(); !strings.Contains(view, "▲ ") || !strings.Contains(view, "tests") {
		t.Errorf("scrolled to the last condition, the view does not show it with the ones above counted:\n%s", view)
	}
}

// The detail of a failed iteration opens on its error, before the ids and
// hashes: at 80×24 it is on the first screen.
func TestFailedDetailOpensOnItsError(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, false, 80, 24)
	feed(m, stored)
	m.Update(loadedMsg{})
	selectSeq(t, m, seqOf(t, stored, ledger.IterationStarted, "iteration 2", 1))
	press(m, "enter")
	view := ansi.Strip(m.View())
	errAt := strings.Index(view, "error           iteration-2.rtfs:13:7: simulated failure in iteration 2")
	if errAt < 0 || errAt > strings.Index(view, "action_id") {
		t.Errorf("the failed iteration's detail does not open on its error:\n%s", view)
	}
}

// A why longer than its lines ends in an ellipsis after its own words.
func TestConditionWhyIsCutWithAnEllipsis(t *testing.T) {
	t.Parallel()
	m, _ := agentLoopModel(t, agentMidRun, 80, 24)
	rs := m.conds.results()
	c := m.conds.columns(rs, 37)
	_, why := m.conds.row(&rs[2], false, c, 1) // stuck: "no progress 1/3 · 1 unchanged iterations of 3 allowed"
	got := strings.TrimSpace(ansi.Strip(why[0]))
	if len(why) != 1 || !strings.HasSuffix(got, "…") || !strings.HasPrefix("no progress 1/3 · 1 unchanged iterations of 3 allowed", strings.TrimSuffix(got, "…")) {
		t.Errorf("why cut to one line = %q", why)
	}
}
