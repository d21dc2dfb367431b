package agent

import "time"

// opencodeBackend runs OpenCode headless: `opencode run --format json`,
// prompt on stdin (piped stdin is the message). Each line is an event
// {type, timestamp, sessionID, …}: step_start, text, reasoning, tool_use,
// step_finish (with cost and tokens), error, done (see docs/agents.md).
func opencodeBackend() backend {
	return backend{
		name: "opencode",
		bin:  "opencode",
		argv: func(path string, o *Options) []string {
			return append([]string{path, "run", "--format", "json"}, o.Args...)
		},
		stdin:     true,
		newParser: func(now func() time.Time) parser { return &opencodeParser{now: now} },
		limitText: opencodeLimitText,
	}
}

// opencodeLine is what the parser reads of one event.
type opencodeLine struct {
	Type, SessionID string
	// part
	Text             string // text
	Tool, CallID     string // tool
	Status           string // tool state: completed | error
	Input            int    // tool state input (node)
	Output, ErrorMsg string // tool state output, error
	Cost             *float64
	Tokens           *Usage // step-finish; output includes reasoning
	// error
	ErrName, ErrMessage string
	StatusCode          int64
}

type opencodeParser struct {
	now     func() time.Time
	doc     jdoc
	l       opencodeLine
	cost    float64
	tokens  Usage
	session lastSession
	last    string // the last text part: the final answer
	steps   int
}

func (p *opencodeParser) decode() bool {
	r := jread{jdoc: &p.doc}
	l := &p.l
	*l = opencodeLine{Input: -1}
	root := r.object(0)
	l.Type = r.str(r.field(root, "type"))
	l.SessionID = r.str(r.field(root, "sessionID"))
	part := r.object(r.field(root, "part"))
	switch l.Type {
	case "text":
		l.Text = r.str(r.field(part, "text"))
	case "tool_use":
		l.Tool = r.str(r.field(part, "tool"))
		l.CallID = r.str(r.field(part, "callID"))
		st := r.object(r.field(part, "state"))
		l.Status = r.str(r.field(st, "status"))
		l.Input = r.field(st, "input")
		l.Output = r.str(r.field(st, "output"))
		l.ErrorMsg = r.str(r.field(st, "error"))
	case "step_finish":
		if c := r.field(part, "cost"); r.kind(c) == jNumber {
			p.cost = r.float(c)
			l.Cost = &p.cost
		}
		if t := r.object(r.field(part, "tokens")); t >= 0 {
			cache := r.object(r.field(t, "cache"))
			// Reasoning is billed as output.
			p.tokens = Usage{Input: r.int(r.field(t, "input")), Output: r.int(r.field(t, "output")) + r.int(r.field(t, "reasoning")),
				CacheRead: r.int(r.field(cache, "read")), CacheWrite: r.int(r.field(cache, "write"))}
			l.Tokens = &p.tokens
		}
	case "error":
		e := r.object(r.field(root, "error"))
		l.ErrName = r.str(r.field(e, "name"))
		data := r.object(r.field(e, "data"))
		l.ErrMessage = r.str(r.field(data, "message"))
		l.StatusCode = r.int(r.field(data, "statusCode"))
	}
	return !r.bad && root >= 0
}

func (p *opencodeParser) line(b []byte, emit func(Event)) {
	if !p.doc.parse(b) || !p.decode() || p.l.Type == "" {
		emit(rawEvent(b))
		return
	}
	l := &p.l
	p.session.note(l.SessionID, emit)
	switch l.Type {
	case "step_start", "reasoning":
	case "text":
		p.last = l.Text
		emit(Event{Kind: EventText, Text: l.Text})
	case "tool_use":
		p.tool(l, emit)
	case "step_finish":
		p.steps++
		if l.Tokens != nil {
			emit(Event{Kind: EventUsage, Usage: *l.Tokens})
		}
		if l.Cost != nil {
			emit(Event{Kind: EventCost, CostUSD: *l.Cost})
		}
	case "error":
		msg := l.ErrMessage
		if msg == "" {
			msg = l.ErrName
		}
		if msg == "" {
			msg = "opencode: the session failed"
		}
		lim := opencodeLimitText(msg, p.now())
		if lim == nil {
			lim = limitForStatus(int(l.StatusCode), msg)
		}
		emit(Event{Kind: EventError, Text: msg, Limit: lim})
	case "done":
		emit(Event{Kind: EventFinal, Text: p.last, Turns: p.steps})
	default:
		emit(rawEvent(b))
	}
}

func (p *opencodeParser) tool(l *opencodeLine, emit func(Event)) {
	if l.Status == "" {
		return // no state: nothing ran
	}
	in := ""
	if l.Input >= 0 {
		in = p.doc.compact(l.Input, maxShort)
	}
	emit(Event{Kind: EventToolUse, Tool: l.Tool, ToolID: l.CallID, Input: in})
	text, failed := l.Output, l.Status == "error"
	if failed {
		text = l.ErrorMsg
	}
	emit(Event{Kind: EventToolResult, ToolID: l.CallID, Text: short(text), IsError: failed})
}
