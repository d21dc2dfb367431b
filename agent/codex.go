package agent

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// codexBackend runs Codex headless: `codex exec --json … -`, prompt on
// stdin ("-"). Its stream is JSONL ThreadEvents: thread.started,
// turn.started, item.started/updated/completed, turn.completed (with
// usage), turn.failed and error (see docs/agents.md).
func codexBackend() backend {
	own := &codexHelper{}
	return backend{
		Facts: Facts{Name: "codex", Auto: true, ReportsTokens: true, InitModel: "gpt-5.5", ExampleModel: "gpt-5-codex",
			StateDirs: codexStateDirs, APIHosts: []string{"api.openai.com", "chatgpt.com", "auth.openai.com"}, BaseURLEnv: []string{"OPENAI_BASE_URL"},
			ConfigHosts: codexConfigHosts},
		bin: "codex",
		argv: func(path string, o *Options) []string {
			argv := append([]string{path, "exec", "--json"}, o.Args...)
			return append(argv, "-")
		},
		stdin:       true,
		newParser:   func(now func() time.Time) parser { return &codexParser{now: now} },
		limitText:   codexLimit,
		stderrLine:  own.stderrLine,
		permissions: codexPermissions,
		confined:    codexConfined,
	}
}

// codexBypass turns codex's own sandbox off (and its approvals, which
// codex exec never asks for): `codex exec --help`, "Skip all confirmation
// prompts and execute commands without sandboxing … Intended solely for
// running in environments that are externally sandboxed".
const codexBypass = "--dangerously-bypass-approvals-and-sandbox"

// codexConfined are the arguments ralph adds when its own sandbox confines
// codex. Codex's workspace-write sandbox runs each command in bubblewrap
// through its codex-linux-sandbox helper: under ralph's landlock
// mechanism that fails for every command and patch ("error building
// bubblewrap command: Permission denied": Landlock's file rules forbid
// its mounts), under ralph's bwrap it is a second bubblewrap inside the
// first, and it gives nothing ralph's does not (the workdir to write,
// commands confined). So a loop that asked codex for workspace-write gets
// codexBypass, and ralph's sandbox confines codex and its commands.
// The mode is the args' (--sandbox, -s, -c sandbox_mode=…), else
// sandbox_mode in codex's config.toml. A loop that asked for read-only (or
// named no mode: codex exec's default) keeps it, so codex still refuses
// edits. And codex's plugins are off
// (--disable plugins) unless the args enable them: codex syncs their
// marketplace from github.com and api.github.com on every start, which
// the sandbox's proxy refuses, so that every iteration would record the
// same refusal and the run would end as sandbox_denied.
func codexConfined(args []string, home string, env Env) []string {
	var add []string
	mode := codexSandboxMode(args)
	if mode == "" {
		mode = codexConfigSandboxMode(home, env)
	}
	if mode == "workspace-write" && !slices.Contains(args, codexBypass) {
		add = append(add, codexBypass)
	}
	if !codexNamesFeature(args, "plugins") {
		add = append(add, "--disable", "plugins")
	}
	return add
}

// codexSandboxMode is the sandbox mode args ask codex for: the last
// --sandbox, -s or -c sandbox_mode=… ("" when none does).
func codexSandboxMode(args []string) string {
	mode := ""
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch {
		case a == "--sandbox" || a == "-s":
			mode = next
		case strings.HasPrefix(a, "--sandbox="):
			mode = strings.TrimPrefix(a, "--sandbox=")
		case (a == "-c" || a == "--config") && strings.HasPrefix(next, "sandbox_mode="):
			mode = strings.Trim(strings.TrimPrefix(next, "sandbox_mode="), `"'`)
		}
	}
	return mode
}

// codexNamesFeature reports whether args enable or disable the feature
// (--enable F, --disable F, -c features.F=…).
func codexNamesFeature(args []string, feature string) bool {
	for i := 0; i+1 < len(args); i++ {
		a, next := args[i], args[i+1]
		if ((a == "--enable" || a == "--disable") && next == feature) ||
			((a == "-c" || a == "--config") && strings.HasPrefix(next, "features."+feature+"=")) {
			return true
		}
	}
	return false
}

