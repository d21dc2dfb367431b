package agent

import (
	"encoding/json"
	"time"
)

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

type opencodeLine struct {
	Type      string        `json:"type"`
	SessionID string        `json:"sessionID"`
	Part      *opencodePart `json:"part"`
	Error     *struct {
		Name string `json:"name"`
		Data *struct {
			Message    string `json:"message"`
			StatusCode int    `json:"statusCode"`
		} `json:"data"`
	} `json:"error"`
}

type opencodePart struct {
	Type   string `json:"type"`
	Text   string `json:"text"`   // text
	Tool   string `json:"tool"`   // tool
	CallID string `json:"callID"` // tool
	State  *struct {
		Status string          `json:"status"` // completed | error
		Input  json.RawMessage `json:"input"`
		Output string          `json:"output"`
		Error  string          `json:"error"`
	} `json:"state"` // tool
	Reason string   `json:"reason"` // step-finish
	Cost   *float64 `json:"cost"`   // step-finish: USD for the step
	Tokens *struct {
		Input     int64 `json:"input"`
		Output    int64 `json:"output"`
		Reasoning int64 `json:"reasoning"`
		Cache     struct {
			Read  int64 `json:"read"`
			Write int64 `json:"write"`
		} `json:"cache"`
	} `json:"tokens"` // step-finish
}

type opencodeParser struct {
	now     func() time.Time
	session string
	last    string // the last text part: the final answer
	steps   int
}

func (p *opencodeParser) line(b []byte, emit func(Event)) {
	var l opencodeLine
	if err := json.Unmarshal(b, &l); err != nil || l.Type == "" {
		emit(rawEvent(b))
		return
	}
	if l.SessionID != "" && l.SessionID != p.session {
		p.session = l.SessionID
		emit(Event{Kind: EventSession, SessionID: l.SessionID})
	}
	switch l.Type {
	case "step_start", "reasoning":
	case "text":
		if l.Part != nil {
			p.last = l.Part.Text
			emit(Event{Kind: EventText, Text: l.Part.Text})
		}
	case "tool_use":
		p.tool(l.Part, emit)
	case "step_finish":
		p.steps++
		if pt := l.Part; pt != nil && pt.Tokens != nil {
			t := pt.Tokens
			// Reasoning is billed as output.
			emit(Event{Kind: EventUsage, Usage: Usage{Input: t.Input, Output: t.Output + t.Reasoning, CacheRead: t.Cache.Read, CacheWrite: t.Cache.Write}})
		}
		if pt := l.Part; pt != nil && pt.Cost != nil {
			emit(Event{Kind: EventCost, CostUSD: *pt.Cost})
		}
	case "error":
		msg, status := "opencode: the session failed", 0
		if e := l.Error; e != nil {
			msg = e.Name
			if e.Data != nil {
				if e.Data.Message != "" {
					msg = e.Data.Message
				}
				status = e.Data.StatusCode
			}
		}
		lim := opencodeLimitText(msg, p.now())
		if lim == nil {
			lim = limitForStatus(status, msg)
		}
		emit(Event{Kind: EventError, Text: msg, Limit: lim})
	case "done":
		emit(Event{Kind: EventFinal, Text: p.last, Turns: p.steps})
	default:
		emit(rawEvent(b))
	}
}

func (p *opencodeParser) tool(pt *opencodePart, emit func(Event)) {
	if pt == nil || pt.State == nil {
		return
	}
	emit(Event{Kind: EventToolUse, Tool: pt.Tool, ToolID: pt.CallID, Input: inputSummary(pt.State.Input)})
	text, failed := pt.State.Output, pt.State.Status == "error"
	if failed {
		text = pt.State.Error
	}
	emit(Event{Kind: EventToolResult, ToolID: pt.CallID, Text: short(text), IsError: failed})
}
