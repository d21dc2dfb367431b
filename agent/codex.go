package agent

import (
	"encoding/json"
	"time"
)

// codexBackend runs Codex headless: `codex exec --json … -`, prompt on
// stdin ("-"). Its stream is JSONL ThreadEvents: thread.started,
// turn.started, item.started/updated/completed, turn.completed (with
// usage), turn.failed and error (see docs/agents.md).
func codexBackend() backend {
	return backend{
		name: "codex",
		bin:  "codex",
		argv: func(path string, o *Options) []string {
			argv := append([]string{path, "exec", "--json"}, o.Args...)
			return append(argv, "-")
		},
		stdin:     true,
		newParser: func(now func() time.Time) parser { return &codexParser{now: now} },
		limitText: codexLimitText,
	}
}

type codexLine struct {
	Type     string      `json:"type"`
	ThreadID string      `json:"thread_id"` // thread.started
	Item     *codexItem  `json:"item"`      // item.*
	Usage    *codexUsage `json:"usage"`     // turn.completed
	Message  string      `json:"message"`   // error
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"` // turn.failed
}

type codexItem struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Text string `json:"text"` // agent_message, reasoning
	// command_execution
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Status           string `json:"status"`
	// file_change
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	// mcp_tool_call
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	ErrorInfo *struct {
		Message string `json:"message"`
	} `json:"error"`
	// web_search
	Query string `json:"query"`
	// error
	Message string `json:"message"`
}

// codexUsage is the thread's token usage; input_tokens includes the
// cached input.
type codexUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

type codexParser struct {
	now     func() time.Time
	started map[string]bool // tool items announced by item.started
	last    string          // the last agent message: the final answer
	turns   int
}

func (p *codexParser) line(b []byte, emit func(Event)) {
	var l codexLine
	if err := json.Unmarshal(b, &l); err != nil || l.Type == "" {
		emit(rawEvent(b))
		return
	}
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			emit(Event{Kind: EventSession, SessionID: l.ThreadID})
		}
	case "turn.started":
	case "item.started", "item.updated", "item.completed":
		if l.Item == nil {
			emit(rawEvent(b))
			return
		}
		p.item(l.Type, l.Item, emit)
	case "turn.completed":
		p.turns++
		if u := l.Usage; u != nil {
			emit(Event{Kind: EventUsage, Total: true,
				Usage: Usage{Input: max(u.InputTokens-u.CachedInputTokens, 0), Output: u.OutputTokens, CacheRead: u.CachedInputTokens}})
		}
		emit(Event{Kind: EventFinal, Text: p.last, Turns: p.turns})
	case "turn.failed":
		msg := "codex: turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		emit(Event{Kind: EventError, Text: msg, Limit: codexLimitText(msg, p.now()), Turns: p.turns})
	case "error":
		emit(Event{Kind: EventError, Text: l.Message, Limit: codexLimitText(l.Message, p.now())})
	default:
		emit(rawEvent(b))
	}
}

func (p *codexParser) item(kind string, it *codexItem, emit func(Event)) {
	switch it.Type {
	case "agent_message":
		if kind == "item.completed" {
			p.last = it.Text
			emit(Event{Kind: EventText, Text: it.Text})
		}
		return
	case "reasoning", "todo_list", "plan":
		return // the agent's notes, not its answer
	case "error":
		emit(Event{Kind: EventRaw, Text: "codex: " + it.Message})
		return
	}
	tool, input := codexTool(it)
	if tool == "" {
		return // an item type this parser does not know: nothing to count
	}
	if kind == "item.started" || (kind == "item.completed" && !p.started[it.ID]) {
		if kind == "item.started" {
			if p.started == nil {
				p.started = map[string]bool{}
			}
			p.started[it.ID] = true
		}
		emit(Event{Kind: EventToolUse, Tool: tool, ToolID: it.ID, Input: input})
	}
	if kind == "item.completed" {
		delete(p.started, it.ID)
		text, failed := codexToolResult(it)
		emit(Event{Kind: EventToolResult, ToolID: it.ID, Text: short(text), IsError: failed})
	}
}

// codexTool names a tool item and summarises its input.
func codexTool(it *codexItem) (tool, input string) {
	switch it.Type {
	case "command_execution":
		return "command_execution", short(it.Command)
	case "file_change":
		s := ""
		for i, c := range it.Changes {
			if i > 0 {
				s += ", "
			}
			s += c.Kind + " " + c.Path
		}
		return "file_change", short(s)
	case "mcp_tool_call":
		return it.Server + "." + it.Tool, inputSummary(it.Arguments)
	case "web_search":
		return "web_search", short(it.Query)
	case "collab_tool_call":
		return "collab_tool_call", ""
	}
	return "", ""
}

func codexToolResult(it *codexItem) (text string, failed bool) {
	failed = it.Status == "failed" || it.Status == "declined"
	switch it.Type {
	case "command_execution":
		if it.ExitCode != nil && *it.ExitCode != 0 {
			failed = true
		}
		return it.AggregatedOutput, failed
	case "mcp_tool_call":
		if it.ErrorInfo != nil {
			return it.ErrorInfo.Message, true
		}
	}
	return it.Status, failed
}
