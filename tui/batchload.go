package tui

import (
	"context"
	"slices"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// How a batch reaches the view: ralph view BATCH reads the batch's run
// and, once its BatchStarted shows it is a batch, the runs its
// TaskStarted actions name, in one pass over the chain (load); then, while
// the batch goes on in a process that shares its store (Options.GoesOn),
// the actions appended after it (follow). The batch's end is not an
// action: it is read from the batch's record (ralph runs), once loaded
// and, while followed, whenever no task is at work.

type (
	// followMsg says the loader follows the batch as it records.
	followMsg struct{}
	// batchRecordMsg is the batch's record, read from the store.
	batchRecordMsg struct {
		rec  *loop.RunRecord // nil: the store keeps none for it
		err  error
		view *batchView // the view that asked (nil: the page, m.batchV)
	}
)

// batchMsg takes a message of the batch view's: a task run's (its view's
// answer or part), the loader's follow, the batch's record, a part of the
// batch b opened.
func (m *model) batchMsg(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case taskRunMsg:
		if slices.Contains(m.modes, mode(msg.to)) { // else it was closed: the answer is moot
			return msg.to.update(m, msg.msg)
		}
	case followMsg:
		m.following = true
		return m.tick() // its clocks run
	case batchRecordMsg:
		m.setBatchRecord(msg)
	case batchPartMsg:
		return m.batchPart(msg)
	}
	return nil
}

// runFilter picks a run's actions from the chain and, once the run shows
// itself a batch, its task runs' too (each named by a TaskStarted before
// its first action).
type runFilter struct {
	id    string
	batch bool
	tasks map[string]bool
}

func newRunFilter(id string) *runFilter { return &runFilter{id: id, tasks: map[string]bool{}} }

// keep reports whether a is the run's or one of its task runs', learning
// the task runs as the batch names them.
func (f *runFilter) keep(a *ledger.Action) bool {
	if a.RunID != f.id {
		return f.tasks[a.RunID]
	}
	switch a.Type {
	case ledger.BatchStarted:
		f.batch = true
	case ledger.TaskStarted:
		f.tasks[a.Metadata[ledger.MetaTaskRun].Str()] = true
	}
	return true
}

// runLister is a store that lists its runs' records (serve.Reader).
type runLister interface {
	ListRuns() ([]loop.RunRecord, error)
}

// readBatchRecord reads batch id's record from st.
func readBatchRecord(st any, id string) batchRecordMsg {
	var recs []loop.RunRecord
	var err error
	switch s := st.(type) {
	case runLister:
		recs, err = s.ListRuns()
	case *ledger.Store:
		recs, err = loop.ListRuns(s)
	default:
		return batchRecordMsg{}
	}
	for i := range recs {
		if recs[i].ID == id {
			return batchRecordMsg{rec: &recs[i]}
		}
	}
	return batchRecordMsg{err: err}
}

// setBatchRecord takes the batch's record: an ended batch's state and
// reason (a record that still says running changes nothing).
func (m *model) setBatchRecord(msg batchRecordMsg) {
	v := msg.view
	if v == nil {
		v, m.recordAsked = m.batchV, false
	}
	if v == nil || msg.rec == nil || !isEndState(msg.rec.State) {
		return
	}
	b := v.b
	at, _ := time.Parse(loop.RecordTime, msg.rec.Updated) // the zero time when it cannot be read: the last action's is shown
	b.end = &batchEnd{state: msg.rec.State, class: msg.rec.Class, reason: msg.rec.Reason, at: at}
	b.ver++
}

// pollBatch reads the record of a batch followed live while none of its
// tasks is at work: it ends without an action once its last task has.
func (m *model) pollBatch() tea.Cmd {
	if !m.following || m.batchV == nil || m.batchV.b.end != nil || m.batchV.b.busy() || m.recordAsked {
		return nil
	}
	m.recordAsked = true
	st, id := m.store, m.runID
	return func() tea.Msg { return readBatchRecord(st, id) }
}

// actionSubscriber is a store in this process (ledger.Store.Subscribe).
type actionSubscriber interface {
	Subscribe(ctx context.Context, fromSeq uint64) <-chan ledger.Action
}

// eventStreamer is the process that holds a store, through its socket
// (serve.Client.Events).
type eventStreamer interface {
	Events(ctx context.Context, fromSeq uint64, ui bool) (<-chan loop.Event, error)
}

// canFollow reports whether the view can follow st as it records.
func canFollow(st any) bool {
	switch st.(type) {
	case actionSubscriber, eventStreamer:
		return true
	}
	return false
}

// subscribe streams st's actions from seq from on, until ctx ends or the
// stream does.
func subscribe(ctx context.Context, st any, from uint64) <-chan ledger.Action {
	switch s := st.(type) {
	case actionSubscriber:
		return s.Subscribe(ctx, from)
	case eventStreamer:
		evs, err := s.Events(ctx, from, false)
		if err != nil {
			return nil
		}
		out := make(chan ledger.Action, 64)
		go func() { // owned by the loader; ends with evs, which ends with ctx
			defer close(out)
			for e := range evs {
				if e.Kind != loop.EventAction || e.Action == nil {
					continue
				}
				select {
				case out <- *e.Action:
				case <-ctx.Done():
					return
				}
			}
		}()
		return out
	}
	return nil
}

// followBatch hands the batch's actions appended from seq from on to the
// program, batched as forward does, until ctx ends or the stream does;
// then it reads the batch's record once more.
func followBatch(ctx context.Context, st any, from uint64, f *runFilter, send func(tea.Msg)) {
	acts := subscribe(ctx, st, from)
	if acts == nil {
		return
	}
	for {
		var batch []loop.Event
		add := func(a ledger.Action) {
			if f.keep(&a) {
				batch = append(batch, loop.Event{Kind: loop.EventAction, Time: a.Timestamp, RunID: a.RunID, Action: &a})
			}
		}
		select {
		case a, ok := <-acts:
			if !ok {
				send(readBatchRecord(st, f.id))
				return
			}
			add(a)
		case <-ctx.Done():
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case a, ok := <-acts:
				if !ok {
					break drain
				}
				add(a)
			default:
				break drain
			}
		}
		if len(batch) > 0 {
			send(eventsMsg{events: batch, more: len(batch) == maxBatch})
		}
	}
}
