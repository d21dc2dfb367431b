package tui

import (
	"context"
	"math"
	"slices"

	tea "github.com/charmbracelet/bubbletea"
)

// A task's run names its batch on its RunStarted; b in its run view (ralph
// view RUN) opens that batch's view over it, read from the store in parts
// as a task's run is (readPart), and esc goes back to the run.

// batchPartMsg is a part of the batch b opened.
type batchPartMsg struct {
	to   *batchView
	f    *runFilter // what the parts keep: the batch's actions and its task runs'
	part taskRunPart
}

// openBatchOf opens the batch the run is a task of (b).
func (m *model) openBatchOf() tea.Cmd {
	if m.batchOf == "" || m.scanner == nil || m.inBatch {
		return nil
	}
	v := newBatchView(m.st, newBatch(m.batchOf), false)
	v.reading = true
	m.show(v)
	return v.readBatch(m.ctx, m.scanner, newRunFilter(m.batchOf), 1)
}

// readBatch asks for the part of the batch from seq from on.
func (v *batchView) readBatch(ctx context.Context, st Scanner, f *runFilter, from uint64) tea.Cmd {
	return func() tea.Msg { return batchPartMsg{v, f, readPart(ctx, st, from, math.MaxUint64, f.keep, "")} }
}

// batchPart takes a part of the batch b opened, and asks for the next, or
// once it has the last, for the batch's record.
func (m *model) batchPart(msg batchPartMsg) tea.Cmd {
	v, p := msg.to, msg.part
	if !slices.Contains(m.modes, mode(v)) {
		return nil // closed: the rest is not read
	}
	for i := range p.events {
		v.b.observe(p.events[i].Action)
	}
	v.read += len(p.events)
	if !p.done {
		return v.readBatch(m.ctx, m.scanner, msg.f, p.next)
	}
	v.reading, v.readErr = false, p.err
	st, id := m.store, v.b.id
	return func() tea.Msg {
		r := readBatchRecord(st, id)
		r.view = v
		return r
	}
}
