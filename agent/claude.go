package agent

import (
	"encoding/json"
	"strings"
	"time"
)

// claudeBackend runs Claude Code headless: `claude -p --output-format
// stream-json --verbose`, prompt on stdin. Its stream is one JSON message
// per line: system (subtype init), assistant, user, result, and
// rate_limit_event (see docs/agents.md, "What each parser reads").
func claudeBackend() backend {
	return backend{
		name: "claude",
		bin:  "claude",
		argv: func(path string, o *Options) []string {
			return append([]string{path, "-p", "--output-format", "stream-json", "--verbose"}, o.Args...)
		},
		stdin:     true,
		newParser: func(now func() time.Time) parser { return &claudeParser{now: now} },
		limitText: claudeLimitText,
	}
}

// claudeLine is the union of the stream-json message fields the parser
// reads. Fields whose type varies between messages stay raw.
type claudeLine struct {
	Type           string          `json:"type"`
	Subtype        string          `json:"subtype"`
	SessionID      string          `json:"session_id"`
	Message        *claudeMessage  `json:"message"`
	Error          string          `json:"error"` // assistant: authentication_failed, billing_error, rate_limit, …
	Result         string          `json:"result"`
	IsError        bool            `json:"is_error"`
	TotalCostUSD   *float64        `json:"total_cost_usd"`
	NumTurns       int             `json:"num_turns"`
	Usage          *claudeUsage    `json:"usage"`
	Errors         json.RawMessage `json:"errors"`
	APIErrorStatus int             `json:"api_error_status"`
	RateLimitInfo  *struct {
		Status        string `json:"status"`
		ResetsAt      int64  `json:"resetsAt"`
		RateLimitType string `json:"rateLimitType"`
	} `json:"rate_limit_info"`
}

type claudeMessage struct {
	ID      string        `json:"id"`
	Content claudeContent `json:"content"`
	Usage   *claudeUsage  `json:"usage"`
}

// claudeUsage is the Anthropic Messages API usage object.
type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (u *claudeUsage) usage() Usage {
	return Usage{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens}
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result: a string or a list of blocks
	IsError   bool            `json:"is_error"`
}

// claudeContent is a message's content: a list of blocks, or (for a user
// message) a plain string, kept as one text block.
type claudeContent []claudeBlock

func (c *claudeContent) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = claudeContent{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(b, (*[]claudeBlock)(c))
}

type claudeParser struct {
	now       func() time.Time
	session   string
	lastMsgID string // the assistant message whose usage was counted last
}

func (p *claudeParser) line(b []byte, emit func(Event)) {
	var l claudeLine
	if err := json.Unmarshal(b, &l); err != nil || l.Type == "" {
		emit(rawEvent(b))
		return
	}
	if l.SessionID != "" && l.SessionID != p.session {
		p.session = l.SessionID
		emit(Event{Kind: EventSession, SessionID: l.SessionID})
	}
	switch l.Type {
	case "system":
		// init carries the session id (above); other subtypes (hooks,
		// tasks, compaction) have nothing ralph counts.
	case "assistant":
		p.assistant(&l, emit)
	case "user":
		p.user(&l, emit)
	case "result":
		p.result(&l, emit)
	case "rate_limit_event":
		p.rateLimit(&l, emit)
	default:
		emit(rawEvent(b))
	}
}

func (p *claudeParser) assistant(l *claudeLine, emit func(Event)) {
	if l.Message == nil {
		return
	}
	for _, bl := range l.Message.Content {
		switch bl.Type {
		case "text":
			if l.Error != "" {
				continue // reported with the error below
			}
			emit(Event{Kind: EventText, Text: bl.Text})
		case "tool_use", "server_tool_use":
			emit(Event{Kind: EventToolUse, Tool: bl.Name, ToolID: bl.ID, Input: inputSummary(bl.Input)})
		}
	}
	// --verbose prints one line per content block, each repeating its
	// message's usage: count a message once.
	if u := l.Message.Usage; u != nil && (l.Message.ID == "" || l.Message.ID != p.lastMsgID) {
		p.lastMsgID = l.Message.ID
		emit(Event{Kind: EventUsage, Usage: u.usage()})
	}
	if l.Error != "" {
		text := contentText(l.Message.Content)
		if text == "" {
			text = "claude: " + l.Error
		}
		lim := claudeLimitText(text, p.now())
		if lim == nil && l.Error == "rate_limit" {
			lim = &Limit{Kind: LimitRate, Message: text}
		}
		emit(Event{Kind: EventError, Text: text, Limit: lim})
	}
}

func (p *claudeParser) user(l *claudeLine, emit func(Event)) {
	if l.Message == nil {
		return
	}
	for _, bl := range l.Message.Content {
		if bl.Type == "tool_result" {
			emit(Event{Kind: EventToolResult, ToolID: bl.ToolUseID, Text: short(resultText(bl.Content)), IsError: bl.IsError})
		}
	}
}

func (p *claudeParser) result(l *claudeLine, emit func(Event)) {
	if l.Usage != nil {
		emit(Event{Kind: EventUsage, Usage: l.Usage.usage(), Total: true})
	}
	if l.TotalCostUSD != nil {
		emit(Event{Kind: EventCost, CostUSD: *l.TotalCostUSD, Total: true})
	}
	if l.Subtype == "success" && !l.IsError {
		emit(Event{Kind: EventFinal, Text: l.Result, Turns: l.NumTurns})
		return
	}
	text := l.Result
	if text == "" {
		text = strings.Join(stringList(l.Errors), "; ")
	}
	if text == "" {
		text = "claude ended with " + l.Subtype
	}
	lim := claudeLimitText(text, p.now())
	if lim == nil {
		switch l.APIErrorStatus {
		case 429:
			lim = &Limit{Kind: LimitRate, Message: text}
		case 529:
			lim = &Limit{Kind: LimitOverloaded, Message: text}
		}
	}
	emit(Event{Kind: EventError, Text: text, Limit: lim, Turns: l.NumTurns})
}

// rateLimit reads rate_limit_event: status "rejected" means the limit is
// hit until resetsAt (unix seconds); "allowed" and "allowed_warning" are
// not limits.
func (p *claudeParser) rateLimit(l *claudeLine, emit func(Event)) {
	info := l.RateLimitInfo
	if info == nil || info.Status != "rejected" {
		return
	}
	lim := &Limit{Kind: LimitUsage, Message: "Claude usage limit reached"}
	if info.RateLimitType != "" {
		lim.Message += " (" + info.RateLimitType + ")"
	}
	if info.ResetsAt > 0 {
		lim.Reset = time.Unix(info.ResetsAt, 0)
	}
	emit(Event{Kind: EventError, Text: lim.Message, Limit: lim})
}

// contentText joins a message's text blocks.
func contentText(c claudeContent) string {
	var parts []string
	for _, bl := range c {
		if bl.Type == "text" && bl.Text != "" {
			parts = append(parts, bl.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// resultText reads a tool_result's content: a string, or a list of blocks
// whose text blocks are joined.
func resultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	var blocks claudeContent
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	return contentText(blocks)
}

// stringList reads a JSON list, keeping its string elements.
func stringList(raw json.RawMessage) []string {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []string
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil && s != "" {
			out = append(out, s)
		}
	}
	return out
}
