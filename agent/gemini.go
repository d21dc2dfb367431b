package agent

import (
	"encoding/json"
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

type geminiLine struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"` // init
	Role      string          `json:"role"`       // message
	Content   string          `json:"content"`    // message
	Delta     bool            `json:"delta"`      // message
	ToolName  string          `json:"tool_name"`  // tool_use
	ToolID    string          `json:"tool_id"`    // tool_use, tool_result
	Params    json.RawMessage `json:"parameters"` // tool_use
	Status    string          `json:"status"`     // tool_result, result: success | error
	Output    string          `json:"output"`     // tool_result
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"` // tool_result, result
	Severity string       `json:"severity"` // error: warning | error
	Message  string       `json:"message"`  // error
	Stats    *geminiStats `json:"stats"`    // result
}

// geminiStats are a session's totals: input_tokens is the whole prompt,
// split into input (not cached) and cached.
type geminiStats struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cached       int64 `json:"cached"`
	Input        int64 `json:"input"`
	ToolCalls    int   `json:"tool_calls"`
}

type geminiParser struct {
	now    func() time.Time
	answer strings.Builder // the assistant's text so far: the final answer
	inMsg  bool            // the last assistant message was a delta still open
	warned string          // the last error event's message
}

func (p *geminiParser) line(b []byte, emit func(Event)) {
	var l geminiLine
	if err := json.Unmarshal(b, &l); err != nil || l.Type == "" {
		emit(rawEvent(b))
		return
	}
	switch l.Type {
	case "init":
		if l.SessionID != "" {
			emit(Event{Kind: EventSession, SessionID: l.SessionID})
		}
	case "message":
		if l.Role != "assistant" {
			return // the prompt echoed back
		}
		if !l.Delta || !p.inMsg {
			if p.answer.Len() > 0 {
				p.answer.WriteString("\n")
			}
		}
		p.inMsg = l.Delta
		p.answer.WriteString(l.Content)
		emit(Event{Kind: EventText, Text: l.Content})
	case "tool_use":
		p.inMsg = false
		emit(Event{Kind: EventToolUse, Tool: l.ToolName, ToolID: l.ToolID, Input: inputSummary(l.Params)})
	case "tool_result":
		text := l.Output
		if l.Error != nil && l.Error.Message != "" {
			text = l.Error.Message
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
		p.result(&l, emit)
	default:
		emit(rawEvent(b))
	}
}

func (p *geminiParser) result(l *geminiLine, emit func(Event)) {
	if s := l.Stats; s != nil {
		input := s.Input
		if input == 0 && s.InputTokens > s.Cached {
			input = s.InputTokens - s.Cached // older stats without the split
		}
		emit(Event{Kind: EventUsage, Total: true, Usage: Usage{Input: input, Output: s.OutputTokens, CacheRead: s.Cached}})
	}
	if l.Status == "success" {
		emit(Event{Kind: EventFinal, Text: p.answer.String()})
		return
	}
	msg := "gemini: the session failed"
	switch {
	case l.Error != nil && l.Error.Message != "":
		msg = l.Error.Message
	case p.warned != "":
		msg = p.warned
	}
	emit(Event{Kind: EventError, Text: msg, Limit: geminiLimitText(msg, p.now())})
}
