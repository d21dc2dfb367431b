package tui

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// recordedOutputMsg is the output of a recorded run's last agent call, for
// the output pane of ralph view: the events its output file replays to,
// or, where the file is not there, its recorded result.
type recordedOutputMsg struct {
	call   ledger.Action
	events []agent.Event
	found  bool
}

// errLastCall ends a scan that found what it needed.
var errLastCall = errors.New("found")

// loadRecordedOutput finds the last agent.run call of run runID in st and
// replays its output file (from the store in dir) into events. It is a
// command: it reads the store and a file, never in Update.
func loadRecordedOutput(ctx context.Context, st Reader, dir, runID string) tea.Cmd {
	sc, ok := st.(Scanner)
	if !ok {
		return nil
	}
	return func() tea.Msg {
		var last ledger.Action
		found := false
		err := sc.Range(1, func(a ledger.Action) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if a.RunID == runID && a.Type == ledger.CapabilityCall && loop.Printout(a.FunctionName) {
				last, found = a, true
			}
			return nil
		})
		if err != nil || !found {
			return recordedOutputMsg{}
		}
		return recordedOutputMsg{call: last, events: replayCall(&last, dir), found: true}
	}
}

// replayCall is what call a printed, as events: its output file parsed by
// its CLI's parser, or, without the file, the result it recorded.
func replayCall(a *ledger.Action, dir string) []agent.Event {
	var evs []agent.Event
	emit := func(e agent.Event) { evs = append(evs, e) }
	if rel, cli := a.Metadata["output_file"].Str(), a.Metadata["cli"].Str(); rel != "" && dir != "" && cli != "" {
		path := rel
		if !filepath.IsAbs(rel) {
			path = filepath.Join(dir, filepath.FromSlash(rel))
		}
		if f, err := os.Open(path); err == nil {
			err = agent.ParseOutput(cli, f, emit)
			f.Close()
			if err == nil && len(evs) > 0 {
				return evs
			}
			evs = nil
		}
	}
	text := a.Result.AsMap().GetKey("text").Str()
	if text == "" {
		text = a.Result.String()
	}
	return []agent.Event{{Kind: agent.EventText, Text: text + "\n"}}
}

// recordedOutput fills the output pane with a recorded call's output.
func (m *model) recordedOutput(msg recordedOutputMsg) {
	if !msg.found {
		return
	}
	it := int(msg.call.Metadata["iteration"].AsInt())
	for i := range msg.events {
		m.output.add(msg.call.ActionID, it, msg.call.Timestamp, &msg.events[i])
	}
	m.output.ended(&msg.call)
}

// noteRecordedCall notes that a recorded run made an agent call, so that o
// shows its output.
func (m *model) noteRecordedCall(a *ledger.Action) {
	if a != nil && a.Type == ledger.CapabilityCall && loop.Printout(a.FunctionName) {
		m.recordedCall = true
	}
}
