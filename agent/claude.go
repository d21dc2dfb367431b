package agent

import (
	"regexp"
	"strings"
	"time"
)

// claudeBackend runs Claude Code headless: `claude -p --output-format
// stream-json --verbose`, prompt on stdin. Its stream is one JSON message
// per line: system (subtype init), assistant, user, result, and
// rate_limit_event (see docs/agents.md, "What each parser reads").
func claudeBackend() backend {
	return backend{
		Facts: Facts{Name: "claude", Auto: true, ReportsCost: true, ReportsTokens: true, ExampleModel: "claude-sonnet-4-5",
			StateDirs: claudeStateDirs, StateFiles: claudeStateFiles, APIHosts: []string{"api.anthropic.com", "console.anthropic.com"}, BaseURLEnv: []string{"ANTHROPIC_BASE_URL"}},
		bin: "claude",
		argv: func(path string, o *Options) []string {
			return append([]string{path, "-p", "--output-format", "stream-json", "--verbose"}, o.Args...)
		},
		stdin:       true,
		newParser:   func(now func() time.Time) parser { return &claudeParser{now: now} },
		limitText:   claudeLimitText,
		permissions: claudePermissions,
		stderrLine:  claudeStderrLine,
	}
}

// claudeStderrLine reads Claude Code's standard error, where it prints
// only what stops it before its stream starts. As root it refuses
// --dangerously-skip-permissions ("--dangerously-skip-permissions cannot
// be used with root/sudo privileges for security reasons", exit 1): that
// becomes an error that says how to fix it. No line is a retry notice
// (Claude Code prints those on stdout, as api_retry).
//
// A permission mode it does not know stops it the same way: 2.1.332 calls
// the mode that asks for everything "manual" (it still takes "default"),
// which 2.1.197 refuses ("error: option '--permission-mode <mode>' argument
// 'manual' is invalid. Allowed choices are acceptEdits, auto,
// bypassPermissions, default, dontAsk, plan.").
func claudeStderrLine(line string, emit func(Event)) bool {
	switch {
	case strings.Contains(line, "--dangerously-skip-permissions cannot be used with root"):
		emit(Event{Kind: EventError, Text: "Claude Code refuses --dangerously-skip-permissions as root (" + short(line) +
			"): run ralph as another user, set IS_SANDBOX=1 in [agent.env] if this is a sandbox, or remove the flag from [agent] args."})
	case strings.Contains(line, "'--permission-mode <mode>' argument 'manual' is invalid"):
		emit(Event{Kind: EventError, Text: "this Claude Code does not know --permission-mode manual, the name 2.1.332 gives the mode " +
			"that asks for everything (" + short(line) + "): write default instead, or acceptEdits to let it edit in the workspace (`ralph init --agent claude` writes it)."})
	case strings.Contains(line, "'--permission-mode <mode>' argument"):
		emit(Event{Kind: EventError, Text: "Claude Code does not know that --permission-mode (" + short(line) +
			"): use one it lists in [agent] args, e.g. acceptEdits (`ralph init --agent claude` writes it)."})
	}
	return false
}

// claudePermissions are Claude Code's headless permissions (see `claude
// --help` and its permission rules): --permission-mode acceptEdits lets it
// edit files in its working directory without asking, and --allowedTools
// "Bash(<test> *)" lets its Bash tool run the test command, with or
// without more arguments (a rule ending in " *" also matches the bare
// command); anything else it would ask for is refused in -p mode. full is
// --dangerously-skip-permissions, which Claude Code refuses to honour as
// root unless IS_SANDBOX=1.
func claudePermissions(test []string, full bool) Permissions {
	if full {
		return Permissions{
			Args: []string{"--dangerously-skip-permissions"},
			Comment: []string{
				"WARNING: --dangerously-skip-permissions lets Claude Code run any command and edit any file without asking.",
				"Use it only in a sandbox (a container or VM with nothing to lose); as root, Claude Code refuses it unless IS_SANDBOX=1.",
			},
		}
	}
	p := Permissions{
		Args:    []string{"--permission-mode", "acceptEdits"},
		Comment: []string{"--permission-mode acceptEdits: Claude Code may edit files in the workspace without asking."},
	}
	if cmd := shellJoin(test); cmd != "" {
		rule := "Bash(" + cmd + " *)"
		p.Args = append(p.Args, "--allowedTools", rule)
		p.Comment = append(p.Comment, "--allowedTools "+rule+": its Bash tool may run the test command (with any arguments); other commands are refused.")
	}
	return p
}

