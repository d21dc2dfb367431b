package tui

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/loop"
)

// The questions of the status line, modes on the stack (modes.go).

// quitMode is q's question in a foreground UI while the run goes on: y
// (or q) aborts the run and exits once it has ended, d detaches, n or esc
// stays. It takes every key.
type quitMode struct{}

func (quitMode) layer() layer { return layerQuestion }

func (quitMode) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Yes, m.keys.Quit):
		drop[quitMode](&m.modes)
		return true, m.quit()
	case k.String() == "d":
		drop[quitMode](&m.modes)
		return true, m.detach()
	case key.Matches(k, m.keys.No, m.keys.Back):
		drop[quitMode](&m.modes)
	}
	return true, nil
}

func (quitMode) status(m *model) []string {
	return []string{m.st.statusPrompt.Render(" Quit? y aborts the run · d detaches: it goes on, `ralph attach` reopens it · n stays")}
}

// abortMode is a's question: y aborts the run (its compensations run
// first), n, esc or a again keep it running, q quits. It takes every key.
type abortMode struct{}

func (abortMode) layer() layer { return layerQuestion }

func (abortMode) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Yes):
		drop[abortMode](&m.modes)
		return true, m.abort()
	case key.Matches(k, m.keys.No, m.keys.Back, m.keys.Abort):
		drop[abortMode](&m.modes)
	case key.Matches(k, m.keys.Quit):
		return true, m.quit()
	}
	return true, nil
}

func (abortMode) status(m *model) []string {
	return []string{m.st.statusPrompt.Render(" Abort the run? Compensations run first. y aborts · n keeps it running")}
}

// approveMode is a plan awaiting y/n (--approve): y runs it, n declines
// it and the iteration is skipped; every other key goes on down, so the
// views and the panes still work while it waits. It is pushed when the run
// asks (askApproval) and closed when answered or when the run ends. A UI
// with no Approver cannot answer: it says so and passes y and n down too.
type approveMode struct{ plan *loop.PlanInfo }

func (*approveMode) layer() layer { return layerApproval }

func (a *approveMode) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) {
	switch {
	case !m.canApprove():
		return false, nil
	case key.Matches(k, m.keys.Yes):
		return true, m.answer(a, true)
	case key.Matches(k, m.keys.No):
		return true, m.answer(a, false)
	}
	return false, nil
}

func (a *approveMode) status(m *model) []string {
	st := m.st
	if !m.canApprove() {
		return []string{st.statusAlert.Render(fmt.Sprintf(" The plan for iteration %d awaits approval, but this UI has no Approver to answer it", a.plan.Iteration))}
	}
	return []string{st.statusPrompt.Render(fmt.Sprintf(" Run the plan for iteration %d (shown on the right)? y runs it · n skips the iteration", a.plan.Iteration))}
}

// approving is the plan awaiting y/n, nil when none is.
func (m *model) approving() *loop.PlanInfo {
	if a, ok := top[*approveMode](m.modes); ok {
		return a.plan
	}
	return nil
}

// askApproval shows plan as awaiting y/n. The request comes from the bus
// (with the plan's mode and repairs) and from the Approver (which cannot be
// missed); whichever arrives first asks, the other fills in.
func (m *model) askApproval(p loop.PlanInfo) {
	if m.outcome != nil || p.Iteration <= m.answered {
		return
	}
	a, ok := top[*approveMode](m.modes)
	switch {
	case ok && a.plan.Iteration == p.Iteration && p.Mode == "":
		return // the bus already gave the fuller description
	case ok:
		a.plan = &p
	default:
		m.modes.push(&approveMode{plan: &p})
	}
	m.plan.setPlan(&p, true)
}

// answer sends y/n for the plan a awaits.
func (m *model) answer(a *approveMode, ok bool) tea.Cmd {
	it := a.plan.Iteration
	m.modes.remove(a)
	m.answered = it
	m.plan.approved()
	if !ok {
		m.lastLog = fmt.Sprintf("plan for iteration %d declined: the iteration is skipped", it)
	}
	return m.control(func(r Live) error { return r.Approve(it, ok) })
}
