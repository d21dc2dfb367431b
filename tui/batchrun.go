package tui

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// taskRunView is a task's run opened from the batch view (enter): the run
// view as ralph view RUN shows it — a model of its own, with its panes and
// views — over the batch view, which esc (with no view of the run open)
// or q comes back to. The run is read from the store in parts (taskRunPart);
// while the batch is followed live, the run's actions the batch's stream
// brings after the part read last are given to it as they come.
type taskRunView struct {
	fullScreen
	run *taskRun
	sub *model
	// to is the last seq the parts read: later actions come from the
	// batch's stream, and wait in pending while the parts are read.
	to      uint64
	reading bool
	pending []loop.Event
}

// taskRunMsg is a message for the run view of a task (a store read it
// asked for, a part of its run): the root model hands it over while the
// view is open.
type taskRunMsg struct {
	to  *taskRunView
	msg tea.Msg
}

// taskRunPart is a part of a task's run read from the store.
type taskRunPart struct {
	events []loop.Event
	cfg    *config.Config // the run's config, with the part that holds its RunStarted
	conds  []stop.Result
	next   uint64 // where the next part starts
	done   bool
	err    error
}

// openTaskRun opens the selected task's run (enter in the batch view):
// the task's run that merged or started last, or the run of the row.
func (m *model) openTaskRun(v *batchView) tea.Cmd {
	it, ok := v.selected()
	if !ok {
		return nil
	}
	r := it.r
	if r == nil {
		r = it.t.last()
	}
	switch {
	case r == nil || r.id == "":
		v.note = it.t.id + " has no run to open: it ended before one started"
		return nil
	case m.scanner == nil:
		v.note = "this store cannot be read from here"
		return nil
	}
	tv := &taskRunView{fullScreen: fullScreen{"a task's run"}, run: r, reading: true, to: r.last}
	o := &Options{Store: m.store, StoreDir: m.storeDir, RunID: r.id, Now: m.now}
	following := v.follows(m)
	if following {
		o.GoesOn, tv.to = m.goesOn, m.seq // what the stream brings after m.seq, it hands over
	}
	if tv.to == 0 {
		tv.to = math.MaxUint64
	}
	tv.sub = newModel(o, m.st)
	tv.sub.ctx, tv.sub.following, tv.sub.inBatch = m.ctx, following, true
	tv.sub.task = it.t.id + " try " + strconv.Itoa(r.try)
	if r.attempt > 1 || v.b.attempts > 1 {
		tv.sub.task = it.t.id + "#" + strconv.Itoa(r.attempt) + " try " + strconv.Itoa(r.try)
	}
	tv.sub.update(tea.WindowSizeMsg{Width: m.w, Height: m.h})
	m.modes.push(tv)
	return tv.read(m.ctx, m.scanner, r.seq)
}

// read asks for the part of the run from seq from on.
func (v *taskRunView) read(ctx context.Context, st Scanner, from uint64) tea.Cmd {
	run, to := v.run.id, v.to
	cfgOf := ""
	if v.sub.cfg == nil {
		cfgOf = run
	}
	keep := func(a *ledger.Action) bool { return a.RunID == run }
	return func() tea.Msg { return taskRunMsg{v, readPart(ctx, st, from, to, keep, cfgOf)} }
}

// errPartEnds ends a Range at the end of a part.
var errPartEnds = errors.New("the part is read")

// readPart reads up to loadBatch of the actions keep picks from seq from
// on, up to seq to, and the config of run cfgOf's RunStarted ("": none).
func readPart(ctx context.Context, st Scanner, from, to uint64, keep func(*ledger.Action) bool, cfgOf string) taskRunPart {
	p := taskRunPart{next: from}
	full := false
	err := st.Range(from, func(a ledger.Action) error {
		if a.Seq > to {
			return errPartEnds
		}
		p.next = a.Seq + 1
		if !keep(&a) {
			return ctx.Err()
		}
		if cfgOf != "" && a.Type == ledger.RunStarted && a.RunID == cfgOf {
			if p.cfg = snapshotConfig(&a); p.cfg != nil {
				p.conds = configuredConditions(p.cfg)
			}
		}
		p.events = append(p.events, loop.Event{Kind: loop.EventAction, Time: a.Timestamp, RunID: a.RunID, Action: &a})
		if len(p.events) == loadBatch {
			full = true
			return errPartEnds
		}
		return ctx.Err()
	})
	switch {
	case errors.Is(err, errPartEnds) && full:
	case err == nil || errors.Is(err, errPartEnds):
		p.done = true
	default:
		p.done, p.err = true, err
	}
	return p
}

