package agent

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// geminiBackend runs Gemini CLI headless: `gemini --output-format
// stream-json`, prompt on stdin (a non-TTY stdin is headless mode and is
// read as the prompt). Its stream is JSONL events: init, message,
// tool_use, tool_result, error, result (see docs/agents.md). Its retry
// notices, and the errors that stop it before the stream starts (no API
// key, an untrusted folder), are on standard error.
func geminiBackend() backend {
	st := &geminiStderr{}
	return backend{
		Facts: Facts{Name: "gemini", Auto: true, ReportsTokens: true, DefaultModel: "auto-gemini-2.5", ExampleModel: "gemini-2.5-pro",
			StateDirs: geminiStateDirs, APIHosts: geminiHosts, BaseURLEnv: []string{"GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_BASE_URL"}},
		bin: "gemini",
		argv: func(path string, o *Options) []string {
			return append([]string{path, "--output-format", "stream-json"}, o.Args...)
		},
		stdin:       true,
		newParser:   func(now func() time.Time) parser { return &geminiParser{now: now} },
		limitText:   geminiLimit,
		stderrLine:  st.line,
		permissions: geminiPermissions,
		argsDenial:  geminiPlanMode,
	}
}

// geminiPlanMode is the refusal of a call under --approval-mode plan.
// There Gemini CLI runs read-only: its plan policy (policies/plan.toml in
// 0.61) refuses every tool but the read-only ones, and an edit of source
// code with "Tool execution denied by policy. You are in Plan Mode and
// cannot modify source code. …" (a policy_violation the parser reports as
// it comes); its system prompt tells the model to explain that it is in
// Plan Mode rather than to try, so a model may refuse in words with no
// tool call at all, and the loop would see no change and call it stuck.
func geminiPlanMode(args []string) *Denial {
	if argValue(args, "--approval-mode") != "plan" {
		return nil
	}
	return &Denial{Tool: "edit tools", Message: "gemini runs in Plan Mode (--approval-mode plan): read-only, it cannot modify source code"}
}

// geminiPermissions: headless gemini refuses an untrusted folder and
// leaves out of its tool list every tool that would need approval
// (replace, write_file, run_shell_command), so by default it gets
// --skip-trust, --approval-mode auto_edit (edit tools approved; they write
// only inside the workspace) and --allowed-tools
// run_shell_command(<test>), which lets its shell run commands that begin
// with the test command and no other; full gets --approval-mode yolo.
func geminiPermissions(test []string, full bool) Permissions {
	if full {
		return Permissions{
			Args: []string{"--skip-trust", "--approval-mode", "yolo"},
			Comment: []string{
				"WARNING: --approval-mode yolo lets gemini run every tool without asking: any shell",
				"command, any file it can reach, the web. Use it only in a sandbox you can throw away.",
				"--skip-trust: headless gemini refuses to run in a folder it has not been told to trust.",
			},
		}
	}
	p := Permissions{
		Args: []string{"--skip-trust", "--approval-mode", "auto_edit"},
		Comment: []string{
			"gemini: --skip-trust trusts this folder for the call (headless gemini refuses an untrusted one);",
			"--approval-mode auto_edit lets it edit files inside the workspace (replace, write_file) without asking;",
		},
	}
	if cmd := shellJoin(test); cmd != "" {
		p.Args = append(p.Args, "--allowed-tools", "run_shell_command("+cmd+")")
		p.Comment = append(p.Comment,
			"--allowed-tools run_shell_command("+cmd+") lets its shell run the test command and no other",
			"(gemini 0.61 prints that --allowed-tools is deprecated in favour of --policy files; it still works).")
	} else {
		p.Comment = append(p.Comment, "its shell tool stays off: add --allowed-tools 'run_shell_command(<command>)' to allow a command.")
	}
	return p
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
	Target    string // tool_use parameters: file_path, command or dir_path
	Status    string // tool_result, result: success | error
	Output    string // tool_result
	ErrorType string // tool_result: error.type
	ErrorMsg  string // tool_result, result: error.message
	Severity  string // error: warning | error
	Message   string // error
	Stats     *Usage // result
}

