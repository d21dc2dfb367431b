package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/loop"
)

// The smallest terminal the layout works in.
const minW, minH = 60, 16

// View draws the screen: header, body (the panes or a full-screen view),
// status line and help. It reads state only; every pane draws just the
// rows it shows.
func (m *model) View() string {
	if m.w <= 0 || m.h <= 0 {
		return ""
	}
	if m.w < minW || m.h < minH {
		return m.tooSmall()
	}
	if d, ok := m.modes.screen().(drawer); ok {
		return d.view()
	}
	lines := make([]string, 0, m.h)
	lines = append(lines, m.header())
	lines = append(lines, m.body()...)
	for _, l := range m.statusLines() {
		lines = append(lines, fit(l, m.w))
	}
	lines = append(lines, fit(" "+m.helpLine(), m.w))
	return strings.Join(lines, "\n")
}

func (m *model) tooSmall() string {
	msg := []string{fmt.Sprintf("terminal too small (need %d×%d)", minW, minH), fmt.Sprintf("now %d×%d", m.w, m.h)}
	out := make([]string, 0, m.h)
	for i := 0; i < (m.h-len(msg))/2; i++ {
		out = append(out, "")
	}
	for _, l := range msg {
		pad := max(0, (m.w-ansi.StringWidth(l))/2)
		out = append(out, cut(strings.Repeat(" ", pad)+l, m.w))
	}
	return strings.Join(out, "\n")
}

// layout sizes the panes for the current screen; Update calls it after
// every message so paging and scrolling know the heights.
func (m *model) layout() {
	if m.w < minW || m.h < minH {
		return
	}
	m.bodyH = m.h - 2 - len(m.statusLines())
	m.help.Width = m.w - 2
	leftW, condH := m.split()
	m.chain.SetSize(leftW, m.bodyH)
	m.conds.SetSize(m.w-leftW, condH)
	m.plan.SetSize(m.w-leftW, m.bodyH-condH)
	m.output.SetSize(m.w-leftW, m.bodyH-condH)
}

// split is the main view's geometry: the chain's width and the stop
// conditions' height.
func (m *model) split() (leftW, condH int) {
	leftW = m.w / 2
	if m.w >= 100 {
		leftW = m.w * 11 / 20
	}
	condH = min(m.conds.heightAt(m.w-leftW), max(3, m.bodyH/2, m.bodyH-8)) // two lines a condition or more; the plan keeps 6
	return leftW, condH
}

func (m *model) body() []string {
	h := m.bodyH
	if s := m.modes.screen(); s != nil {
		return s.body(m, m.w, h)
	}
	leftW, condH := m.split()
	lower := m.plan.lines
	if m.showsOutput() {
		lower = m.output.lines
	}
	right := append(m.conds.lines(m.w-leftW, condH), lower(m.w-leftW, h-condH)...)
	return besides(m.chain.lines(leftW, h), right)
}