// shellJoin writes argv as one shell command line, quoting the words that
// need it.
func shellJoin(argv []string) string {
	words := make([]string, 0, len(argv))
	for _, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			words = append(words, a)
			continue
		}
		words = append(words, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return strings.Join(words, " ")
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
	Denials        int // node of permission_denials: a list of {tool_name, tool_use_id, tool_input}
	// rate_limit_event
	RateLimitStatus, RateLimitType string
	ResetsAt                       int64
	// tool_progress
	ToolUseID, ToolName, ParentToolUseID string
	Elapsed                              int64
	// system api_retry
	Attempt, MaxRetries, ErrorStatus int64
	RetryDelayMS                     float64
	RetryError                       string
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
	// rejected is the limit of the last rate_limit_event whose status was
	// "rejected": the structured word of the account's limit, with its
	// exact reset (resetsAt), which the error that follows in text ("You've
	// hit your 5-hour limit · resets 2:19am (UTC)", minutes only) repeats.
	rejected *Limit
	// tools are the tool calls seen, by id, for naming a denial; denied
	// are those whose denial was already emitted.
	tools  map[string]claudeTool
	denied map[string]bool
}

// claudeTool is a tool call: its name and what it touches (a path or a
// command).
type claudeTool struct{ name, target string }

// decode reads the line in p.doc into p.l; false when a field has the
// wrong type.
func (p *claudeParser) decode() bool {
	r := jread{jdoc: &p.doc}
	l := &p.l
	*l = claudeLine{Blocks: l.Blocks[:0], Errors: -1, Denials: -1}
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
		l.Denials = r.array(r.field(root, "permission_denials"))
		if u := r.object(r.field(root, "usage")); u >= 0 {
			p.usage[1] = claudeUsage(&r, u)
			l.Usage = &p.usage[1]
		}
	case "rate_limit_event":
		info := r.object(r.field(root, "rate_limit_info"))
		l.RateLimitStatus = r.str(r.field(info, "status"))
		l.RateLimitType = r.str(r.field(info, "rateLimitType"))
		l.ResetsAt = r.int(r.field(info, "resetsAt"))
	case "tool_progress":
		l.ToolUseID = r.str(r.field(root, "tool_use_id"))
		l.ToolName = r.str(r.field(root, "tool_name"))
		l.ParentToolUseID = r.str(r.field(root, "parent_tool_use_id"))
		l.Elapsed = r.int(r.field(root, "elapsed_time_seconds"))
	case "system":
		if l.Subtype == "api_retry" {
			l.Attempt = r.int(r.field(root, "attempt"))
			l.MaxRetries = r.int(r.field(root, "max_retries"))
			l.RetryDelayMS = r.float(r.field(root, "retry_delay_ms"))
			l.ErrorStatus = r.int(r.field(root, "error_status"))
			l.RetryError = r.str(r.field(root, "error"))
		}
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
		// init carries the session id (above); api_retry is a request
		// Claude Code retries; other subtypes (hooks, tasks, compaction)
		// have nothing ralph counts.
		if l.Subtype == "api_retry" {
			p.retry(emit)
		}
	case "assistant":
		p.assistant(emit)
	case "user":
		for _, bl := range l.Blocks {
			if bl.Type == "tool_result" {
				text := p.resultText(bl.Content)
				emit(Event{Kind: EventToolResult, ToolID: bl.ToolUseID, Text: short(text), IsError: bl.IsError})
				if bl.IsError {
					p.deniedResult(bl.ToolUseID, text, emit)
				}
			}
		}
	case "result":
		p.result(emit)
	case "rate_limit_event":
		p.rateLimit(emit)
	case "tool_progress":
		p.progress(emit)
	case "keep_alive":
		emit(Event{Kind: EventProgress}) // a bare heartbeat: not shown, not output
	default:
		emit(rawEvent(b))
	}
}