// codexOwnSandboxFailed is the denial of a command codex's own sandbox
// could not start: bubblewrap failing to set the command up ("bwrap:
// execvp codex-linux-sandbox: No such file or directory" when codex could
// not put its helper on PATH, "bwrap: No permissions to create new
// namespace", "error building bubblewrap command: Permission denied"
// under Landlock's file rules …), which fails every command alike, with the flag that
// turns codex's sandbox off; nil for any other result.
func codexOwnSandboxFailed(it *codexItem) *Denial {
	if it.Type != "command_execution" || !it.HasExitCode || it.ExitCode == 0 {
		return nil
	}
	first, _, _ := strings.Cut(strings.TrimSpace(it.AggregatedOutput), "\n")
	if !strings.HasPrefix(first, "bwrap: ") && !strings.Contains(first, "codex-linux-sandbox") &&
		!strings.HasPrefix(first, "error building bubblewrap command") {
		return nil
	}
	return &Denial{Tool: "command_execution", Target: short(it.Command), Message: "codex's own sandbox could not start the command: " + short(first),
		Fix: codexOwnSandboxFix}
}

// codexOwnSandboxFix is what lets codex's tools run when its own sandbox
// cannot start them.
const codexOwnSandboxFix = "turn codex's own sandbox off with " + codexBypass + " in [agent] args and let ralph's [sandbox] confine it " +
	"(under a [sandbox] ralph passes that flag itself), or make codex's sandbox work (bubblewrap must find " +
	"codex-linux-sandbox, which codex links only under a CODEX_HOME outside the temporary directory)"

// codexPermissions: by default codex's workspace-write sandbox (`codex exec
// --help`: "-s, --sandbox <SANDBOX_MODE> … read-only, workspace-write,
// danger-full-access"): it may edit files in its working directory (and
// the temporary directories) and run commands, the test command among
// them, inside the sandbox without network. exec never asks for approval,
// so nothing else is needed. With full,
// --dangerously-bypass-approvals-and-sandbox.
func codexPermissions(test []string, full bool) Permissions {
	if full {
		return Permissions{
			Args: []string{"--dangerously-bypass-approvals-and-sandbox"},
			Comment: []string{
				"WARNING: --dangerously-bypass-approvals-and-sandbox runs every command codex",
				"chooses with your user's full rights, network included; use it only inside a",
				"sandbox of your own (a container or VM).",
			},
		}
	}
	run := "the tests"
	if len(test) > 0 {
		run = strings.Join(test, " ")
	}
	return Permissions{
		Args: []string{"--sandbox", "workspace-write"},
		Comment: []string{
			"--sandbox workspace-write: codex may edit files in this directory (and /tmp) and",
			"run commands such as `" + run + "` in its sandbox, without network. Without it",
			"codex exec is read-only and every edit is rejected.",
		},
	}
}

// codexLine is what the parser reads of one ThreadEvent.
type codexLine struct {
	Type     string
	ThreadID string     // thread.started
	Item     *codexItem // item.*
	Usage    *Usage     // turn.completed
	Message  string     // error; turn.failed error.message
}

type codexItem struct {
	ID, Type, Text   string // Text: agent_message, reasoning
	Command          string // command_execution
	AggregatedOutput string
	ExitCode         int64
	HasExitCode      bool
	Status           string
	Changes          string // file_change: "kind path, …"
	Server, Tool     string // mcp_tool_call
	Arguments        int    // node
	ErrorMessage     string // mcp_tool_call error.message
	Query            string // web_search
	Message          string // error
}

type codexParser struct {
	now     func() time.Time
	doc     jdoc
	l       codexLine
	it      codexItem
	usage   Usage
	started map[string]bool // tool items announced by item.started
	last    string          // the last agent message: the final answer
	turns   int
}

func (p *codexParser) decode() bool {
	r := jread{jdoc: &p.doc}
	l := &p.l
	*l = codexLine{}
	root := r.object(0)
	l.Type = r.str(r.field(root, "type"))
	switch l.Type {
	case "thread.started":
		l.ThreadID = r.str(r.field(root, "thread_id"))
	case "item.started", "item.updated", "item.completed":
		if it := r.object(r.field(root, "item")); it >= 0 {
			p.it = decodeCodexItem(&r, it)
			l.Item = &p.it
		}
	case "turn.completed":
		if u := r.object(r.field(root, "usage")); u >= 0 {
			p.usage = codexUsage(&r, u)
			l.Usage = &p.usage
		}
	case "turn.failed":
		l.Message = r.str(r.field(r.object(r.field(root, "error")), "message"))
	case "error":
		l.Message = r.str(r.field(root, "message"))
	}
	return !r.bad && root >= 0
}

