package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// opencodeBackend runs OpenCode headless: `opencode run --format json`,
// prompt on stdin (piped stdin is the message). Each line is an event
// {type, timestamp, sessionID, …}: step_start, text, reasoning, tool_use,
// step_finish (with cost and tokens), error (see docs/agents.md).
// `--print-logs --log-level ERROR` puts its error log on standard error:
// the only place it tells of a failed request it is about to retry.
func opencodeBackend() backend {
	return backend{
		Facts: Facts{Name: "opencode", Auto: true, ReportsCost: true, ReportsTokens: true, ExampleModel: "claude-sonnet-4-5",
			StateDirs: opencodeStateDirs, APIHosts: opencodeHosts, BaseURLEnv: []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"},
			ConfigHosts: opencodeConfigHosts},
		bin: "opencode",
		argv: func(path string, o *Options) []string {
			return append([]string{path, "run", "--format", "json", "--print-logs", "--log-level", "ERROR"}, o.Args...)
		},
		stderrLine:  opencodeStderrLine,
		stdin:       true,
		newParser:   func(now func() time.Time) parser { return &opencodeParser{now: now} },
		limitText:   opencodeLimitText,
		permissions: opencodePermissions,
	}
}

// opencodePermissions: OpenCode's own default allows every tool ("*":
// "allow"), and `opencode run` rejects whatever would ask. Its permission
// rules come from the config's "permission" object, which the
// OPENCODE_PERMISSION environment variable (JSON) is merged into; the last
// matching rule wins. By default ralph asks (so, headless, rejects)
// everything, then allows reading (as OpenCode does: .env files still
// ask), searching, the todo list, editing files (paths outside the
// workspace still ask, as external_directory) and the test command with
// any arguments. With full, `--auto` ("auto-approve permissions that are
// not explicitly denied") approves every ask.
func opencodePermissions(test []string, full bool) Permissions {
	if full {
		return Permissions{
			Args: []string{"--auto"},
			Comment: []string{
				"WARNING: --auto approves every permission OpenCode would ask for:",
				"any shell command, any file, outside the workspace too.",
			},
		}
	}
	bash := []string{`"*":"ask"`}
	if len(test) > 0 {
		cmd, _ := json.Marshal(strings.Join(test, " ") + " *")
		bash = append(bash, string(cmd)+`:"allow"`)
	}
	// Written by hand: the order of the keys is the order of the rules.
	perm := `{"*":"ask","read":{"*":"allow","*.env":"ask","*.env.*":"ask","*.env.example":"allow"},` +
		`"glob":"allow","grep":"allow","list":"allow","todowrite":"allow","edit":"allow",` +
		`"bash":{` + strings.Join(bash, ",") + `}}`
	return Permissions{
		Env: []string{"OPENCODE_PERMISSION=" + perm},
		Comment: []string{
			"OPENCODE_PERMISSION: OpenCode may read, search and edit files in the workspace and run",
			"the test command; anything else it would ask for is rejected (opencode run cannot ask).",
		},
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
	Reason           string // step-finish: why the step ended (tool-calls, stop, length, …)
	Cost             *float64
	Tokens           *Usage // step-finish
	// error
	ErrName, ErrMessage string
	StatusCode          int64
	RetryAfterMS        string // the response's retry-after-ms header
	RetryAfter          string // the response's retry-after header
	Ref                 string // an UnknownError's reference in OpenCode's log
}

type opencodeParser struct {
	now      func() time.Time
	doc      jdoc
	l        opencodeLine
	cost     float64
	tokens   Usage
	session  lastSession
	stepText []string // the texts of the step under way
	last     string   // the texts of the last step that said something
	steps    int
	final    bool
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
		l.Reason = r.str(r.field(part, "reason"))
		// OpenCode reports 0 for a model it has no price for: that is
		// no cost reported, not a free call.
		if c := r.field(part, "cost"); r.kind(c) == jNumber {
			if p.cost = r.float(c); p.cost > 0 {
				l.Cost = &p.cost
			}
		}
		if t := r.object(r.field(part, "tokens")); t >= 0 {
			cache := r.object(r.field(t, "cache"))
			// OpenCode's output excludes reasoning, and its input
			// excludes the cached tokens: nothing is counted twice.
			p.tokens = Usage{Input: r.int(r.field(t, "input")), Output: r.int(r.field(t, "output")),
				Reasoning: r.int(r.field(t, "reasoning")),
				CacheRead: r.int(r.field(cache, "read")), CacheWrite: r.int(r.field(cache, "write"))}
			l.Tokens = &p.tokens
		}
	case "error":
		e := r.object(r.field(root, "error"))
		l.ErrName = r.str(r.field(e, "name"))
		data := r.object(r.field(e, "data"))
		l.ErrMessage = r.str(r.field(data, "message"))
		l.StatusCode = r.int(r.field(data, "statusCode"))
		l.Ref, _ = p.doc.str(p.doc.field(data, "ref"))
		h := r.object(r.field(data, "responseHeaders"))
		l.RetryAfterMS, _ = p.doc.str(p.doc.field(h, "retry-after-ms"))
		l.RetryAfter, _ = p.doc.str(p.doc.field(h, "retry-after"))
	}
	return !r.bad && root >= 0
}