// progress reads tool_progress, which Claude Code 2.1.332 prints while a
// tool runs (every 30 s for Bash: {"type":"tool_progress","tool_use_id":
// "toolu_1-heartbeat-0","tool_name":"Bash","parent_tool_use_id":"toolu_1",
// "elapsed_time_seconds":30,"heartbeat":true,…}): a progress notice, not
// output, so that a hung command still meets the idle timeout. A
// heartbeat's tool call is its parent_tool_use_id.
func (p *claudeParser) progress(emit func(Event)) {
	l := &p.l
	id := l.ToolUseID
	if tool, ok := p.tools[l.ParentToolUseID]; ok {
		id = l.ParentToolUseID
		if l.ToolName == "" {
			l.ToolName = tool.name
		}
	}
	text := l.ToolName + " running"
	if l.ToolName == "" {
		text = "a tool is running"
	}
	if l.Elapsed > 0 {
		text += " for " + (time.Duration(l.Elapsed) * time.Second).String()
	}
	emit(Event{Kind: EventProgress, Tool: l.ToolName, ToolID: id, Text: text})
}

func (p *claudeParser) assistant(emit func(Event)) {
	l := &p.l
	if l.MsgError == "" {
		p.rejected = nil // the API answered: no limit holds the call now
	}
	for _, bl := range l.Blocks {
		switch bl.Type {
		case "text":
			if l.MsgError == "" { // an error's text is reported with the error below
				emit(Event{Kind: EventText, Text: bl.Text})
			}
		case "tool_use", "server_tool_use":
			emit(Event{Kind: EventToolUse, Tool: bl.Name, ToolID: bl.ID, Input: p.inputSummary(bl.Input)})
			if bl.ID != "" {
				if p.tools == nil {
					p.tools = map[string]claudeTool{}
				}
				p.tools[bl.ID] = claudeTool{bl.Name, p.toolTarget(bl.Input)}
			}
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
		status := 0
		if l.MsgError == "rate_limit" {
			status = 429
		}
		lim := p.limit(text, status)
		emit(Event{Kind: EventError, Text: claudeErrorText(text, l.MsgError == "authentication_failed"), Limit: lim})
	}
}

// limit is the limit an error of the call names. The structured event
// comes first: after a rejected rate_limit_event the error is that limit,
// with its exact reset, whatever the text says (Claude Code words it
// anew from version to version: "hit your session limit" in 2.1.197, "hit
// your 5-hour limit" in 2.1.332); only without one is the text read
// (claudeLimitText), then the API status.
func (p *claudeParser) limit(text string, status int) *Limit {
	if r := p.rejected; r != nil {
		l := *r
		if text != "" {
			l.Message = short(text)
		}
		return &l
	}
	if l := claudeLimitText(text, p.now()); l != nil {
		return l
	}
	return limitForStatus(status, text)
}

// claudeLogin is how Claude Code says it has no valid credentials:
// "Not logged in · Please run /login", "Invalid API key · Please run
// /login", "Invalid API key · Fix external API key", "Failed to
// authenticate. API Error: 401 …".
var claudeLogin = regexp.MustCompile(`(?i)please run /login|invalid api key|not logged in|failed to authenticate`)

// claudeErrorText makes an authentication error one sentence that says
// how to fix it; other errors are Claude Code's own words.
func claudeErrorText(text string, auth bool) string {
	if !auth && !claudeLogin.MatchString(text) {
		return text
	}
	return "Claude Code is not authenticated (" + short(text) + "): log in with `claude` (then /login), " +
		"or set ANTHROPIC_API_KEY in the agent's environment."
}

// retry reads system/api_retry: Claude Code retries a failed request
// (attempt of max_retries, after retry_delay_ms; error_status is the HTTP
// status, null for a connection error; error names its kind).
func (p *claudeParser) retry(emit func(Event)) {
	l := &p.l
	r := &Retry{Status: int(l.ErrorStatus), Attempt: int(l.Attempt), Max: int(l.MaxRetries),
		Delay: time.Duration(l.RetryDelayMS * float64(time.Millisecond)), Message: l.RetryError}
	if r.Delay < 0 || l.RetryDelayMS > float64(1<<62/time.Millisecond) {
		r.Delay = 0
	}
	emit(Event{Kind: EventRetry, Retry: r})
}

// claudeDenied is a tool_result's text when Claude Code refused the call
// for want of permission: "Claude requested permissions to write to
// /path, but you haven't granted it yet." (also "read from /path", "use
// Tool"), and "This command requires approval" for Bash.
var claudeDenied = regexp.MustCompile(`Claude requested permissions to (?:write to|read from|use) (.+?), but you haven't granted it yet|This command requires approval`)

// deniedResult emits EventDenied for an error tool_result whose text is a
// permission refusal.
func (p *claudeParser) deniedResult(id, text string, emit func(Event)) {
	m := claudeDenied.FindStringSubmatch(text)
	if m == nil || p.denied[id] {
		return
	}
	tool := p.tools[id]
	target := tool.target
	if m[1] != "" && tool.target == "" {
		target = m[1]
	}
	p.deny(id, &Denial{Tool: tool.name, Target: short(target), Message: short(text)}, emit)
}

func (p *claudeParser) deny(id string, d *Denial, emit func(Event)) {
	if id != "" {
		if p.denied == nil {
			p.denied = map[string]bool{}
		}
		p.denied[id] = true
	}
	emit(Event{Kind: EventDenied, Denial: d})
}

// toolTarget is what a tool call touches: file_path (Read, Edit, Write),
// notebook_path, path, or the Bash command.
func (p *claudeParser) toolTarget(input int) string {
	d := &p.doc
	if d.kind(input) != jObject {
		return ""
	}
	for _, k := range []string{"file_path", "notebook_path", "path", "command", "url", "pattern"} {
		if f := d.field(input, k); d.kind(f) == jString {
			if s, ok := d.str(f); ok && s != "" {
				return short(s)
			}
		}
	}
	return ""
}

func (p *claudeParser) result(emit func(Event)) {
	l := &p.l
	// permission_denials lists every refused call; those whose
	// tool_result already said so were emitted then.
	p.doc.elems(l.Denials, func(e int) {
		d := &p.doc
		if d.kind(e) != jObject {
			return
		}
		id, _ := d.str(d.field(e, "tool_use_id"))
		if p.denied[id] && id != "" {
			return
		}
		name, _ := d.str(d.field(e, "tool_name"))
		target := p.toolTarget(d.field(e, "tool_input"))
		p.deny(id, &Denial{Tool: name, Target: target, Message: short("Claude Code was not permitted to run " + name)}, emit)
	})
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
	emit(Event{Kind: EventError, Text: claudeErrorText(text, l.APIErrorStatus == 401), Limit: p.limit(text, int(l.APIErrorStatus)),
		Turns: int(l.NumTurns)})
}

// rateLimit reads rate_limit_event: status "rejected" means the limit is
// hit until resetsAt (unix seconds, exact); "allowed" and
// "allowed_warning" are not limits. rateLimitType names the window
// (five_hour, seven_day, seven_day_opus, seven_day_sonnet, overage, …).
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
		lim.Reset, lim.Exact = time.Unix(l.ResetsAt, 0), true
	}
	p.rejected = lim
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