// update takes a message for the run's view: a part of the run, or one
// of the run view's own.
func (v *taskRunView) update(m *model, msg tea.Msg) tea.Cmd {
	p, ok := msg.(taskRunPart)
	if !ok {
		if _, quit := msg.(tea.QuitMsg); quit {
			m.modes.remove(v)
			return nil
		}
		return v.wrap(v.sub.update(msg))
	}
	if p.cfg != nil {
		v.sub.setConfig(p.cfg, p.conds)
	}
	cmds := []tea.Cmd{v.wrap(v.sub.update(eventsMsg{events: p.events, more: !p.done}))}
	if !p.done {
		return tea.Batch(append(cmds, v.read(m.ctx, m.scanner, p.next))...)
	}
	v.reading = false
	cmds = append(cmds, v.wrap(v.sub.update(loadedMsg{err: p.err})))
	if len(v.pending) > 0 {
		cmds = append(cmds, v.wrap(v.sub.update(eventsMsg{events: v.pending})))
		v.pending = nil
	}
	return tea.Batch(cmds...)
}

// feed gives the run's view an action of its run the batch's stream
// brought; one its parts read already is not given again.
func (v *taskRunView) feed(e loop.Event) tea.Cmd {
	if e.Action.Seq <= v.to {
		return nil
	}
	if v.reading {
		v.pending = append(v.pending, e)
		return nil
	}
	return v.wrap(v.sub.update(eventsMsg{events: []loop.Event{e}}))
}

// wrap makes the commands of the run's view answer to it.
func (v *taskRunView) wrap(cmd tea.Cmd) tea.Cmd {
	if cmd == nil {
		return nil
	}
	return func() tea.Msg {
		switch msg := cmd().(type) {
		case nil:
			return nil
		case tea.BatchMsg:
			out := make(tea.BatchMsg, 0, len(msg))
			for _, c := range msg {
				if c != nil {
					out = append(out, v.wrap(c))
				}
			}
			return out
		default:
			return taskRunMsg{v, msg}
		}
	}
}

// key: q, and esc when no view of the run is open and no filter is set,
// go back to the batch; every other key is the run view's.
func (v *taskRunView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) {
	s := v.sub
	if s.modes.typing() == nil {
		back := key.Matches(k, m.keys.Back) && len(s.modes) == 0 && s.tree.filter == nil
		if back || key.Matches(k, m.keys.Quit) {
			m.modes.remove(v)
			return true, nil
		}
	}
	return true, v.wrap(s.keys1by1(k))
}

func (v *taskRunView) scrollBy(d int) {
	v.sub.mouse(tea.MouseMsg{Action: tea.MouseActionPress, Button: wheel(d)})
}

func wheel(d int) tea.MouseButton {
	if d < 0 {
		return tea.MouseButtonWheelUp
	}
	return tea.MouseButtonWheelDown
}

// body is the run view's; View draws it whole (its header, status and
// footer too), this is for a reader of the body alone.
func (v *taskRunView) body(_ *model, _, _ int) []string { return v.sub.body() }

// view is the run view of the task's run, the whole screen.
func (v *taskRunView) view() string { return v.sub.View() }

// openBatch shows the batch this run is (its BatchStarted) under every
// view, as the UI's page.
func (m *model) openBatch(a *ledger.Action) {
	if m.batchV != nil || m.inBatch {
		return
	}
	b := newBatch(m.runID)
	b.observe(a)
	m.batchV = newBatchView(m.st, b, true)
	m.modes = slices.Insert(m.modes, 0, mode(m.batchV)) // the lowest layer: under any view already open
}

// feedTaskRun gives an action of a task's run to its view, when open.
func (m *model) feedTaskRun(e *loop.Event) tea.Cmd {
	if v, ok := top[*taskRunView](m.modes); ok && v.run.id == e.Action.RunID {
		return v.feed(*e)
	}
	return nil
}