// OpenCode 1.18.33's `run --format json` prints step_start, text (a whole
// text part, once it ended), reasoning (only with --thinking), tool_use
// (once the tool completed or failed), step_finish and error; it prints
// no event at the end: the stream ends after the last step_finish. So the
// final answer is the text of the last step that finished for a reason
// other than calling tools.
func (p *opencodeParser) line(b []byte, emit func(Event)) {
	if !p.doc.parse(b) || !p.decode() || p.l.Type == "" {
		emit(rawEvent(b))
		return
	}
	l := &p.l
	p.session.note(l.SessionID, emit)
	switch l.Type {
	case "step_start":
		p.stepText = p.stepText[:0]
	case "reasoning":
	case "text":
		p.stepText = append(p.stepText, l.Text)
		emit(Event{Kind: EventText, Text: l.Text})
	case "tool_use":
		p.tool(l, emit)
	case "step_finish":
		p.steps++
		if len(p.stepText) > 0 {
			p.last = strings.Join(p.stepText, "\n")
		}
		if l.Tokens != nil {
			emit(Event{Kind: EventUsage, Usage: *l.Tokens})
		}
		if l.Cost != nil {
			emit(Event{Kind: EventCost, CostUSD: *l.Cost})
		}
		if l.Reason != "tool-calls" {
			p.final = true
			emit(Event{Kind: EventFinal, Text: p.last, Turns: p.steps})
		}
	case "error":
		p.error(l, emit)
	case "done": // not printed by 1.18.33; kept for streams that end with it
		if !p.final {
			emit(Event{Kind: EventFinal, Text: p.last, Turns: p.steps})
		}
	default:
		emit(rawEvent(b))
	}
}

// error reads a session error: the provider's API error (message, status,
// headers) or OpenCode's own (ProviderAuthError, UnknownError, …).
func (p *opencodeParser) error(l *opencodeLine, emit func(Event)) {
	msg := l.ErrMessage
	if msg == "" {
		msg = l.ErrName
	}
	if msg == "" {
		msg = "opencode: the session failed"
	}
	now := p.now()
	lim := opencodeLimitText(msg, now)
	if lim == nil {
		lim = limitForStatus(int(l.StatusCode), msg)
	}
	if lim != nil {
		// An exact wait the provider gave beats a time read from text.
		if d, ok := opencodeRetryAfter(l.RetryAfterMS, l.RetryAfter, now); ok {
			lim.Reset = now.Add(d)
		}
	}
	if l.ErrName == "UnknownError" && l.Ref != "" {
		msg = fmt.Sprintf("opencode: %s (ref %s); the cause is in its error log on standard error", strings.TrimSuffix(msg, "."), l.Ref)
	}
	if lim == nil && (l.StatusCode == 401 || l.StatusCode == 403 || l.ErrName == "ProviderAuthError") {
		msg = fmt.Sprintf("opencode: the model provider refused its credentials (%s); run `opencode auth login` "+
			"or set the provider's apiKey in opencode.json", msg)
	}
	emit(Event{Kind: EventError, Text: msg, Limit: lim, Turns: p.steps})
}

// opencodeRetryAfter reads the retry-after-ms (milliseconds) and
// retry-after (seconds, or an HTTP date) headers of an API error, as
// OpenCode itself does before it retries.
func opencodeRetryAfter(ms, after string, now time.Time) (time.Duration, bool) {
	if f, err := strconv.ParseFloat(strings.TrimSpace(ms), 64); err == nil && f >= 0 && f < 1e12 {
		return time.Duration(f * float64(time.Millisecond)), true
	}
	after = strings.TrimSpace(after)
	if f, err := strconv.ParseFloat(after, 64); err == nil && f >= 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second)), true
	}
	if t, err := http.ParseTime(after); err == nil && t.After(now) {
		return t.Sub(now), true
	}
	return 0, false
}

// opencodeDenied are the words of OpenCode's tool errors when a
// permission refused the call: a rule said deny, or a rule said ask and
// `opencode run` rejected it (it cannot ask).
var opencodeDenied = []string{
	"The user rejected permission to use this specific tool call",
	"The user has specified a rule which prevents you from using this specific tool call",
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
	if !failed {
		return
	}
	for _, d := range opencodeDenied {
		if strings.HasPrefix(text, d) {
			emit(Event{Kind: EventDenied, Denial: &Denial{Tool: l.Tool, Target: p.target(l.Input), Message: short(text)}})
			return
		}
	}
}

