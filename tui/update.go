package tui

import (
	"strconv"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// Messages the program receives from outside Update.
type (
	// eventsMsg is a batch of the run's events, from the forwarder; more
	// says it had more ready than the batch holds.
	eventsMsg struct {
		events []loop.Event
		more   bool
	}
	// configMsg is the config recorded with the run and the conditions it
	// declares (read by the loader).
	configMsg struct {
		cfg   *config.Config
		conds []stop.Result
	}
	// loadedMsg says a recorded run has been read to its end.
	loadedMsg struct{ err error }
	// runDoneMsg says runner.Run returned.
	runDoneMsg struct{ err error }
	// controlErrMsg says a control (pause, skip, …) did not reach the run.
	controlErrMsg struct{ err error }
	tickMsg       time.Time
)

// Update routes one message. It does no I/O: reads of the store and calls
// into the runner are returned as commands.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	return m, tea.Batch(cmd, m.retitle())
}

// update is Update but for the title: a task's run view (taskRunView) is
// a model updated by the root one, whose title says what it shows.
func (m *model) update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		if v, ok := top[*taskRunView](m.modes); ok {
			v.sub.update(msg)
		}
	case taskRunMsg, followMsg, batchRecordMsg, batchPartMsg:
		cmd = m.batchMsg(msg)
	case eventsMsg:
		cmd = m.events(msg)
	case configMsg:
		m.setConfig(msg.cfg, msg.conds)
	case recordedOutputMsg:
		m.recordedOutput(msg)
	case loadedMsg:
		m.loading, m.loadErr = false, msg.err
		if m.goesOn == "" { // a run still going on has not ended: its open rows are running, not interrupted
			m.tree.end()
		}
	case runDoneMsg:
		if m.runEnded(msg.err) {
			return tea.Quit
		}
	case tickMsg:
		m.ticking = false
		cmd = tea.Batch(m.tick(), m.pollBatch())
	case titleMsg:
		cmd = m.setTitle(msg)
	case approveMsg:
		m.askApproval(loop.PlanInfo{Iteration: msg.iteration, Source: msg.plan, OK: true})
		cmd = waitApproval(m.approver)
	case detailMsg:
		m.detail.set(msg)
	case diffMsg:
		m.diff.set(msg)
	case diffStatMsg:
		m.statsAsked = max(0, m.statsAsked-1)
		m.setSummary(msg)
	case historyMsg:
		m.history.set(msg)
	case controlErrMsg:
		m.lastLog = msg.err.Error()
	case verifyMsg:
		m.verify = &verifyState{report: msg.report, err: msg.err}
	case tea.KeyMsg:
		cmd = m.keys1by1(msg)
	case tea.MouseMsg:
		m.mouse(msg)
	default:
		if t := m.modes.typing(); t != nil { // the filter input's cursor blink
			f := t.field(m)
			*f, cmd = f.Update(msg)
		}
	}
	m.syncControls()
	m.layout()
	return cmd
}

// events takes a batch of the run's events from the forwarder.
func (m *model) events(msg eventsMsg) tea.Cmd {
	var cmds []tea.Cmd
	for i := range msg.events {
		e := &msg.events[i]
		if !m.live && e.Kind == loop.EventAction {
			m.loaded++
		}
		if m.batchV != nil && e.Kind == loop.EventAction && m.batchV.b.observe(e.Action) && e.Action.RunID != m.runID {
			m.seq = max(m.seq, e.Action.Seq) // a task run's, which the batch view shows
			cmds = append(cmds, m.feedTaskRun(e))
			continue
		}
		m.event(e)
		if !m.live && e.Kind == loop.EventAction {
			m.noteRecordedCall(e.Action)
		}
	}
	m.chain.sync()
	m.queued = msg.more
	return tea.Batch(append(cmds, m.afterEvents())...)
}

// runEnded takes runner.Run's return: the rows still open end, and a plan
// awaiting y/n waits no more. It reports whether a quit waited for it.
func (m *model) runEnded(err error) (quit bool) {
	m.runDone, m.runErr = true, err
	m.tree.end()
	drop[*approveMode](&m.modes) // nothing waits for the answer now
	m.wait = nil
	return m.quitting
}

// syncControls turns the run's controls (p, a, s) off once it has ended,
// so the footer and the help offer only keys that act, and drops an abort
// question the end has made moot.
func (m *model) syncControls() {
	on := m.live && !m.ended()
	if !on {
		drop[abortMode](&m.modes)
		drop[quitMode](&m.modes)
	}
	paused := m.state == loop.StatePaused || m.pauseAsked
	filtered := m.tree.filter != nil
	output := m.output.call != nil || m.recordedCall
	quit := "quit" // what q does: a recorded or ended run
	switch {
	case m.inBatch:
		quit = "back" // to the batch view
	case on && m.attached:
		quit = "detach" // an attached UI leaves a running run going
	case on:
		quit = "quit…" // it asks: abort, detach or stay
	}
	batch := m.batchOf != "" && !m.inBatch && m.scanner != nil // b: a task's run opens its batch
	if m.keys.Pause.Enabled() != on || (m.keys.Pause.Help().Desc == "resume") != paused || m.keys.Next.Enabled() != filtered ||
		m.keys.Output.Enabled() != output || m.keys.Quit.Help().Desc != quit || m.keys.Batch.Enabled() != batch {
		m.keys.live(on)
		m.keys.paused(paused)
		m.keys.filtered(filtered)
		m.keys.Output.SetEnabled(output) // o only once an agent has streamed
		m.keys.Batch.SetEnabled(batch)
		m.keys.Quit.SetHelp("q", quit)
		clear(m.helpCache) // the footer is drawn from the bindings
	}
}

