package agent

import (
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

// claudeLine is what the parser reads of one stream-json message.
type claudeLine struct {
	Type, Subtype, SessionID string
	// assistant, user
	MsgID    string
	Blocks   []claudeBlock // message.content; a string content is one text block
	Usage    *Usage        // message.usage (assistant) or usage (result)
	MsgError string        // assistant error: authentication_failed, billing_error, rate_limit, …
	// result
	Result         string
	IsError        bool
	TotalCostUSD   *float64
	NumTurns       int64
	Errors         int // node of errors: a list of strings
	APIErrorStatus int64
	// rate_limit_event
	RateLimitStatus, RateLimitType string
	ResetsAt                       int64
}

type claudeBlock struct {
	Type, Text, ID, Name, ToolUseID string
	Input, Content                  int // nodes: any JSON (tool_use input; tool_result content)
	IsError                         bool
}

type claudeParser struct {
	now       func() time.Time
	doc       jdoc
	l         claudeLine
	usage     [2]Usage // storage for l.Usage
	session   lastSession
	lastMsgID string // the assistant message whose usage was counted last
}

// decode reads the line in p.doc into p.l; false when a field has the
// wrong type.
func (p *claudeParser) decode() bool {
	r := jread{jdoc: &p.doc}
	l := &p.l
	*l = claudeLine{Blocks: l.Blocks[:0], Errors: -1}
	root := r.object(0)
	l.Type = r.str(r.field(root, "type"))
	l.Subtype = r.str(r.field(root, "subtype"))
	l.SessionID = r.str(r.field(root, "session_id"))
	switch l.Type {
	case "assistant", "user":
		msg := r.object(r.field(root, "message"))
		l.MsgID = r.str(r.field(msg, "id"))
		l.MsgError = r.str(r.field(root, "error"))
		if u := r.object(r.field(msg, "usage")); u >= 0 {
			p.usage[0] = claudeUsage(&r, u)
			l.Usage = &p.usage[0]
		}
		content := r.field(msg, "content")
		if r.kind(content) == jString {
			l.Blocks = append(l.Blocks, claudeBlock{Type: "text", Text: r.str(content), Input: -1, Content: -1})
			break
		}
		r.elems(r.array(content), func(b int) {
			b = r.object(b)
			l.Blocks = append(l.Blocks, claudeBlock{
				Type: r.str(r.field(b, "type")), Text: r.str(r.field(b, "text")),
				ID: r.str(r.field(b, "id")), Name: r.str(r.field(b, "name")), Input: r.field(b, "input"),
				ToolUseID: r.str(r.field(b, "tool_use_id")), Content: r.field(b, "content"), IsError: r.bool(r.field(b, "is_error")),
			})
		})
	case "result":
		l.Result = r.str(r.field(root, "result"))
		l.IsError = r.bool(r.field(root, "is_error"))
		if c := r.field(root, "total_cost_usd"); r.kind(c) == jNumber {
			v := r.float(c)
			l.TotalCostUSD = &v
		} else {
			r.float(c) // null or absent: no cost; another type: bad
		}
		l.NumTurns = r.int(r.field(root, "num_turns"))
		l.Errors = r.array(r.field(root, "errors"))
		l.APIErrorStatus = r.int(r.field(root, "api_error_status"))
		if u := r.object(r.field(root, "usage")); u >= 0 {
			p.usage[1] = claudeUsage(&r, u)
			l.Usage = &p.usage[1]
		}
	case "rate_limit_event":
		info := r.object(r.field(root, "rate_limit_info"))
		l.RateLimitStatus = r.str(r.field(info, "status"))
		l.RateLimitType = r.str(r.field(info, "rateLimitType"))
		l.ResetsAt = r.int(r.field(info, "resetsAt"))
	}
	return !r.bad && root >= 0
}

// claudeUsage reads the Anthropic Messages API usage object.
func claudeUsage(r *jread, u int) Usage {
	return Usage{
		Input:      r.int(r.field(u, "input_tokens")),
		Output:     r.int(r.field(u, "output_tokens")),
		CacheRead:  r.int(r.field(u, "cache_read_input_tokens")),
		CacheWrite: r.int(r.field(u, "cache_creation_input_tokens")),
	}
}

func (p *claudeParser) line(b []byte, emit func(Event)) {
	if !p.doc.parse(b) || !p.decode() || p.l.Type == "" {
		emit(rawEvent(b))
		return
	}
	l := &p.l
	p.session.note(l.SessionID, emit)
	switch l.Type {
	case "system":
		// init carries the session id (above); other subtypes (hooks,
		// tasks, compaction) have nothing ralph counts.
	case "assistant":
		p.assistant(emit)
	case "user":
		for _, bl := range l.Blocks {
			if bl.Type == "tool_result" {
				emit(Event{Kind: EventToolResult, ToolID: bl.ToolUseID, Text: short(p.resultText(bl.Content)), IsError: bl.IsError})
			}
		}
	case "result":
		p.result(emit)
	case "rate_limit_event":
		p.rateLimit(emit)
	default:
		emit(rawEvent(b))
	}
}

func (p *claudeParser) assistant(emit func(Event)) {
	l := &p.l
	for _, bl := range l.Blocks {
		switch bl.Type {
		case "text":
			if l.MsgError == "" { // an error's text is reported with the error below
				emit(Event{Kind: EventText, Text: bl.Text})
			}
		case "tool_use", "server_tool_use":
			emit(Event{Kind: EventToolUse, Tool: bl.Name, ToolID: bl.ID, Input: p.inputSummary(bl.Input)})
		}
	}
	// --verbose prints one line per content block, each repeating its
	// message's usage: count a message once.
	if l.Usage != nil && (l.MsgID == "" || l.MsgID != p.lastMsgID) {
		p.lastMsgID = l.MsgID
		emit(Event{Kind: EventUsage, Usage: *l.Usage})
	}
	if l.MsgError != "" {
		text := blocksText(l.Blocks)
		if text == "" {
			text = "claude: " + l.MsgError
		}
		lim := claudeLimitText(text, p.now())
		if lim == nil && l.MsgError == "rate_limit" {
			lim = &Limit{Kind: LimitRate, Message: short(text)}
		}
		emit(Event{Kind: EventError, Text: text, Limit: lim})
	}
}

func (p *claudeParser) result(emit func(Event)) {
	l := &p.l
	if l.Usage != nil {
		emit(Event{Kind: EventUsage, Usage: *l.Usage, Total: true})
	}
	if l.TotalCostUSD != nil {
		emit(Event{Kind: EventCost, CostUSD: *l.TotalCostUSD, Total: true})
	}
	if l.Subtype == "success" && !l.IsError {
		emit(Event{Kind: EventFinal, Text: l.Result, Turns: int(l.NumTurns)})
		return
	}
	text := l.Result
	if text == "" {
		var errs []string
		p.doc.elems(l.Errors, func(e int) {
			if s, ok := p.doc.str(e); ok && s != "" && p.doc.kind(e) == jString {
				errs = append(errs, s)
			}
		})
		text = strings.Join(errs, "; ")
	}
	if text == "" {
		text = "claude ended with " + l.Subtype
	}
	lim := claudeLimitText(text, p.now())
	if lim == nil {
		lim = limitForStatus(int(l.APIErrorStatus), text)
	}
	emit(Event{Kind: EventError, Text: text, Limit: lim, Turns: int(l.NumTurns)})
}

// rateLimit reads rate_limit_event: status "rejected" means the limit is
// hit until resetsAt (unix seconds); "allowed" and "allowed_warning" are
// not limits.
func (p *claudeParser) rateLimit(emit func(Event)) {
	l := &p.l
	if l.RateLimitStatus != "rejected" {
		return
	}
	lim := &Limit{Kind: LimitUsage, Message: "Claude usage limit reached"}
	if l.RateLimitType != "" {
		lim.Message += " (" + l.RateLimitType + ")"
	}
	if l.ResetsAt > 0 {
		lim.Reset = time.Unix(l.ResetsAt, 0)
	}
	emit(Event{Kind: EventError, Text: lim.Message, Limit: lim})
}

// blocksText joins a message's text blocks.
func blocksText(blocks []claudeBlock) string {
	var parts []string
	for _, bl := range blocks {
		if bl.Type == "text" && bl.Text != "" {
			parts = append(parts, bl.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// resultText reads a tool_result's content: a string, or a list of blocks
// whose text blocks are joined.
func (p *claudeParser) resultText(content int) string {
	d := &p.doc
	switch d.kind(content) {
	case jString:
		s, _ := d.str(content)
		return s
	case jArray:
		var parts []string
		d.elems(content, func(b int) {
			if d.is(d.field(b, "type"), "text") {
				if s, ok := d.str(d.field(b, "text")); ok && s != "" {
					parts = append(parts, s)
				}
			}
		})
		return strings.Join(parts, "\n")
	}
	return ""
}

// inputSummary is a tool input as one short line: its compact JSON.
func (p *claudeParser) inputSummary(input int) string {
	if input < 0 {
		return ""
	}
	return p.doc.compact(input, maxShort)
}
