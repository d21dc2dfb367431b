package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
)

// outputPane shows what the running agent call streams (agent.run): its
// text as it comes, each tool use and tool result, errors, and above them
// how long the call has run, its tool uses and the spend it has reported so
// far. It keeps the last maxOutputLines lines of one call (the running one,
// else the last); a new call starts it over. Like the other panes it draws
// only the rows in view, each line's wrapped rows kept in a rowCache under
// the line's number: a line is finished once a newer one follows it or it
// ends with a newline; the open line is drawn again when its version
// changes.
type outputPane struct {
	st      *styles
	w, h    int // content size inside the border
	focused bool
	now     func() time.Time

	call   *agentCall // nil before the first agent event
	offset int        // lines hidden below the view; 0 follows the newest
	cache  rowCache[int, uint32, []string]
}

// maxOutputLines bounds one call's scrollback.
const maxOutputLines = 2000

// agentCall is one agent.run call as the pane shows it.
type agentCall struct {
	id        string // the CapabilityCall's action id (loop.Event.CallID)
	iteration int
	started   time.Time
	lines     []outLine
	first     int  // absolute number of lines[0]: lines cut from the top before it
	open      bool // the last line is text that may go on (no newline yet)
	tools     int
	usage     agent.Usage // as the stream reported it so far
	cost      float64
	texted    bool // text was streamed (a final answer would repeat it)
	// Set when the call's CapabilityCall is recorded.
	ended  bool
	dur    time.Duration
	result string // "exit 0", "! idle-timeout", "✗ failed"
	ok     bool
}

type outKind uint8

const (
	outText outKind = iota
	outTool
	outToolOK
	outToolErr
	outError
	outRaw
	outRetry    // a retry notice of the CLI: it is alive and waiting
	outProgress // a tool still running ("Bash running for 30s"); the next notice replaces it
)

type outLine struct {
	kind outKind
	text string
	ver  uint32
}

func newOutputPane(st *styles, now func() time.Time) *outputPane {
	return &outputPane{st: st, now: now}
}

// SetSize sets the pane's outer size, border included.
func (p *outputPane) SetSize(w, h int) { p.w, p.h = max(0, w-2), max(0, h-2) }

// running reports whether a call is streaming now.
func (p *outputPane) running() bool { return p.call != nil && !p.call.ended }

// shows reports whether the pane has a call of iteration it to show.
func (p *outputPane) shows(it int) bool { return p.call != nil && p.call.iteration == it }

// clean makes an agent's text safe to draw: escape sequences and control
// characters (which could move the cursor or restyle the terminal) are
// removed, tabs become spaces; newlines stay.
func clean(s string) string {
	s = ansi.Strip(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return -1
		}
		return r
	}, s)
}

// add takes one event the call callID streamed during iteration it.
func (p *outputPane) add(callID string, it int, at time.Time, ev *agent.Event) {
	e := *ev
	e.Text, e.Tool, e.Input = clean(e.Text), clean(e.Tool), clean(e.Input)
	c := p.call
	if c == nil || (c.id != callID && callID != "") || c.ended {
		c = &agentCall{id: callID, iteration: it, started: at}
		p.call, p.offset = c, 0
		p.cache.reset()
	}
	if e.Kind == agent.EventCost && !e.Total { // a step's cost adds to the call's
		e.CostUSD += c.cost
	}
	switch e.Kind {
	case agent.EventText:
		c.texted = true
		p.text(e.Text)
	case agent.EventFinal:
		if !c.texted {
			p.text(e.Text)
		}
	case agent.EventToolUse:
		c.tools++
		p.line(outTool, strings.TrimSpace(e.Tool+"  "+firstLine(e.Input)))
	case agent.EventToolResult:
		k := outToolOK
		if e.IsError {
			k = outToolErr
		}
		p.line(k, firstLine(e.Text))
	case agent.EventUsage:
		if e.Total { // the call's totals so far replace what was counted
			c.usage = agent.Usage{}
		}
		c.usage.Input += e.Usage.Input
		c.usage.Output += e.Usage.Output
		c.usage.CacheRead += e.Usage.CacheRead
		c.usage.CacheWrite += e.Usage.CacheWrite
		c.usage.Reasoning += e.Usage.Reasoning
	case agent.EventCost:
		c.cost = e.CostUSD
	case agent.EventError:
		p.line(outError, firstLine(e.Text))
	case agent.EventDenied:
		if d := e.Denial; d != nil {
			p.line(outError, strings.TrimSpace("permission denied: "+clean(d.Tool)+" "+clean(d.Target)))
		}
	case agent.EventSandboxDenied:
		if d := e.Refusal; d != nil {
			p.line(outError, clean(agent.RefusalLine(*d)))
		}
	case agent.EventRaw:
		p.line(outRaw, firstLine(e.Text))
	case agent.EventRetry:
		if e.Retry != nil {
			p.line(outRetry, agent.RetryLine(*e.Retry))
		}
	case agent.EventProgress:
		p.progress(e.Text)
	}
}

// progress shows a progress notice: it replaces the one before it when
// nothing came between, so a tool that runs for an hour is one line.
func (p *outputPane) progress(s string) {
	c := p.call
	if s == "" {
		return
	}
	if n := len(c.lines); n > 0 && c.lines[n-1].kind == outProgress {
		l := &c.lines[n-1]
		l.text = s
		l.ver++
		return
	}
	p.line(outProgress, s)
}