// afterEvents finishes a quit that waited for the run to end, and keeps
// an open history view current.
func (m *model) afterEvents() tea.Cmd {
	if m.quitting && m.ended() {
		return tea.Quit
	}
	asked := len(m.checkpoints.asked)
	sums := m.checkpoints.summaries(m.ctx)
	m.statsAsked += len(m.checkpoints.asked) - asked
	if m.modes.screen() == m.history && m.historyStale && !m.history.loading {
		return tea.Batch(m.openHistory(), sums)
	}
	return sums
}

// tick drives the header's clock and the rate-limit countdown while a
// live run goes on.
func (m *model) tick() tea.Cmd {
	if m.ticking || !(m.live || m.following) || m.ended() {
		return nil
	}
	m.ticking = true
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func waitDone(done <-chan error) tea.Cmd {
	if done == nil {
		return nil
	}
	return func() tea.Msg { return runDoneMsg{err: <-done} }
}

// keys1by1 handles the runes of one read one key at a time: the terminal
// delivers "jjj" (tmux send-keys, key repeat over SSH, a paste) as one
// message, which is three moves. Once a key opens a mode that takes text
// (the filter), the rest of the read is its text.
func (m *model) keys1by1(k tea.KeyMsg) tea.Cmd {
	if k.Type != tea.KeyRunes || len(k.Runes) < 2 || m.modes.typing() != nil {
		return m.key(k)
	}
	var cmds []tea.Cmd
	for i, r := range k.Runes {
		if m.modes.typing() != nil {
			rest := k
			rest.Runes = k.Runes[i:]
			cmds = append(cmds, m.key(rest))
			break
		}
		one := k
		one.Runes, one.Paste = []rune{r}, false
		cmds = append(cmds, m.key(one))
	}
	return tea.Batch(cmds...)
}

// scroller is what the scroll keys and the mouse wheel move.
type scroller interface{ scrollBy(int) }

// scrollKey moves s by the key's step: a line, a page, to either end.
func (m *model) scrollKey(k tea.KeyMsg, s scroller) {
	page := max(1, m.bodyH-3)
	switch {
	case key.Matches(k, m.keys.Up):
		s.scrollBy(-1)
	case key.Matches(k, m.keys.Down):
		s.scrollBy(1)
	case key.Matches(k, m.keys.PageUp):
		s.scrollBy(-page)
	case key.Matches(k, m.keys.PageDown):
		s.scrollBy(page)
	case key.Matches(k, m.keys.Top):
		s.scrollBy(-1 << 30)
	case key.Matches(k, m.keys.Bottom):
		s.scrollBy(1 << 30)
	}
}

func (m *model) mainKey(k tea.KeyMsg) tea.Cmd {
	ks := m.keys
	switch {
	case key.Matches(k, ks.Focus):
		d := 1
		if k.String() == "shift+tab" {
			d = numFocus - 1
		}
		m.setFocus((m.focus + d) % numFocus)
	case key.Matches(k, ks.Follow):
		m.chain.toggleFollow()
	case key.Matches(k, ks.Detail) && m.focus == focusConds:
		m.openCond()
	case key.Matches(k, ks.Detail):
		return m.openDetail()
	case key.Matches(k, ks.Diff):
		return m.openDiff()
	case key.Matches(k, ks.Batch):
		return m.openBatchOf()
	case key.Matches(k, ks.Filter):
		return m.openFilter()
	case key.Matches(k, ks.Back) && m.tree.filter != nil:
		m.setFilter("")
	case key.Matches(k, ks.Next, ks.Prev) && m.tree.filter != nil:
		d := 1
		if key.Matches(k, ks.Prev) {
			d = -1
		}
		m.chain.jump(d)
	case key.Matches(k, ks.Pause):
		return m.pause()
	case key.Matches(k, ks.Abort):
		if m.live && !m.ended() && !m.aborting {
			m.modes.push(abortMode{})
		}
	case key.Matches(k, ks.Skip):
		return m.skip()
	case key.Matches(k, ks.Output): // the agent's output or the plan, whichever is hidden
		if m.showsOutput() {
			m.outputShown = 2
		} else {
			m.outputShown = 1
		}
		if !m.live && m.output.call == nil { // a recorded run: its last agent call's output, from its file
			return loadRecordedOutput(m.ctx, m.store, m.storeDir, m.runID)
		}
	case m.focus == focusChain:
		m.chainKey(k)
	case m.focus == focusConds:
		m.scrollKey(k, m.conds)
	case m.focus == focusPlan && m.showsOutput():
		m.scrollKey(k, m.output)
	case m.focus == focusPlan:
		m.scrollKey(k, m.plan)
	}
	return nil
}

func (m *model) chainKey(k tea.KeyMsg) {
	c, ks := m.chain, m.keys
	switch {
	case key.Matches(k, ks.Up):
		c.move(-1)
	case key.Matches(k, ks.Down):
		c.move(1)
	case key.Matches(k, ks.PageUp):
		c.page(-1)
	case key.Matches(k, ks.PageDown):
		c.page(1)
	case key.Matches(k, ks.Top):
		c.home()
	case key.Matches(k, ks.Bottom):
		c.end()
	case key.Matches(k, ks.Fold):
		c.fold()
	case key.Matches(k, ks.Unfold):
		c.unfold()
	}
}

func (m *model) setFocus(f int) {
	m.focus = f
	m.chain.focused, m.conds.focused, m.plan.focused = f == focusChain, f == focusConds, f == focusPlan
	m.output.focused = m.plan.focused
	if m.conds.focused {
		m.conds.focus()
	}
}

// openCond shows the selected stop condition in full.
func (m *model) openCond() {
	r := m.conds.selected()
	if r == nil {
		return
	}
	it := 0
	if m.conds.eval != nil {
		it = m.conds.eval.Iteration
	}
	m.condV.set(*r, it)
	m.show(m.condV)
}

func (m *model) mouse(msg tea.MouseMsg) {
	if msg.Action != tea.MouseActionPress {
		return
	}
	d := 0
	switch msg.Button {
	case tea.MouseButtonWheelUp:
		d = -3
	case tea.MouseButtonWheelDown:
		d = 3
	default:
		return
	}
	if v, ok := m.modes.screen().(*taskRunView); ok { // a task's run: its panes take the wheel where it turns
		v.sub.mouse(msg)
		return
	}
	if s := m.modes.screen(); s != nil {
		s.scrollBy(d)
		return
	}
	leftW, condH := m.split()
	switch {
	case msg.X < leftW:
		m.chain.move(d)
	case msg.Y-1 < condH:
		m.conds.scrollBy(d)
	case m.showsOutput():
		m.output.scrollBy(d)
	default:
		m.plan.scrollBy(d)
	}
}

// interrupt is ctrl+c, whatever is open: it detaches from a run another
// process owns (a aborts it, after asking), else quits.
func (m *model) interrupt() tea.Cmd {
	if m.attached && m.live && !m.ended() {
		return m.detach()
	}
	return m.quit()
}

// quit ends the UI: at once when the run is over or recorded; otherwise
// it aborts the run and exits when the run has ended, and a second press
// exits at once.
func (m *model) quit() tea.Cmd {
	if m.live && !m.ended() {
		if m.quitting {
			m.forced = true
			return tea.Quit
		}
		m.quitting = true
		drop[abortMode](&m.modes)
		drop[quitMode](&m.modes)
		return m.abort()
	}
	return tea.Quit
}

// askQuit is q on a live run. An attached UI detaches: the run goes on in
// its own process. A foreground UI asks: abort (y), detach (d) or stay (n).
func (m *model) askQuit() tea.Cmd {
	switch {
	case !m.live || m.ended() || m.quitting:
		return m.quit()
	case m.attached:
		return m.detach()
	}
	drop[abortMode](&m.modes)
	m.modes.push(quitMode{})
	return nil
}

// detach ends the UI and leaves the run going (Run returns ErrDetached).
func (m *model) detach() tea.Cmd {
	m.detached = true
	return tea.Quit
}

func (m *model) abort() tea.Cmd {
	if m.aborting || m.run == nil {
		return nil
	}
	m.aborting = true
	return m.control(Live.Abort)
}

// control asks the run (fn is one of its controls) outside Update; a
// request that does not reach it (a socket gone) is shown as the status.
func (m *model) control(fn func(Live) error) tea.Cmd {
	r := m.run
	return func() tea.Msg {
		if r == nil {
			return nil
		}
		if err := fn(r); err != nil {
			return controlErrMsg{err}
		}
		return nil
	}
}

func (m *model) pause() tea.Cmd {
	if !m.live || m.ended() || m.aborting {
		return nil
	}
	if m.state == loop.StatePaused || m.pauseAsked {
		m.pauseAsked = false
		return m.control(Live.Resume)
	}
	m.pauseAsked = true
	return m.control(Live.Pause)
}

func (m *model) skip() tea.Cmd {
	if !m.live || m.ended() || m.aborting {
		return nil
	}
	if !m.tree.iterationOpen() { // the runner ignores a skip here; say so rather than claim one
		m.lastLog = "nothing to skip: iteration " + strconv.Itoa(m.iteration) + " has ended and the next has not started"
		return nil
	}
	m.skipping = m.iteration // the status says so until the iteration closes
	return m.control(Live.Skip)
}