// target is what a tool call would have touched: the file, command,
// pattern or URL of its input; "" when it has none of them.
func (p *opencodeParser) target(input int) string {
	r := jread{jdoc: &p.doc}
	in := r.object(input)
	for _, k := range []string{"filePath", "command", "path", "pattern", "url"} {
		if s := r.str(r.field(in, k)); s != "" {
			return short(s)
		}
	}
	return ""
}

// opencodeStderrLine reads OpenCode's error log (--print-logs): a
// `message="stream error"` line of the session's model (small=false; the
// title's requests are small=true) is a request that failed; OpenCode
// retries it when it is transient (429, 5xx, overloaded, connection
// errors), else the session's error event on standard output follows, and
// that is the call's error. Its notice that `opencode run` rejected a
// permission ("! permission requested: edit (calc.go); auto-rejecting")
// is a notice too: the tool's error on standard output carries the
// denial.
func opencodeStderrLine(line string, emit func(Event)) bool {
	s := opencodeStripANSI(line)
	if strings.Contains(s, "permission requested: ") && strings.HasSuffix(strings.TrimSpace(s), "auto-rejecting") {
		return true
	}
	if !strings.Contains(s, "level=ERROR") {
		return false
	}
	if opencodeLogValue(s, "message") == "failed" && opencodeLogValue(s, "ref") != "" {
		// The cause of an "Unexpected server error" on standard output.
		if cause := opencodeLogValue(s, "error"); cause != "" {
			emit(Event{Kind: EventError, Text: opencodeFailure(cause)})
		}
		return false
	}
	if opencodeLogValue(s, "message") != "stream error" {
		return false
	}
	if opencodeLogValue(s, "small") == "true" {
		return true
	}
	msg := strings.TrimPrefix(opencodeLogValue(s, "error.error"), "AI_APICallError: ")
	if !opencodeTransient.MatchString(msg) {
		// Not one OpenCode retries (a 400, a refused key): the session's
		// error event on standard output follows; this line is its log.
		return false
	}
	emit(Event{Kind: EventRetry, Retry: &Retry{Message: short(msg)}})
	return true
}

// opencodeFailure is the sentence for an error OpenCode logged as the
// cause of its failure ("ProviderModelNotFoundError: Model not found:
// mock/x."), with the fix when it is a model or provider that does not
// exist.
func opencodeFailure(cause string) string {
	name, msg, ok := strings.Cut(cause, ": ")
	if !ok {
		name, msg = "", cause
	}
	msg = strings.TrimSuffix(short(msg), ".")
	switch name {
	case "ProviderModelNotFoundError":
		return "opencode: " + msg + "; set --model provider/model in [agent] args (or \"model\" in opencode.json) to one `opencode models` lists"
	case "ProviderInitError":
		return "opencode: " + msg + "; check the provider's settings in opencode.json"
	}
	return "opencode failed: " + short(cause)
}

// opencodeTransient matches the errors OpenCode retries, read from their
// message as its log gives no status: those its retry policy names
// (statuses 408, 409, 429, 5xx; rate limits, overload, unavailability,
// network failures, timeouts, "try again") and the providers' usage
// limits, which come as 429s.
var opencodeTransient = regexp.MustCompile(`(?i)\b(?:408|409|429|5\d\d)\b|rate[-_ ]?limit|too[-_ ]many[-_ ]requests|` +
	`rate increased too quickly|overloaded|unavailable|internal[-_ ]?(?:server[-_ ])?error|server[-_ ]error|` +
	`provider[-_ ]returned[-_ ]error|terminated|fetch failed|failed to fetch|network[-_ ]error|connect|` +
	`socket hang up|reset before headers|getaddrinfo|enotfound|eai_again|econnre|etimedout|timeout|timed out|` +
	`try (?:your request )?again|retry your request|exhausted|at capacity|usage limit|quota|limit reached`)

// opencodeLogValue returns the value of key in a logfmt line (unquoted); ""
// when it is absent.
func opencodeLogValue(s, key string) string {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], key+"=")
		if j < 0 {
			return ""
		}
		j += i
		v := j + len(key) + 1
		if j > 0 && s[j-1] != ' ' {
			i = v
			continue
		}
		if v < len(s) && s[v] == '"' {
			end := v + 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return s[v+1:]
			}
			if u, err := strconv.Unquote(s[v : end+1]); err == nil {
				return u
			}
			return s[v+1 : end]
		}
		end := strings.IndexByte(s[v:], ' ')
		if end < 0 {
			return s[v:]
		}
		return s[v : v+end]
	}
	return ""
}

// opencodeStripANSI removes terminal escape sequences (ESC [ … letter).
func opencodeStripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && !(s[j] >= '@' && s[j] <= '~') {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
