package tui

import (
	"log/slog"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/loop"
)

// logView shows the run's slog lines (l), newest at the bottom. It keeps
// the last maxLogLines; older lines are dropped, and the title says so.
type logView struct {
	fullScreen
	st      *styles
	lines   []logEntry // ring: the oldest at start
	start   int
	dropped int
	offset  int
	h       int
	follow  bool
}

type logEntry struct {
	at   time.Time
	line loop.LogLine
}

const maxLogLines = 2000

func newLogView(st *styles) *logView {
	return &logView{fullScreen: fullScreen{"the log view"}, st: st, follow: true}
}

func (v *logView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) { return m.screenKey(v, k) }

func (v *logView) body(_ *model, width, height int) []string { return v.render(width, height) }

func (v *logView) add(at time.Time, l loop.LogLine) {
	if len(v.lines) < maxLogLines {
		v.lines = append(v.lines, logEntry{at, l})
		return
	}
	v.lines[v.start] = logEntry{at, l}
	v.start = (v.start + 1) % maxLogLines
	v.dropped++
}

func (v *logView) at(i int) *logEntry { return &v.lines[(v.start+i)%len(v.lines)] }

func (v *logView) scrollBy(n int) {
	v.offset = min(max(v.offset+n, 0), max(0, len(v.lines)-v.h))
	v.follow = v.offset >= len(v.lines)-v.h
}

func (v *logView) Render(width, height int) string {
	return strings.Join(v.render(width, height), "\n")
}

func (v *logView) render(width, height int) []string {
	v.h = max(0, height-2)
	if v.follow {
		v.offset = max(0, len(v.lines)-v.h)
	}
	v.offset = min(v.offset, max(0, len(v.lines)-v.h))
	st := v.st
	rows := make([]string, 0, v.h)
	for i := v.offset; i < len(v.lines) && len(rows) < v.h; i++ {
		e := v.at(i)
		lvl := st.logInfo
		switch {
		case e.line.Level >= slog.LevelError:
			lvl = st.logError
		case e.line.Level >= slog.LevelWarn:
			lvl = st.logWarn
		case e.line.Level < slog.LevelInfo:
			lvl = st.logDebug
		}
		rows = append(rows, " "+st.dim.Render(e.at.Local().Format("15:04:05"))+" "+lvl.Render(fit(e.line.Level.String(), 5))+
			" "+e.line.Msg+" "+st.dim.Render(e.line.Attrs))
	}
	if len(v.lines) == 0 {
		rows = append(rows, st.dim.Render(" no log lines yet"))
	}
	right := ""
	if v.dropped > 0 {
		right = "older lines dropped"
	}
	return st.frame("Log", right, true, width, height, rows)
}
