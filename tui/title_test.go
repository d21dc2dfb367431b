package tui

import (
	"context"
	"fmt"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

func actionEvents(acts []ledger.Action) []loop.Event {
	evs := make([]loop.Event, len(acts))
	for i := range acts {
		evs[i] = loop.Event{Kind: loop.EventAction, Action: &acts[i], Time: acts[i].Timestamp}
	}
	return evs
}

// settle runs what the program would after the Update that returned cmd:
// each titleMsg after its delay, fed back to Update, until a title is set
// or none is asked for. It returns the titles set.
func settle(t *testing.T, m *model, cmd tea.Cmd) []string {
	t.Helper()
	var set []string
	var run func(tea.Cmd)
	run = func(cmd tea.Cmd) {
		if cmd == nil {
			return
		}
		switch msg := cmd().(type) {
		case tea.BatchMsg:
			for _, c := range msg {
				run(c)
			}
		case titleMsg:
			_, next := m.Update(msg)
			run(next)
		default:
			if fmt.Sprintf("%T", msg) == "tea.setWindowTitleMsg" { // tea.SetWindowTitle's; it is the title
				set = append(set, fmt.Sprint(msg))
			}
		}
	}
	run(cmd)
	return set
}

// titledModel is testModel once the title its first Update asked for has
// been set, as the program sets it.
func titledModel(t *testing.T, st *ledger.Store, live bool) *model {
	t.Helper()
	m := testModel(t, st, live, 120, 40)
	settled(t, m, func() tea.Msg { return titleMsg{gen: m.titleGen} })
	return m
}

// settled is the one title settle set.
func settled(t *testing.T, m *model, cmd tea.Cmd) string {
	t.Helper()
	set := settle(t, m, cmd)
	if len(set) != 1 {
		t.Fatalf("titles set: %q, want one", set)
	}
	return set[0]
}

// The title says the seq the UI has applied and whether it has more to
// apply (running), waits for the run (idle) or has shown its end (ended).
func TestTitleLiveRun(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := titledModel(t, st, true)
	if got, want := m.title().String(), "ralph · "+fixtureRun+" · seq 0 · idle"; got != want {
		t.Fatalf("before any event: %q, want %q", got, want)
	}
	half := len(stored) / 2
	_, cmd := m.Update(eventsMsg{events: actionEvents(stored[:half]), more: true})
	if got, want := settled(t, m, cmd), fmt.Sprintf("ralph · %s · seq %d · running", fixtureRun, stored[half-1].Seq); got != want {
		t.Fatalf("a batch with more queued set %q, want %q", got, want)
	}
	_, cmd = m.Update(eventsMsg{events: actionEvents(stored[half : len(stored)-1])})
	if got, want := settled(t, m, cmd), fmt.Sprintf("ralph · %s · seq %d · idle", fixtureRun, stored[len(stored)-2].Seq); got != want {
		t.Fatalf("the queue drained: %q, want %q", got, want)
	}
	if _, cmd := m.Update(keyMsg("j")); len(settle(t, m, cmd)) != 0 {
		t.Fatal("a key that changes nothing the title says set it again")
	}
	_, cmd = m.Update(eventsMsg{events: actionEvents(stored[len(stored)-1:])})
	if got, want := settled(t, m, cmd), fmt.Sprintf("ralph · %s · seq %d · ended", fixtureRun, stored[len(stored)-1].Seq); got != want {
		t.Fatalf("after the run's last action: %q, want %q", got, want)
	}
}

// A title that changed again before its delay is not set: the program
// sets only the title that held, and asks for one titleMsg at a time.
func TestTitleStaleNotSet(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(2, false))
	m := titledModel(t, st, true)
	_, first := m.Update(eventsMsg{events: actionEvents(stored[:3])})
	_, second := m.Update(eventsMsg{events: actionEvents(stored[3:])})
	if second != nil {
		t.Fatal("a second titleMsg was asked for while one is on its way")
	}
	set := settle(t, m, first)
	if want := fmt.Sprintf("ralph · %s · seq %d · idle", fixtureRun, stored[len(stored)-1].Seq); len(set) != 1 || set[0] != want {
		t.Fatalf("titles set %q, want only %q", set, want)
	}
}

// A recorded run is running until it is read to its end, then ended.
func TestTitleRecordedRun(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(2, true))
	m := titledModel(t, st, false)
	_, cmd := m.Update(eventsMsg{events: actionEvents(stored)})
	if got, want := settled(t, m, cmd), fmt.Sprintf("ralph · %s · seq %d · running", fixtureRun, stored[len(stored)-1].Seq); got != want {
		t.Fatalf("read, not loaded yet: %q, want %q", got, want)
	}
	_, cmd = m.Update(loadedMsg{})
	if got, want := settled(t, m, cmd), fmt.Sprintf("ralph · %s · seq %d · ended", fixtureRun, stored[len(stored)-1].Seq); got != want {
		t.Fatalf("loaded: %q, want %q", got, want)
	}
	g := titledModel(t, st, false)
	g.goesOn = "process 4242"
	g.Update(eventsMsg{events: actionEvents(stored[:5])})
	if g.Update(loadedMsg{}); g.uiState() != "idle" {
		t.Fatalf("a run going on elsewhere, loaded: %q, want idle", g.uiState())
	}
}

// The forwarder says when it cut a batch with events still ready.
func TestForwardSaysMore(t *testing.T) {
	t.Parallel()
	events := make(chan loop.Event, maxBatch+1)
	for i := range maxBatch + 1 {
		events <- loop.Event{Kind: loop.EventAction, Action: &ledger.Action{Seq: uint64(i + 1)}}
	}
	close(events)
	var got []eventsMsg
	forward(context.Background(), events, func(msg tea.Msg) { got = append(got, msg.(eventsMsg)) }, false)
	if len(got) != 2 || len(got[0].events) != maxBatch || !got[0].more || len(got[1].events) != 1 || got[1].more {
		var sizes []string
		for _, b := range got {
			sizes = append(sizes, fmt.Sprintf("%d events, more %v", len(b.events), b.more))
		}
		t.Fatalf("batches %v, want %d events with more, then 1 without", sizes, maxBatch)
	}
}
