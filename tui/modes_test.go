package tui

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/loop"
)

// asking reports whether a mode of type T is open.
func asking[T mode](m *model) bool {
	_, ok := top[T](m.modes)
	return ok
}

// probe is a mode for the stack's tests: it takes the keys in takes and
// counts every key it is given.
type probe struct {
	l     layer
	takes string
	got   []string
}

func (p *probe) layer() layer { return p.l }

func (p *probe) key(_ *model, k tea.KeyMsg) (bool, tea.Cmd) {
	p.got = append(p.got, k.String())
	for _, r := range p.takes {
		if string(r) == k.String() {
			return true, nil
		}
	}
	return false, nil
}

func TestModeStackPushRemove(t *testing.T) {
	t.Parallel()
	var s modeStack
	view, ask, plan := &probe{l: layerScreen}, &probe{l: layerQuestion}, &probe{l: layerApproval}
	s.push(view)
	s.push(ask)
	s.push(plan) // pushed last, it goes under the question
	if want := (modeStack{view, plan, ask}); !equalStacks(s, want) {
		t.Fatalf("stack %v, want %v", s, want)
	}
	other := &probe{l: layerScreen}
	s.push(other) // a view goes under both
	if want := (modeStack{view, other, plan, ask}); !equalStacks(s, want) {
		t.Fatalf("stack %v, want %v", s, want)
	}
	s.remove(plan)
	if want := (modeStack{view, other, ask}); !equalStacks(s, want) {
		t.Fatalf("after remove: %v, want %v", s, want)
	}
	if p, ok := top[*probe](s); !ok || p != ask {
		t.Errorf("top[*probe] = %v, want the question", p)
	}
	drop[*probe](&s)
	if len(s) != 0 {
		t.Errorf("drop left %v", s)
	}
	s.remove(view) // not open: nothing happens
	if _, ok := top[*probe](s); ok || s.screen() != nil || s.typing() != nil {
		t.Error("an empty stack has a mode")
	}
}

func equalStacks(a, b modeStack) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A key goes to the top mode; one it does not take goes down the stack,
// and to the page when no mode takes it.
func TestModeKeyRouting(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, false, 120, 40)
	feed(m, stored)
	low, high := &probe{l: layerScreen, takes: "x"}, &probe{l: layerApproval, takes: "y"}
	m.modes.push(low)
	m.modes.push(high)

	press(m, "y") // the top mode takes it
	if len(high.got) != 1 || len(low.got) != 0 {
		t.Fatalf("y: top got %v, below got %v; want only the top", high.got, low.got)
	}
	press(m, "x") // the top passes it, the one below takes it
	if len(high.got) != 2 || len(low.got) != 1 {
		t.Fatalf("x: top got %v, below got %v; want both", high.got, low.got)
	}
	follow := m.chain.follow
	press(m, "f") // neither takes it: the page toggles follow
	if len(high.got) != 3 || len(low.got) != 2 || m.chain.follow == follow {
		t.Fatalf("f: top got %v, below got %v, follow %v→%v; want both asked, then the page", high.got, low.got, follow, m.chain.follow)
	}
}

// Views are modes: opening one pushes it, the key that opened it (or
// esc) closes it, ? opens the help over it and esc goes back to it, and
// while a view is open no key reaches the panes.
func TestModeViews(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(2, false))
	m := testModel(t, st, false, 120, 40)
	feed(m, stored)
	m.Update(loadedMsg{})

	press(m, "l")
	if m.modes.screen() != m.logs || len(m.modes) != 1 {
		t.Fatalf("l opened %v, want the log view", m.modes)
	}
	follow := m.chain.follow
	press(m, "f") // the view takes it: the chain does not change
	if m.chain.follow != follow {
		t.Error("f in the log view reached the chain")
	}
	press(m, "?")
	if m.modes.screen() != m.helpV || m.helpV.from != m.logs || len(m.modes) != 2 {
		t.Fatalf("? in the log view: %v, want the help over the log view", m.modes)
	}
	press(m, "esc")
	if m.modes.screen() != m.logs {
		t.Fatalf("esc in the help went to %T, want the log view", m.modes.screen())
	}
	press(m, "v") // another view replaces it
	if m.modes.screen() != m.history || len(m.modes) != 1 {
		t.Fatalf("v in the log view: %v, want the history view alone", m.modes)
	}
	press(m, "v")
	if len(m.modes) != 0 {
		t.Fatalf("v in the history view left %v open", m.modes)
	}
	press(m, "l")
	press(m, "esc")
	if len(m.modes) != 0 {
		t.Fatalf("esc in the log view left %v open", m.modes)
	}
}

// A question takes every key; esc closes it and nothing else; a plan
// that asks while a question is open waits under it, and y then answers
// the question, not the plan.
func TestModeQuestions(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	m.hasDone = true
	feed(m, stored[:10])

	press(m, "l")
	press(m, "q")
	if !asking[quitMode](m) || m.modes.screen() != m.logs {
		t.Fatalf("q in the log view: %v, want the question over the log view", m.modes)
	}
	press(m, "j") // taken by the question: the log view does not scroll, nothing else opens
	press(m, "?")
	if len(m.modes) != 2 || !asking[quitMode](m) {
		t.Fatalf("keys under the question reached %v", m.modes)
	}
	m.askApproval(loop.PlanInfo{Iteration: 2, OK: true})
	if _, ok := m.modes[len(m.modes)-1].(quitMode); !ok || m.approving() == nil {
		t.Fatalf("a plan asking during the question: %v, want it under the question", m.modes)
	}
	press(m, "esc")
	if asking[quitMode](m) || m.modes.screen() != m.logs || m.approving() == nil {
		t.Fatalf("esc closed %v, want only the question closed", m.modes)
	}
	press(m, "esc")
	if m.modes.screen() != nil || m.approving() == nil {
		t.Fatalf("esc in the log view: %v, want only the plan awaiting approval left", m.modes)
	}
}
