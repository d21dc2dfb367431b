package agent

import (
	"strings"
	"time"
)

// geminiBackend runs Gemini CLI headless: `gemini --output-format
// stream-json`, prompt on stdin (a non-TTY stdin is headless mode and is
// read as the prompt). Its stream is JSONL events: init, message,
// tool_use, tool_result, error, result (see docs/agents.md).
func geminiBackend() backend {
	return backend{
		name: "gemini",
		bin:  "gemini",
		argv: func(path string, o *Options) []string {
			return append([]string{path, "--output-format", "stream-json"}, o.Args...)
		},
		stdin:     true,
		newParser: func(now func() time.Time) parser { return &geminiParser{now: now} },
		limitText: geminiLimitText,
	}
}

// geminiLine is what the parser reads of one stream-json event.
type geminiLine struct {
	Type      string
	SessionID string // init
	Role      string // message
	Content   string // message
	Delta     bool   // message
	ToolName  string // tool_use
	ToolID    string // tool_use, tool_result
	Params    int    // tool_use parameters (node)
	Status    string // tool_result, result: success | error
	Output    string // tool_result
	ErrorMsg  string // tool_result, result: error.message
	Severity  string // error: warning | error
	Message   string // error
	Stats     *Usage // result
}

type geminiParser struct {
	now    func() time.Time
	doc    jdoc
	l      geminiLine
	stats  Usage
	answer strings.Builder // the assistant's text so far: the final answer
	inMsg  bool            // the last assistant message was a delta still open
	warned string          // the last error event's message
}

func (p *geminiParser) decode() bool {
	r := jread{jdoc: &p.doc}
	l := &p.l
	*l = geminiLine{Params: -1}
	root := r.object(0)
	l.Type = r.str(r.field(root, "type"))
	switch l.Type {
	case "init":
		l.SessionID = r.str(r.field(root, "session_id"))
	case "message":
		l.Role = r.str(r.field(root, "role"))
		l.Content = r.str(r.field(root, "content"))
		l.Delta = r.bool(r.field(root, "delta"))
	case "tool_use":
		l.ToolName = r.str(r.field(root, "tool_name"))
		l.ToolID = r.str(r.field(root, "tool_id"))
		l.Params = r.field(root, "parameters")
	case "tool_result", "result":
		l.ToolID = r.str(r.field(root, "tool_id"))
		l.Status = r.str(r.field(root, "status"))
		l.Output = r.str(r.field(root, "output"))
		l.ErrorMsg = r.str(r.field(r.object(r.field(root, "error")), "message"))
		if st := r.object(r.field(root, "stats")); st >= 0 {
			// input_tokens is the whole prompt: input (not cached) plus cached.
			in, cached, whole := r.int(r.field(st, "input")), r.int(r.field(st, "cached")), r.int(r.field(st, "input_tokens"))
			if in == 0 && whole > cached {
				in = whole - cached // older stats without the split
			}
			p.stats = Usage{Input: in, Output: r.int(r.field(st, "output_tokens")), CacheRead: cached}
			l.Stats = &p.stats
		}
	case "error":
		l.Severity = r.str(r.field(root, "severity"))
		l.Message = r.str(r.field(root, "message"))
	}
	return !r.bad && root >= 0
}

func (p *geminiParser) line(b []byte, emit func(Event)) {
	if !p.doc.parse(b) || !p.decode() || p.l.Type == "" {
		emit(rawEvent(b))
		return
	}
	l := &p.l
	switch l.Type {
	case "init":
		if l.SessionID != "" {
			emit(Event{Kind: EventSession, SessionID: l.SessionID})
		}
	case "message":
		if l.Role != "assistant" {
			return // the prompt echoed back
		}
		if (!l.Delta || !p.inMsg) && p.answer.Len() > 0 {
			p.answer.WriteString("\n")
		}
		p.inMsg = l.Delta
		p.answer.WriteString(l.Content)
		emit(Event{Kind: EventText, Text: l.Content})
	case "tool_use":
		p.inMsg = false
		in := ""
		if l.Params >= 0 {
			in = p.doc.compact(l.Params, maxShort)
		}
		emit(Event{Kind: EventToolUse, Tool: l.ToolName, ToolID: l.ToolID, Input: in})
	case "tool_result":
		text := l.Output
		if l.ErrorMsg != "" {
			text = l.ErrorMsg
		}
		emit(Event{Kind: EventToolResult, ToolID: l.ToolID, Text: short(text), IsError: l.Status == "error"})
	case "error":
		if l.Severity == "warning" {
			emit(Event{Kind: EventRaw, Text: "gemini: " + l.Message})
			return
		}
		p.warned = l.Message
		emit(Event{Kind: EventError, Text: l.Message, Limit: geminiLimitText(l.Message, p.now())})
	case "result":
		p.result(l, emit)
	default:
		emit(rawEvent(b))
	}
}

func (p *geminiParser) result(l *geminiLine, emit func(Event)) {
	if l.Stats != nil {
		emit(Event{Kind: EventUsage, Total: true, Usage: *l.Stats})
	}
	if l.Status == "success" {
		emit(Event{Kind: EventFinal, Text: p.answer.String()})
		return
	}
	msg := "gemini: the session failed"
	switch {
	case l.ErrorMsg != "":
		msg = l.ErrorMsg
	case p.warned != "":
		msg = p.warned
	}
	emit(Event{Kind: EventError, Text: msg, Limit: geminiLimitText(msg, p.now())})
}
