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
// everything up to seq N.

// titleDelay is how long a title must hold before it is set: three of
// Bubble Tea's frames.
const titleDelay = 50 * time.Millisecond

// titleMsg asks to set the title the model wanted at generation gen.
type titleMsg struct{ gen uint64 }

// uiState is the title's STATE.
func (m *model) uiState() string {
	switch {
	case m.queued || m.loading || m.statsAsked > 0:
		return "running"
	case m.goesOn == "" && m.ended():
		return "ended"
	}
	return "idle"
}

// title is the terminal title for what the UI shows now.
func (m *model) title() string {
	t := "ralph · "
	if m.runID != "" {
		t += m.runID + " · "
	}
	return t + "seq " + strconv.FormatUint(m.seq, 10) + " · " + m.uiState()
}

// retitle runs after every Update: when the title changes, it asks for a
// titleMsg after titleDelay, which sets it unless it changed again.
func (m *model) retitle() tea.Cmd {
	t := m.title()
	if t == m.titleWant {
		return nil
	}
	m.titleWant = t
	m.titleGen++
	gen := m.titleGen
	return tea.Tick(titleDelay, func(time.Time) tea.Msg { return titleMsg{gen: gen} })
}

// setTitle sets the title asked for at gen, when it is still the one wanted.
func (m *model) setTitle(msg titleMsg) tea.Cmd {
	if msg.gen != m.titleGen || m.titleWant == m.titleSet {
		return nil
	}
	m.titleSet = m.titleWant
	return tea.SetWindowTitle(m.titleSet)
}
