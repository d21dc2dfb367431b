package tui

import (
	"context"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// maxBatch bounds the events one message carries. The forwarder sends
// whatever is ready, up to this, so a burst of actions costs one Update
// and one View instead of one each.
const maxBatch = 1024

// forward is the one goroutine that hands the run's events to the program
// (send is Program.Send, which blocks while the program is busy; the bus
// then holds actions in the ledger, never in memory).
func forward(ctx context.Context, events <-chan loop.Event, send func(tea.Msg), parseCfg bool) {
	for {
		var batch []loop.Event
		select {
		case e, ok := <-events:
			if !ok {
				return
			}
			batch = append(make([]loop.Event, 0, 64), e)
		case <-ctx.Done():
			return
		}
		open := true
	drain:
		for len(batch) < maxBatch {
			select {
			case e, ok := <-events:
				if !ok {
					open = false
					break drain
				}
				batch = append(batch, e)
			default:
				break drain
			}
		}
		if parseCfg {
			for i := range batch {
				if a := batch[i].Action; a != nil && a.Type == ledger.RunStarted {
					if cfg := snapshotConfig(a); cfg != nil {
						send(configMsg{cfg, configuredConditions(cfg)})
						parseCfg = false
					}
				}
			}
		}
		send(eventsMsg{events: batch, more: len(batch) == maxBatch})
		if !open {
			return
		}
	}
}

// loadBatch is how many recorded actions one message carries.
const loadBatch = 512

// releaseEvery is how many actions a load reads between releases of the
// store's mapped pages.
const releaseEvery = 1 << 15

// load streams a recorded run from the store to the program: one pass in
// seq order, each action wrapped as the event the live bus would send,
// never more than a batch decoded at a time. A batch run comes with its
// task runs' actions and its record; with follow, the actions appended
// after them follow as the batch records them (batchload.go).
func load(ctx context.Context, st Scanner, runID string, send func(tea.Msg), parseCfg, follow bool) {
	batch := make([]loop.Event, 0, loadBatch)
	read, last := 0, uint64(0)
	f := newRunFilter(runID)
	mapped, _ := st.(interface{ ReleaseMapped() error })
	err := st.Range(1, func(a ledger.Action) error {
		if read++; read%releaseEvery == 0 && mapped != nil {
			_ = mapped.ReleaseMapped() // keep the pages the scan touched out of our RSS
		}
		last = a.Seq
		if !f.keep(&a) {
			return ctx.Err()
		}
		if parseCfg && a.Type == ledger.RunStarted && a.RunID == runID {
			if cfg := snapshotConfig(&a); cfg != nil {
				send(configMsg{cfg, configuredConditions(cfg)})
			}
		}
		batch = append(batch, loop.Event{Kind: loop.EventAction, Time: a.Timestamp, RunID: a.RunID, Action: &a})
		if len(batch) == loadBatch {
			send(eventsMsg{events: batch})
			batch = make([]loop.Event, 0, loadBatch)
		}
		return ctx.Err()
	})
	if len(batch) > 0 {
		send(eventsMsg{events: batch})
	}
	follow = follow && f.batch && err == nil && canFollow(st)
	if f.batch {
		if follow {
			send(followMsg{})
		}
		send(readBatchRecord(st, runID))
	}
	send(loadedMsg{err: err})
	if follow {
		followBatch(ctx, st, last+1, f, send)
	}
}

// snapshotConfig reads the config a RunStarted action recorded; nil when
// it cannot be read (the header then shows less).
func snapshotConfig(a *ledger.Action) *config.Config {
	snap := a.Metadata["config"].Str()
	if snap == "" {
		return nil
	}
	cfg, err := config.Parse([]byte(snap), "run "+a.RunID+" config snapshot", func(string) string { return "" })
	if err != nil {
		return nil
	}
	return cfg
}