// text appends streamed text: a chunk continues the open line, and each
// newline starts a new one.
func (p *outputPane) text(s string) {
	c := p.call
	parts := strings.Split(s, "\n")
	for i, part := range parts {
		if i == 0 && c.open && len(c.lines) > 0 {
			l := &c.lines[len(c.lines)-1]
			l.text += part
			l.ver++
			continue
		}
		if i == len(parts)-1 && part == "" { // the chunk ended with a newline
			c.open = false
			return
		}
		p.push(outLine{kind: outText, text: part})
	}
	c.open = true
}

// line appends a line of its own (a tool use, a result, an error).
func (p *outputPane) line(k outKind, s string) {
	p.call.open = false
	p.push(outLine{kind: k, text: s})
}

func (p *outputPane) push(l outLine) {
	c := p.call
	if len(c.lines) >= maxOutputLines { // drop the oldest tenth: amortised, never a copy per line
		cut := maxOutputLines / 10
		for i := c.first; i < c.first+cut; i++ {
			p.cache.drop(i)
		}
		c.lines = append(c.lines[:0], c.lines[cut:]...)
		c.first += cut
	}
	c.lines = append(c.lines, l)
}

// ended records the call's CapabilityCall: the call is over.
func (p *outputPane) ended(a *ledger.Action) {
	c := p.call
	if c == nil || c.id != a.ActionID {
		return
	}
	c.ended, c.open, c.ok = true, false, a.Success
	c.dur = time.Duration(a.DurationMS) * time.Millisecond
	if a.Cost > 0 {
		c.cost = a.Cost
	}
	if in, out := metaInt(a.Metadata["prompt_tokens"]), metaInt(a.Metadata["completion_tokens"]); in+out > 0 {
		c.usage = agent.Usage{Input: in, Output: out} // the call's totals, as recorded
	}
	switch r := a.ReportedFailure(); {
	case r != "":
		c.result = "! " + r
	case !a.Success:
		c.result = "✗ failed"
	default:
		c.result = "✓ exit " + orNone(a.Metadata["exit"].Str())
	}
	if f := a.Metadata["output_file"].Str(); f != "" { // what the pane shows is a part: say where the whole is
		p.line(outRaw, fmt.Sprintf("whole output: %s (%s bytes)", f, a.Metadata["output_bytes"].Str()))
	}
}

func (p *outputPane) scrollBy(d int) {
	if p.call == nil {
		return
	}
	// d > 0 scrolls down, toward the newest line.
	p.offset = min(max(p.offset-d, 0), max(0, len(p.call.lines)-1))
}

// Render draws the pane in its border.
func (p *outputPane) Render(width, height int) string {
	return strings.Join(p.lines(width, height), "\n")
}

func (p *outputPane) lines(width, height int) []string {
	p.SetSize(width, height)
	c := p.call
	if c == nil {
		return p.st.frame("Agent", "", p.focused, width, height,
			[]string{p.st.dim.Render(" no agent call yet")})
	}
	inner := width - 3
	var rows []string // bottom up
	for i := len(c.lines) - 1 - p.offset; i >= 0 && len(rows) < p.h; i-- {
		open := c.open && i == len(c.lines)-1
		r := p.rowsOf(c.first+i, &c.lines[i], !open, inner)
		for j := len(r) - 1; j >= 0 && len(rows) < p.h; j-- {
			rows = append(rows, " "+r[j])
		}
	}
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	if c.first > 0 && len(rows) < p.h {
		rows = append([]string{p.st.dim.Render(fmt.Sprintf(" … %d earlier lines not kept", c.first))}, rows...)
	}
	return p.st.frame(p.title(), p.status(), p.focused, width, height, rows)
}

func (p *outputPane) title() string {
	t := "Agent"
	if p.offset > 0 {
		t += fmt.Sprintf(" · %d below", p.offset)
	}
	return t
}

// status is the title's right side: running and for how long, or how the
// call ended; its tool uses and the spend it reported.
func (p *outputPane) status() string {
	c := p.call
	var parts []string
	if c.ended {
		parts = append(parts, c.result, fmtDur(c.dur))
	} else {
		el := time.Duration(0)
		if p.now != nil {
			el = p.now().Sub(c.started)
		}
		parts = append(parts, "⟳ "+fmtElapsed(el))
	}
	if c.cost > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", c.cost))
	}
	if n := c.usage.Input + c.usage.Output + c.usage.CacheRead + c.usage.CacheWrite + c.usage.Reasoning; n > 0 {
		parts = append(parts, fmtTokens(n)+" tok")
	}
	if c.tools > 0 {
		parts = append(parts, fmt.Sprintf("%d tool", c.tools))
	}
	return strings.Join(parts, " · ")
}

// rowsOf is line n wrapped to w cells and styled, from the cache when
// current; a finished line's text does not change again.
func (p *outputPane) rowsOf(n int, l *outLine, finished bool, w int) []string {
	return p.cache.get(n, w, l.ver, finished, func() []string { return p.drawLine(l, w) })
}

func (p *outputPane) drawLine(l *outLine, w int) []string {
	st := p.st
	prefix, style := "", st.text
	switch l.kind {
	case outTool:
		prefix, style = "⚙ ", st.accent
	case outToolOK:
		prefix, style = "  ↳ ", st.dim
	case outToolErr:
		prefix, style = "  ↳ ✗ ", st.fail
	case outError:
		prefix, style = "✗ ", st.fail
	case outRaw:
		style = st.dim
	case outRetry:
		prefix, style = "~ ", st.warn
	case outProgress:
		prefix, style = "… ", st.dim
	}
	wrapped := wrap(prefix+l.text, max(1, w))
	if len(wrapped) == 0 {
		wrapped = []string{""}
	}
	rows := make([]string, len(wrapped))
	for i, s := range wrapped {
		rows[i] = style.Render(s)
	}
	return rows
}