// header is the first line: run, state, iteration, elapsed time, cost,
// tokens, provider and model, plan mode, and the sandbox the run is in.
func (m *model) header() string {
	if f, ok := top[framer](m.modes); ok {
		return f.header(m)
	}
	st := m.st
	parts := []string{st.bold.Render("ralph"), shortID(m.runID), m.stateBadge()}
	if m.task != "" { // a task's run in the batch view
		parts = []string{st.bold.Render("ralph"), m.task, shortID(m.runID), m.stateBadge()}
	}
	it := fmt.Sprintf("iter %d", m.iteration)
	if n := m.maxIterations(); n > 0 {
		it += fmt.Sprintf("/%d", n)
	}
	parts = append(parts, it, m.elapsed())
	spent, tokens := m.cost, m.tokens
	if c := m.output.call; c != nil && !c.ended { // the running agent call's spend so far; recorded when it ends
		spent += c.cost
		tokens += c.usage.Input + c.usage.Output + c.usage.CacheRead + c.usage.CacheWrite
	}
	cost := fmt.Sprintf("$%.2f", spent)
	if b := m.maxCost(); b > 0 {
		cost += fmt.Sprintf("/$%.2f", b)
	}
	parts = append(parts, cost)
	// What a narrow screen leaves out whole, rather than cut: the plan's
	// mode first, then the provider and model, then the tokens.
	var tok, pm, mode, ro, sbx string
	tok = fmtTokens(tokens) + " tok"
	if m.provider != "" {
		pm = m.provider
		if m.modelName != "" {
			pm += "/" + m.modelName
		}
	}
	if pl := m.plan.plan; pl != nil && pl.Mode != "" {
		mode = "plan " + pl.Mode
		if pl.Repairs == 1 {
			mode += " (1 repair)"
		} else if pl.Repairs > 1 {
			mode += fmt.Sprintf(" (%d repairs)", pl.Repairs)
		}
	}
	if !m.live {
		ro = st.dim.Render("read-only")
	}
	if m.sandbox != "" {
		sbx = "sandbox: " + m.sandbox
	}
	sep := st.dim.Render(" · ")
	for _, drop := range []*string{nil, &mode, &pm, &tok} {
		if drop != nil {
			*drop = ""
		}
		all := parts
		for _, p := range []string{tok, pm, mode, sbx, ro} {
			if p != "" {
				all = append(all, p)
			}
		}
		if line := " " + strings.Join(all, sep); ansi.StringWidth(line) <= m.w || drop == &tok {
			return fit(line, m.w)
		}
	}
	return ""
}

func (m *model) stateBadge() string {
	st := m.st
	name, style := titleCase(m.state), st.stateIdle
	switch m.state {
	case loop.StateRunning:
		style = st.stateRun
	case loop.StatePaused:
		style = st.statePause
	case loop.StateDone:
		style = st.stateOK
	case loop.StateFailed, loop.StateAborted:
		style = st.stateFail
	case loop.StateStopped:
		style = st.stateLimit
	case loop.StateIdle:
		name = "Starting"
		if !m.live {
			name = "Recorded"
		}
	}
	switch {
	case m.aborting && !m.ended():
		name, style = "Aborting…", st.stateFail
	case m.pauseAsked && m.state == loop.StateRunning:
		name, style = "Pausing…", st.statePause
	case !m.live && !m.loading && m.outcome == nil && m.following:
		name, style = "Running", st.stateRun
	case !m.live && !m.loading && m.outcome == nil && m.goesOn != "":
		name = "Running elsewhere"
	case !m.live && !m.loading && m.outcome == nil:
		name, style = "Interrupted", st.stateFail
	case m.live && m.runDone && m.outcome == nil:
		name, style = "Ended", st.stateFail
	}
	return style.Render(name)
}

func (m *model) elapsed() string {
	if m.started.IsZero() {
		return "--:--"
	}
	end := m.now()
	switch {
	case m.outcome != nil:
		end = m.outcome.at
	case !m.live || m.runDone:
		end = m.lastTime
	}
	return fmtClock(end.Sub(m.started))
}

// maxIterations and maxCost are the run's budgets, as its stop
// conditions bound it (set with the config).
func (m *model) maxIterations() int { return m.budget.Iterations }

func (m *model) maxCost() float64 { return m.budget.CostUSD }