const (
	// geminiTextFlush is how much text of one message is held, waiting
	// for a line's end, before it is emitted anyway.
	geminiTextFlush = 4 << 10
	// geminiMaxAnswer is how much of the final message the parser keeps
	// (its end).
	geminiMaxAnswer = 64 << 10
	// geminiMaxTools is how many tool calls awaiting their result the
	// parser remembers.
	geminiMaxTools = 256
)

// geminiTool is a tool call awaiting its result.
type geminiTool struct{ name, target string }

type geminiParser struct {
	now    func() time.Time
	doc    jdoc
	l      geminiLine
	stats  Usage
	models []ModelUsage // the result's stats.models: its usage split by model
	text   []byte       // the open message's text not yet emitted
	answer []byte       // the text since the last tool call: the final answer (its end)
	inMsg  bool         // a streamed (delta) assistant message is open
	inTurn bool         // a model turn is under way (text or tool calls since the last tool result)
	turns  int
	tools  map[string]geminiTool
	warned string // the last error event's message
}

// geminiStats reads a stats object (the result's, or one model's in its
// models): input_tokens is the whole prompt, input (not cached) plus
// cached; thoughts are not reported apart: they are what total_tokens
// holds beyond prompt and output.
func geminiStats(r *jread, st int) Usage {
	in, cached, whole := r.int(r.field(st, "input")), r.int(r.field(st, "cached")), r.int(r.field(st, "input_tokens"))
	out, total := r.int(r.field(st, "output_tokens")), r.int(r.field(st, "total_tokens"))
	if in == 0 && whole > cached {
		in = whole - cached // older stats without the split
	}
	u := Usage{Input: in, Output: out, CacheRead: cached}
	if whole > 0 && total > whole+out {
		u.Reasoning = total - whole - out
	}
	return u
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
		if params := r.object(l.Params); params >= 0 {
			for _, k := range []string{"file_path", "command", "dir_path"} {
				if s, ok := p.doc.str(p.doc.field(params, k)); ok && s != "" {
					l.Target = s
					break
				}
			}
		}
	case "tool_result", "result":
		l.ToolID = r.str(r.field(root, "tool_id"))
		l.Status = r.str(r.field(root, "status"))
		l.Output = r.str(r.field(root, "output"))
		e := r.object(r.field(root, "error"))
		l.ErrorType = r.str(r.field(e, "type"))
		l.ErrorMsg = r.str(r.field(e, "message"))
		if st := r.object(r.field(root, "stats")); st >= 0 {
			p.stats = geminiStats(&r, st)
			l.Stats = &p.stats
			p.models = p.models[:0]
			r.members(r.field(st, "models"), func(name string, m int) {
				if m = r.object(m); m >= 0 {
					p.models = append(p.models, ModelUsage{Model: name, Usage: geminiStats(&r, m)})
				}
			})
		}
	case "error":
		l.Severity = r.str(r.field(root, "severity"))
		l.Message = r.str(r.field(root, "message"))
	}
	return !r.bad && root >= 0
}

// line parses one line of gemini's stream-json output and emits its
// events; a line it cannot read goes out raw.
func (p *geminiParser) line(b []byte, emit func(Event)) {
	if !p.doc.parse(b) || !p.decode() || p.l.Type == "" {
		p.flush(emit)
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
		p.message(emit)
	case "tool_use":
		p.toolUse(emit)
	case "tool_result":
		p.toolResult(emit)
	case "error":
		p.flush(emit)
		if l.Severity == "warning" {
			emit(Event{Kind: EventRaw, Text: "gemini: " + l.Message})
			return
		}
		msg := geminiAPIError(l.Message)
		p.warned = msg
		emit(Event{Kind: EventError, Text: msg, Limit: geminiLimitText(msg, p.now()), Turns: p.turns})
	case "result":
		p.flush(emit)
		p.result(l, emit)
	default:
		p.flush(emit)
		emit(rawEvent(b))
	}
}