// codexUsage reads turn.completed's usage: the turn's totals over all its
// model requests. As in the Responses API it comes from, input_tokens
// counts all input, the cached reads and the cache writes among it, and
// output_tokens counts the reasoning tokens among it; Usage counts each
// token once.
func codexUsage(r *jread, u int) Usage {
	in, cached := r.int(r.field(u, "input_tokens")), r.int(r.field(u, "cached_input_tokens"))
	written := r.int(r.field(u, "cache_write_input_tokens"))
	out, reasoning := r.int(r.field(u, "output_tokens")), r.int(r.field(u, "reasoning_output_tokens"))
	reasoning = min(max(reasoning, 0), max(out, 0))
	return Usage{Input: max(in-cached-written, 0), Output: max(out-reasoning, 0), CacheRead: max(cached, 0),
		CacheWrite: max(written, 0), Reasoning: reasoning}
}

// decodeCodexItem reads the fields of item it that its type has.
func decodeCodexItem(r *jread, it int) codexItem {
	c := codexItem{ID: r.str(r.field(it, "id")), Type: r.str(r.field(it, "type")), Arguments: -1}
	switch c.Type {
	case "agent_message":
		c.Text = r.str(r.field(it, "text"))
	case "command_execution":
		c.Command = r.str(r.field(it, "command"))
		c.AggregatedOutput = r.str(r.field(it, "aggregated_output"))
		c.Status = r.str(r.field(it, "status"))
		if e := r.field(it, "exit_code"); r.kind(e) == jNumber {
			c.ExitCode, c.HasExitCode = r.int(e), true
		} else {
			r.int(e) // null or absent: not exited; another type: bad
		}
	case "file_change":
		c.Status = r.str(r.field(it, "status"))
		var changes []string
		r.elems(r.array(r.field(it, "changes")), func(ch int) {
			ch = r.object(ch)
			changes = append(changes, r.str(r.field(ch, "kind"))+" "+r.str(r.field(ch, "path")))
		})
		c.Changes = strings.Join(changes, ", ")
	case "mcp_tool_call":
		c.Server = r.str(r.field(it, "server"))
		c.Tool = r.str(r.field(it, "tool"))
		c.Arguments = r.field(it, "arguments")
		c.Status = r.str(r.field(it, "status"))
		c.ErrorMessage = r.str(r.field(r.object(r.field(it, "error")), "message"))
	case "web_search":
		c.Query = r.str(r.field(it, "query"))
		c.Status = r.str(r.field(it, "status"))
	case "collab_tool_call":
		c.Status = r.str(r.field(it, "status"))
	case "error":
		c.Message = r.str(r.field(it, "message"))
	}
	return c
}

func (p *codexParser) line(b []byte, emit func(Event)) {
	if !p.doc.parse(b) || !p.decode() || p.l.Type == "" {
		emit(rawEvent(b))
		return
	}
	l := &p.l
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
		if l.Usage != nil {
			emit(Event{Kind: EventUsage, Total: true, Usage: *l.Usage})
		}
		emit(Event{Kind: EventFinal, Text: p.last, Turns: p.turns})
	case "turn.failed":
		msg := l.Message
		if msg == "" {
			msg = "codex: turn failed"
		}
		emit(Event{Kind: EventError, Text: codexErrorText(msg), Limit: codexLimit(msg, p.now()), Turns: p.turns})
	case "error":
		// codex prints each retry of a failed request as an error event
		// ("Reconnecting... 1/5 (…)"); the call's end is the turn.failed
		// or the error that follows.
		if rt := codexRetry(l.Message); rt != nil {
			emit(Event{Kind: EventRetry, Retry: rt})
			return
		}
		emit(Event{Kind: EventError, Text: codexErrorText(l.Message), Limit: codexLimit(l.Message, p.now())})
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
	tool, input := p.codexTool(it)
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
		emit(Event{Kind: EventToolResult, ToolID: it.ID, Text: short(printable(text)), IsError: failed})
		if d := codexOwnSandboxFailed(it); d != nil {
			emit(Event{Kind: EventDenied, Denial: d})
		}
		if it.Status == "declined" {
			target := it.Command
			if it.Type == "file_change" {
				target = it.Changes
			}
			emit(Event{Kind: EventDenied, Denial: &Denial{Tool: tool, Target: short(target), Message: "codex declined " + tool}})
		}
	}
}