// statusLines is the status line: the one thing the user most needs to
// know now — a question waiting for y/n, how the run ended, a pause, a
// rate-limit countdown — or the latest log line.
func (m *model) statusLines() []string {
	if p, ok := top[prompt](m.modes); ok { // a question, the filter's input
		return p.status(m)
	}
	if f, ok := top[framer](m.modes); ok {
		return f.status(m)
	}
	st := m.st
	switch {
	case m.quitting && !m.ended():
		return []string{st.statusAlert.Render(" Aborting… compensations run before the run ends · q again exits at once")}
	case m.ended():
		return m.outcomeLines()
	case m.loading:
		return []string{st.dim.Render(fmt.Sprintf(" Reading the run from the store… %d actions", m.loaded))}
	case m.wait != nil && m.wait.until.After(m.now()):
		return []string{st.statusAlert.Render(" Rate limited: retrying in "+countdown(m.wait.until, m.now())+" (at "+loop.WaitUntilText(m.wait.until, m.now())+")") +
			st.dim.Render(" — "+m.wait.reason)}
	case m.aborting:
		return []string{st.statusAlert.Render(" Aborting… compensations run before the run ends")}
	case m.state == loop.StatePaused:
		return []string{st.statusAlert.Render(" ⏸ Paused") + st.dim.Render(" — p resumes")}
	case m.pauseAsked:
		return []string{st.statusAlert.Render(" Pausing after the current step…") + st.dim.Render(" p cancels")}
	case m.skipping > 0:
		return []string{st.statusAlert.Render(fmt.Sprintf(" Skip requested: iteration %d is cancelled and recorded as skipped…", m.skipping)) +
			st.dim.Render(" its compensations run first")}
	case m.delayUntil.After(m.now()) && !m.tree.iterationOpen():
		return []string{st.statusAlert.Render(fmt.Sprintf(" Next iteration in %s", countdown(m.delayUntil, m.now()))) +
			st.dim.Render(" — [loop].delay")}
	case m.dropped > 0:
		return []string{st.warn.Render(fmt.Sprintf(" %d live events (logs, tokens) were dropped while the UI caught up; the chain is complete", m.dropped))}
	}
	return []string{st.dim.Render(" " + firstLine(m.lastLog))}
}

// countdown is the time left until until, in whole seconds rounded up, so
// it reaches 0s only when the wait is over.
func countdown(until, now time.Time) string {
	return fmtElapsed(until.Sub(now) + time.Second - 1)
}

// outcomeLines explain how the run ended: its state, the condition that
// ended it with its class and reason, and the evidence.
func (m *model) outcomeLines() []string {
	st := m.st
	o := m.outcome
	quit := st.dim.Render(" · q quits")
	if m.inBatch {
		quit = st.dim.Render(" · q back to the batch")
	}
	switch {
	case o != nil:
		mark, style := "■", st.statusAlert
		switch o.state {
		case loop.StateDone:
			mark, style = "✓", st.statusOK
		case loop.StateFailed, loop.StateAborted:
			mark, style = "✗", st.fail
		}
		first := style.Render(fmt.Sprintf(" %s %s by %s (%s)", mark, titleCase(o.state), o.condition, o.class)) +
			st.text.Render(": "+firstLine(o.reason))
		lines := []string{first + quit}
		if o.evidence != "" {
			lines = append(lines, st.dim.Render("   evidence: "+firstLine(o.evidence)))
		}
		return lines
	case m.runErr != nil:
		return []string{st.fail.Render(" ✗ The run stopped with an error: "+firstLine(m.runErr.Error())) + quit}
	case m.loadErr != nil:
		return []string{st.fail.Render(" ✗ Reading the run failed: "+firstLine(m.loadErr.Error())) + quit}
	case !m.live && m.goesOn != "":
		return []string{st.dim.Render(" The run goes on in "+m.goesOn+"; this shows what it recorded until now · ralph attach "+m.runID+" follows it live") + quit}
	case !m.live:
		return []string{st.statusAlert.Render(" ✗ Interrupted: the run has no closing action (it crashed or was killed)") +
			st.dim.Render(" · ralph resume "+m.runID+" continues it") + quit}
	}
	return []string{st.statusAlert.Render(" The run ended without a closing action") + quit}
}

// helpLine is the footer's short help for the current view, drawn once
// per view and width.
func (m *model) helpLine() string {
	key := helpKey{m.modes.screen(), m.w, m.approving() != nil && m.canApprove()}
	if s, ok := m.helpCache[key]; ok {
		return s
	}
	s := m.drawHelpLine()
	m.helpCache[key] = s
	return s
}

type helpKey struct {
	view      screen // nil: the panes
	w         int
	approving bool
}

func (m *model) drawHelpLine() string {
	k := &m.keys
	switch {
	case m.modes.screen() != nil:
		return m.help.ShortHelpView(m.modes.screen().footer(k))
	case m.approving() != nil && m.canApprove():
		return m.help.ShortHelpView(append([]keyBinding{k.Yes, k.No}, k.ShortHelp()...))
	}
	return m.help.ShortHelpView(k.ShortHelp())
}