// message takes an assistant message or a delta of one: the answer grows,
// and the text goes out line by line.
func (p *geminiParser) message(emit func(Event)) {
	l := &p.l
	if l.Role != "assistant" {
		return // the prompt echoed back
	}
	p.startTurn()
	if !l.Delta || !p.inMsg {
		p.flush(emit)
		if len(p.answer) > 0 {
			p.answer = append(p.answer, '\n')
		}
	}
	p.inMsg = l.Delta
	p.answer = appendTail(p.answer, l.Content, geminiMaxAnswer)
	p.text = append(p.text, l.Content...)
	if !l.Delta {
		p.flush(emit)
		return
	}
	// Whole lines go out as they complete; a long line without an
	// end goes out when it grows past geminiTextFlush.
	if i := strings.LastIndexByte(l.Content, '\n'); i >= 0 {
		j := len(p.text) - len(l.Content) + i
		p.emitText(p.text[:j], emit)
		p.text = append(p.text[:0], p.text[j+1:]...)
	} else if len(p.text) >= geminiTextFlush {
		p.flush(emit)
	}
}

// toolUse emits a tool call and remembers the tool for its result.
func (p *geminiParser) toolUse(emit func(Event)) {
	l := &p.l
	p.startTurn()
	p.flush(emit)
	p.inMsg = false
	p.answer = p.answer[:0]
	in := ""
	if l.Params >= 0 {
		in = p.doc.compact(l.Params, maxShort)
	}
	if p.tools == nil || len(p.tools) >= geminiMaxTools {
		p.tools = map[string]geminiTool{}
	}
	p.tools[l.ToolID] = geminiTool{l.ToolName, l.Target}
	emit(Event{Kind: EventToolUse, Tool: l.ToolName, ToolID: l.ToolID, Input: in})
}

// toolResult emits a tool's result and, when the tool was refused, the
// denial.
func (p *geminiParser) toolResult(emit func(Event)) {
	l := &p.l
	p.flush(emit)
	p.inMsg, p.inTurn = false, false
	tool := p.tools[l.ToolID]
	delete(p.tools, l.ToolID)
	text := l.Output
	if l.ErrorMsg != "" {
		text = l.ErrorMsg
	}
	emit(Event{Kind: EventToolResult, ToolID: l.ToolID, Text: short(text), IsError: l.Status == "error"})
	if d := geminiDenial(l, tool); d != nil {
		emit(Event{Kind: EventDenied, Denial: d})
	}
}

// end emits the text held back when the output ends without a result
// (the call was killed, or gemini died).
func (p *geminiParser) end(emit func(Event)) { p.flush(emit) }

// startTurn counts a model turn when text or a tool call follows the
// prompt or a tool's result (gemini does not count its turns).
func (p *geminiParser) startTurn() {
	if !p.inTurn {
		p.inTurn = true
		p.turns++
	}
}

// flush emits the open message's text not yet emitted.
func (p *geminiParser) flush(emit func(Event)) {
	p.emitText(p.text, emit)
	p.text = p.text[:0]
}

// emitText emits b as text events of whole lines, at most
// geminiTextFlush bytes each (a longer line is cut).
func (p *geminiParser) emitText(b []byte, emit func(Event)) {
	for len(b) > 0 {
		n := len(b)
		if n > geminiTextFlush {
			n = bytes.LastIndexByte(b[:geminiTextFlush], '\n') + 1
			if n <= 0 {
				n = geminiTextFlush
				for n > 0 && !utf8.RuneStart(b[n]) {
					n--
				}
			}
		}
		s := strings.TrimRight(string(b[:n]), "\r\n")
		b = b[n:]
		if strings.TrimSpace(s) == "" {
			continue
		}
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		emit(Event{Kind: EventText, Text: s})
	}
}

// appendTail appends s to b and keeps at most the last n bytes (cut on a
// rune boundary).
func appendTail(b []byte, s string, n int) []byte {
	b = append(b, s...)
	if len(b) <= 2*n {
		return b
	}
	i := len(b) - n
	for i < len(b) && !utf8.RuneStart(b[i]) {
		i++
	}
	return append(b[:0], b[i:]...)
}