// codexTool names a tool item and summarises its input.
func (p *codexParser) codexTool(it *codexItem) (tool, input string) {
	switch it.Type {
	case "command_execution":
		return "command_execution", short(it.Command)
	case "file_change":
		return "file_change", short(it.Changes)
	case "mcp_tool_call":
		in := ""
		if it.Arguments >= 0 {
			in = p.doc.compact(it.Arguments, maxShort)
		}
		return it.Server + "." + it.Tool, in
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
		if it.HasExitCode && it.ExitCode != 0 {
			failed = true
		}
		return it.AggregatedOutput, failed
	case "mcp_tool_call":
		if it.ErrorMessage != "" {
			return it.ErrorMessage, true
		}
	}
	return it.Status, failed
}

var (
	// "Reconnecting... 2/5 (stream disconnected before completion: …)",
	// "Reconnecting... waiting for network (…)".
	codexReconnect = regexp.MustCompile(`^Reconnecting(?:\.\.\.|…)\s*(?:(\d+)/(\d+))?`)
	// "last status: 429 Too Many Requests", "unexpected status 401 Unauthorized".
	codexStatus = regexp.MustCompile(`\bstatus:? (\d{3})\b`)
	// codex's log line for a tool its sandbox or approval policy refused:
	// "… ERROR codex_core::tools::router: error=patch rejected: writing is
	// blocked by read-only sandbox; rejected by user approval settings".
	codexRejected = regexp.MustCompile(`error=((patch|exec command) rejected\b.*)$`)
)

// codexRetry reads codex's notice that it retries a request; nil when msg
// is none.
func codexRetry(msg string) *Retry {
	m := codexReconnect.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	rt := &Retry{Message: short(msg)}
	rt.Attempt, _ = strconv.Atoi(m[1]) // digits or empty (0: not said)
	rt.Max, _ = strconv.Atoi(m[2])
	if s := codexStatus.FindStringSubmatch(msg); s != nil {
		rt.Status, _ = strconv.Atoi(s[1]) // three digits
	}
	return rt
}

// printable replaces the control characters a command printed (a NUL, an
// escape sequence's ESC) with U+FFFD, so that a summary of binary output
// reads as text and cannot drive the terminal that shows it; line breaks
// and tabs stay for oneLine.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\r' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return utf8.RuneError
		}
		return r
	}, s)
}

// codexStderrLine recognises on codex's standard error its retry notices
// and the log line of a tool its sandbox refused (codex prints no JSON
// line for that one and exits 0).
func codexStderrLine(line string, emit func(Event)) bool {
	if msg, ok := strings.CutPrefix(line, "Error: "); ok {
		// codex's fatal error, before any turn (e.g. "turn/start failed:
		// Input exceeds the maximum length of 1048576 characters").
		emit(Event{Kind: EventError, Text: codexFatalText(msg)})
		return false
	}
	if rt := codexRetry(line); rt != nil {
		emit(Event{Kind: EventRetry, Retry: rt})
		return true
	}
	if m := codexRejected.FindStringSubmatch(line); m != nil {
		tool := "apply_patch"
		if m[2] == "exec command" {
			tool = "exec_command"
		}
		emit(Event{Kind: EventDenied, Denial: &Denial{Tool: tool, Message: short(m[1])}})
		return true
	}
	return false
}

// codexNoHelper starts codex's warning that it could not link its
// codex-linux-sandbox helper ("WARNING: proceeding, even though we could
// not create PATH aliases: Refusing to create helper binaries under
// temporary dir …", when CODEX_HOME lies in the temporary directory).
// Codex's own bubblewrap sandbox then cannot start its commands and
// patches; its JSON does not always show the failed command (run by
// ralph, mostly not), but a patch it could not write is logged on
// standard error as "Failed to write file PATH".
const codexNoHelper = "WARNING: proceeding, even though we could not create PATH aliases"

