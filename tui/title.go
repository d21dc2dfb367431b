package tui

import (
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// The terminal (window) title says what the UI has shown, so a user sees
// it in a tab and a script or test can wait on it (tmux shows it as
// #{pane_title}) instead of reading the screen:
//
//	ralph · RUN_ID · seq N · STATE
//
// N is the highest chain seq among the actions the UI has applied (0
// before the first). STATE is
//
//   - running: the UI has more to apply — the forwarder cut its last batch
//     at maxBatch, a recorded run is still being read, or an iteration's
//     diff summary it asked for has not come back;
//   - idle: every event up to seq N is applied and drawn and nothing is
//     queued: the UI waits for the run's next event (or, for a run going on
//     in another process that ralph view shows, has shown what was recorded);
//   - ended: as idle, and the run is over: nothing will follow.
//
// The title carries the run id, a number and a word, never what the run
// prints. Bubble Tea writes a frame on its own clock (60 frames a second)
// but a title at once, so a title is set only once it has held for
// titleDelay: by then the frame that shows seq N has been written before
// it, and a reader that sees the title and then reads the screen sees
// everything up to seq N. At most one titleMsg is on its way at a time, so
// a stream of events costs no timer each.

// pushTitle and popTitle save the terminal's window and icon titles on
// its title stack and restore them (xterm's window operations 22 and 23,
// which tmux and most terminals take), so that the title the UI sets ends
// with it.
const (
	pushTitle = "\x1b[22;0t"
	popTitle  = "\x1b[23;0t"
)

// titleDelay is how long a title must hold before it is set: three of
// Bubble Tea's frames.
const titleDelay = 50 * time.Millisecond

// titleMsg comes titleDelay after it was asked for, at generation gen of
// the title wanted.
type titleMsg struct{ gen uint64 }

// titleState is what the title says.
type titleState struct {
	runID string
	seq   uint64
	state string
}

func (s titleState) String() string {
	t := "ralph · "
	if s.runID != "" {
		t += s.runID + " · "
	}
	return t + "seq " + strconv.FormatUint(s.seq, 10) + " · " + s.state
}

// uiState is the title's STATE.
func (m *model) uiState() string {
	switch {
	case m.queued || m.loading || m.statsAsked > 0:
		return "running"
	case (m.goesOn == "" || m.following) && m.ended():
		return "ended"
	}
	return "idle"
}

// title is what the title says for what the UI shows now: a task's run
// opened from the batch view says its own.
func (m *model) title() titleState {
	if v, ok := m.modes.screen().(*taskRunView); ok {
		t := v.sub.title()
		if v.reading {
			t.state = "running"
		}
		return t
	}
	return titleState{runID: m.runID, seq: m.seq, state: m.uiState()}
}

// retitle runs after every Update: when the title changes and no
// titleMsg is on its way, it asks for one.
func (m *model) retitle() tea.Cmd {
	t := m.title()
	if t == m.titleWant {
		return nil
	}
	m.titleWant = t
	m.titleGen++
	if m.titleTicking {
		return nil
	}
	m.titleTicking = true
	return titleTick(m.titleGen)
}

func titleTick(gen uint64) tea.Cmd {
	return tea.Tick(titleDelay, func(time.Time) tea.Msg { return titleMsg{gen: gen} })
}

// setTitle sets the title wanted when it has not changed since the
// titleMsg was asked for (a whole titleDelay); else it waits another.
func (m *model) setTitle(msg titleMsg) tea.Cmd {
	m.titleTicking = false
	if msg.gen != m.titleGen {
		m.titleTicking = true
		return titleTick(m.titleGen)
	}
	if m.titleWant == m.titleSet {
		return nil
	}
	m.titleSet = m.titleWant
	return tea.SetWindowTitle(m.titleSet.String())
}