// geminiGated are the tools headless gemini leaves out of its tool list
// when its approval mode would have to ask for them: a call to one is
// answered `Tool "replace" not found`.
var geminiGated = map[string]bool{"replace": true, "write_file": true, "run_shell_command": true}

var geminiNotFound = regexp.MustCompile(`Tool "([^"]+)" not found`)

// geminiDenial reads a tool result that refused the tool for want of
// permission: a gated tool left out of the tool list, or a call the
// policy denied.
func geminiDenial(l *geminiLine, tool geminiTool) *Denial {
	switch l.ErrorType {
	case "tool_not_registered":
		name := tool.name
		if m := geminiNotFound.FindStringSubmatch(l.ErrorMsg); m != nil {
			name = m[1]
		}
		if !geminiGated[name] {
			return nil // a tool that does not exist: the model's mistake, not a denial
		}
		return &Denial{Tool: name, Target: tool.target, Message: short(l.ErrorMsg)}
	case "policy_violation":
		return &Denial{Tool: tool.name, Target: tool.target, Message: short(l.ErrorMsg)}
	}
	return nil
}

func (p *geminiParser) result(l *geminiLine, emit func(Event)) {
	if l.Stats != nil {
		e := Event{Kind: EventUsage, Total: true, Usage: *l.Stats}
		if len(p.models) > 0 {
			e.Models = append([]ModelUsage(nil), p.models...)
			e.Model = mainModel(e.Models)
		}
		emit(e)
	}
	if l.Status == "success" {
		emit(Event{Kind: EventFinal, Text: strings.TrimRight(string(p.answer), "\n"), Turns: p.turns})
		return
	}
	msg := "gemini: the session failed"
	switch {
	case l.ErrorMsg != "":
		msg = geminiAPIError(l.ErrorMsg)
	case p.warned != "":
		msg = p.warned
	}
	emit(Event{Kind: EventError, Text: msg, Limit: geminiLimitText(msg, p.now()), Turns: p.turns})
}

// geminiAPIError makes gemini's "[API Error: {json}]" readable: the API's
// status, code and message, and for a rejected key the fix.
func geminiAPIError(msg string) string {
	inner, ok := strings.CutPrefix(msg, "[API Error: ")
	if !ok {
		return msg
	}
	inner = strings.TrimSuffix(inner, "]")
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if !strings.HasPrefix(inner, "{") || json.Unmarshal([]byte(inner), &e) != nil || e.Error.Code == 0 {
		return msg
	}
	for _, d := range e.Error.Details {
		if d.Reason == "API_KEY_INVALID" {
			return "gemini: the API rejected the key (400 API_KEY_INVALID: " + e.Error.Message +
				"); export a valid GEMINI_API_KEY in the environment ralph runs in"
		}
	}
	return "gemini: API error " + strconv.Itoa(e.Error.Code) + " " + e.Error.Status + ": " + e.Error.Message
}

// geminiRetryIn is the API's "Please retry in 7200.0s." (RetryInfo, in
// the message of a 429 gemini prints on standard error).
var geminiPleaseRetry = regexp.MustCompile(`Please retry in ([\d.]+(?:ms|s))`)

// geminiLimit recognises a limit in what gemini printed besides its retry
// notices; when its text gives no reset but the API's message it printed
// does ("Please retry in 7200.0s."), that is the reset.
func geminiLimit(s string, now time.Time) *Limit {
	l := geminiLimitText(s, now)
	if l == nil || !l.Reset.IsZero() {
		return l
	}
	if m := geminiPleaseRetry.FindAllStringSubmatch(s, -1); m != nil {
		if d, err := time.ParseDuration(m[len(m)-1][1]); err == nil && d > 0 {
			l.Reset = now.Add(d)
		}
	}
	return l
}