// codexHelper reads one call's standard error (its lines come in order,
// from one goroutine): the warning that the helper is missing, then a file
// a patch could not write, is a denial naming the flag that turns codex's
// own sandbox off. A patch that fails to write with the helper linked is
// codex's ordinary failure.
type codexHelper struct {
	missing string // the warning, once seen
	denied  bool
}

func (h *codexHelper) stderrLine(line string, emit func(Event)) bool {
	if strings.HasPrefix(line, codexNoHelper) {
		h.missing = line
		return true
	}
	if path, ok := strings.CutPrefix(line, "Failed to write file "); ok && h.missing != "" && !h.denied {
		h.denied = true
		emit(Event{Kind: EventDenied, Denial: &Denial{Tool: "apply_patch", Target: short(path),
			Message: "codex's own sandbox could not write it: " + short(h.missing), Fix: codexOwnSandboxFix}})
		return true
	}
	return codexStderrLine(line, emit)
}

// codexFatalText is codex's fatal error as one sentence with the fix.
func codexFatalText(msg string) string {
	if strings.Contains(msg, "Input exceeds the maximum length") || strings.Contains(msg, "input_too_large") {
		return "codex refused the prompt as too long (" + short(msg) +
			"); shorten the prompt file or the test output ralph feeds back"
	}
	return "codex failed: " + short(msg)
}

// codexErrorText makes codex's errors that need the user one sentence
// with the fix; others pass unchanged.
func codexErrorText(msg string) string {
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "401 unauthorized") || strings.Contains(lower, "invalid_api_key") ||
		strings.Contains(lower, "incorrect api key"):
		return "codex is not authenticated: the API refused its key (" + short(msg) +
			"); run `codex login` or set the API key its model provider reads (OPENAI_API_KEY, or the provider's env_key)"
	case strings.HasPrefix(msg, "Missing environment variable:"):
		return "codex is not authenticated: " + strings.TrimSuffix(short(msg), ".") +
			"; set it in [agent] env or in the environment ralph runs in"
	}
	return msg
}

// codexLimit recognises codex's limits: its usage-limit message, whose
// reset it gives only as a time of day to the minute, read as the end of
// that minute (the real reset lies within it); "Selected model is at
// capacity" and 503/529 overloads, which are transient; then the texts
// codexLimitText knows.
func codexLimit(s string, now time.Time) *Limit {
	if s == "" || codexRetry(s) != nil {
		return nil
	}
	lower := strings.ToLower(s)
	switch {
	case strings.Contains(lower, "hit your usage limit"):
		return &Limit{Kind: LimitUsage, Reset: codexClockReset(s, now), Message: short(s)}
	case strings.Contains(lower, "at capacity") || strings.Contains(lower, "server_is_overloaded") ||
		strings.Contains(lower, "overloaded") || strings.Contains(lower, "status 503") || strings.Contains(lower, "status 529"):
		return &Limit{Kind: LimitOverloaded, Message: short(s)}
	}
	return codexLimitText(s, now)
}

// codexClockReset reads "try again at 11:59 PM" (today, local time) or
// "try again at Aug 8th, 2026 12:30 PM": the end of the minute named. A
// time of day already past by less than an hour means the limit has
// lifted (now); one further back is tomorrow's.
func codexClockReset(s string, now time.Time) time.Time {
	if codexAgainDate.MatchString(s) {
		if t := codexReset(s, now); !t.IsZero() {
			return t.Add(time.Minute)
		}
		return time.Time{}
	}
	m := codexAgainClock.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}
	}
	c, err := time.ParseInLocation("3:04 PM", m[1]+":"+m[2]+" "+strings.ToUpper(m[3]), now.Location())
	if err != nil {
		return time.Time{}
	}
	n := now
	end := time.Date(n.Year(), n.Month(), n.Day(), c.Hour(), c.Minute(), 0, 0, n.Location()).Add(time.Minute)
	if end.Sub(n) > 23*time.Hour {
		end = end.AddDate(0, 0, -1) // "11:59 PM" read at 00:00:30: the minute that just ended
	}
	if !end.After(n) {
		if n.Sub(end) < time.Hour {
			return n // lifted a moment ago: retry now
		}
		end = end.AddDate(0, 0, 1)
	}
	return end
}