// geminiStderr reads gemini's standard error a line at a time: its retry
// notices ("Attempt 1 failed with status 503. Retrying with backoff...
// <the error, over several lines>", "Attempt 2 failed: <message over
// several lines>. Retrying after 10016ms...") become EventRetry and are
// kept out of the limit check; the errors that stop it before its stream
// starts become EventError with the fix.
type geminiStderr struct {
	state   int // geminiNone, geminiPending (a notice without its delay yet), geminiAfter (a notice's dump may follow)
	pending Retry
	lines   int
}

const (
	geminiNone = iota
	geminiPending
	geminiAfter
)

var (
	geminiAttempt   = regexp.MustCompile(`^Attempt (\d+) failed(?: with status (\d+))?`)
	geminiRetryWait = regexp.MustCompile(`Retrying after (\d+)ms`)
	geminiAPIMsg    = regexp.MustCompile(`"message":"((?:[^"\\]|\\.)*)"`)
)

// geminiFatal are standard-error lines that end gemini before its
// stream, and what to say instead.
var geminiFatal = []struct{ prefix, say string }{
	{"When using Gemini API, you must specify the GEMINI_API_KEY environment variable",
		"gemini is not authenticated: export GEMINI_API_KEY in the environment ralph runs in, or log in by running gemini once interactively"},
	{"Gemini CLI is not running in a trusted directory",
		"gemini refuses to run in an untrusted folder: add --skip-trust to [agent] args (ralph init writes it)"},
	{"Invalid auth method selected",
		"gemini has no usable authentication: set GEMINI_API_KEY, or choose a method by running gemini once interactively"},
}

func (s *geminiStderr) line(line string, emit func(Event)) bool {
	switch s.state {
	case geminiPending:
		s.lines++
		s.pending.Message = cut(s.pending.Message+" "+strings.TrimSpace(line), maxShort)
		if m := geminiRetryWait.FindStringSubmatch(line); m != nil || s.lines > 50 {
			if m != nil {
				ms, _ := strconv.Atoi(m[1]) // digits
				s.pending.Delay = time.Duration(ms) * time.Millisecond
			}
			s.emitRetry(emit)
		}
		return true
	case geminiAfter:
		if t := strings.TrimSpace(line); line != t || t == "}" || t == "]" || t == "" {
			return true // the error object's dump
		}
		s.state = geminiNone
	}
	m := geminiAttempt.FindStringSubmatch(line)
	if m == nil || strings.Contains(line, "Max attempts reached") {
		for _, f := range geminiFatal {
			if strings.HasPrefix(line, f.prefix) {
				emit(Event{Kind: EventError, Text: f.say})
			}
		}
		return false
	}
	attempt, _ := strconv.Atoi(m[1]) // digits
	status, _ := strconv.Atoi(m[2])
	r := Retry{Status: status, Attempt: attempt}
	switch _, rest, _ := strings.Cut(line, "failed"); {
	case strings.Contains(rest, "Retrying with backoff..."):
		// "Attempt 1 failed with status 503. Retrying with backoff... _ApiError: {json}"
		if am := geminiAPIMsg.FindStringSubmatch(rest); am != nil {
			r.Message = short(strings.ReplaceAll(am[1], `\"`, `"`))
		}
	default:
		r.Message = short(strings.TrimPrefix(rest, ": "))
	}
	s.pending, s.lines = r, 0
	if wm := geminiRetryWait.FindStringSubmatch(line); wm != nil || strings.Contains(line, "Retrying with backoff") {
		if wm != nil {
			ms, _ := strconv.Atoi(wm[1]) // digits
			s.pending.Delay = time.Duration(ms) * time.Millisecond
		}
		s.emitRetry(emit)
		return true
	}
	s.state = geminiPending
	return true
}

func (s *geminiStderr) emitRetry(emit func(Event)) {
	r := s.pending
	if r.Status == 0 && (strings.Contains(r.Message, "exceeded your current quota") || strings.Contains(r.Message, "Quota exceeded")) {
		r.Status = 429 // the API's quota message is its 429's
	}
	emit(Event{Kind: EventRetry, Retry: &r})
	s.state = geminiAfter
}
