package builtin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// AgentOptions configure agent.run ([agent] in the config). The zero value
// registers agent.run with no CLI of its own: every call must name :cli,
// and Allow (empty) refuses them all.
type AgentOptions struct {
	CLI         string   // the CLI a call without :cli runs (a name agent.Resolve accepts)
	Command     []string // argv for CLI "command"
	Args        []string // extra arguments; a call's :args replace them
	Timeout     time.Duration
	IdleTimeout time.Duration
	Price       *agent.Price
	Env         []string                     // "NAME=value" set for the agent on top of the inherited environment ([agent.env])
	Allow       []string                     // CLIs a call may run ([governance].agent_allow)
	LookPath    func(string) (string, error) // nil: exec.LookPath
}

// AgentToolUse is the ledger type name of the child action each tool use
// becomes.
const AgentToolUse = "AgentToolUse"

// AgentNotAllowedError is an agent.run call naming a CLI outside
// [governance].agent_allow.
type AgentNotAllowedError struct {
	CLI   string
	Allow []string
}

func (e *AgentNotAllowedError) Error() string {
	return fmt.Sprintf("agent.run: agent CLI %q is not in [governance].agent_allow %v; add it there to permit it", e.CLI, e.Allow)
}

// RTFSType names the error in RTFS catch maps.
func (e *AgentNotAllowedError) RTFSType() string { return "governance/denied" }

type agentRunner struct {
	o       AgentOptions
	workdir string
	env     []string
}

func agentRow() row {
	return row{
		spec: &capability.Spec{
			ID: "agent.run", Version: "1.0.0",
			Description: "Run a coding agent CLI on a prompt in the workdir; its tool uses, tokens and cost are recorded.",
			Input: rtfs.MustParseType(`[:map [:prompt :string] [:cli {:optional true} :string]
				[:args {:optional true} [:vector :string]] [:timeout-ms {:optional true} :int]
				[:idle-timeout-ms {:optional true} :int]]`),
			Output: rtfs.MustParseType(`[:map [:text :string] [:exit :int] [:cost-usd :float]
				[:tokens [:map [:input :int] [:output :int] [:cache-read :int] [:cache-write :int] [:reasoning :int]]]
				[:session-id :string] [:turns :int] [:tool-uses :int] [:duration-ms :int]
				[:stopped {:optional true} :string]]`),
			Effects:  []capability.Effect{{Kind: "process"}, {Kind: "fs", Params: rtfs.NewMap(rtfs.Keyword("write"), rtfs.True)}, {Kind: "network"}},
			Risk:     capability.RiskHigh,
			Examples: []string{`(call :agent.run {:prompt "Make the failing test pass."})`},
			AgentCLI: func(in rtfs.Value) string { return in.AsMap().GetKey("cli").Str() },
			Printout: true,
			Reports: []string{"cli", "exit", "cost_usd", "cost_source", "prompt_tokens", "completion_tokens", "reasoning_tokens",
				"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "session_id", "turns", "tool_uses",
				"stopped", "model", "retries", "retry_log", "output_file", "output_bytes", "output_sha256", "output_error",
				"stderr_file", "stderr_bytes", "stderr_sha256", "stderr_error", "text_cut_bytes", "containment",
				"limit_reset", "limit_reset_exact", "denied"},
		},
		handler: func(h *host) capability.Handler {
			return (&agentRunner{o: h.Agent, workdir: h.workdir, env: h.agentEnv}).run
		},
	}
}

// options turns the shaped input into the agent call's options.
func (a *agentRunner) options(m *rtfs.Map) (agent.Options, error) {
	o := agent.Options{CLI: a.o.CLI, Command: a.o.Command, Args: a.o.Args, Prompt: m.GetKey("prompt").Str(),
		Dir: a.workdir, Env: append(slices.Clone(a.env), a.o.Env...), Timeout: a.o.Timeout, IdleTimeout: a.o.IdleTimeout,
		Price: a.o.Price, LookPath: a.o.LookPath}
	if c := m.GetKey("cli"); !c.IsNil() {
		o.CLI = c.Str()
	}
	if o.CLI == "" {
		return o, errors.New("agent.run: no agent CLI: pass :cli or add an [agent] section with cli = \"claude\"")
	}
	if !slices.Contains(a.o.Allow, o.CLI) {
		return o, &AgentNotAllowedError{CLI: o.CLI, Allow: a.o.Allow}
	}
	if args := m.GetKey("args"); !args.IsNil() {
		o.Args = nil
		for _, x := range args.Items() {
			o.Args = append(o.Args, x.Str())
		}
	}
	for key, d := range map[string]*time.Duration{"timeout-ms": &o.Timeout, "idle-timeout-ms": &o.IdleTimeout} {
		if t := m.GetKey(key); !t.IsNil() {
			if t.AsInt() <= 0 {
				return o, fmt.Errorf("agent.run :%s must be positive", key)
			}
			*d = time.Duration(t.AsInt()) * time.Millisecond
		}
	}
	return o, nil
}

func (a *agentRunner) run(ctx context.Context, in rtfs.Value) (capability.Result, error) {
	o, err := a.options(in.AsMap())
	if err != nil {
		return capability.Result{}, err
	}
	rep := capability.ReporterFrom(ctx)
	tools := &toolLog{rep: rep, ctx: ctx, cli: o.CLI, workdir: o.Dir, refusals: sandbox.RefusalsFrom(ctx), pending: map[string]pendingTool{}}
	o.OnEvent = func(e agent.Event) {
		rep.Stream(&e)
		tools.event(e)
	}
	of, keep := capability.OutputFileFrom(ctx)
	if keep {
		o.OutputFile, o.Redact = of.Path, of.Redact
	}
	res, runErr := agent.Run(ctx, o)
	recordable(&res, of)
	tools.flush(res)
	if runErr != nil {
		return capability.Result{Metadata: map[string]string{"cli": o.CLI}}, fmt.Errorf("agent.run: %w", runErr)
	}
	if tools.err != nil {
		return agentResult(res), fmt.Errorf("agent.run: record a tool use: %w", tools.err)
	}
	if res.Stopped == agent.StoppedCancelled && context.Cause(ctx) != nil {
		// Say who cancelled it (a skip, an abort, a signal), as the context does.
		return agentResult(res), fmt.Errorf("agent.run: %s was cancelled (%v) and its process group was killed", res.CLI, context.Cause(ctx))
	}
	if res.Stopped == agent.StoppedUsageLimit && res.Limit != nil {
		rep.Limited(capability.Limit{Kind: res.Limit.Kind, Reset: res.Limit.Reset, Message: res.Limit.Message})
	}
	if len(res.Denials) > 0 {
		d := res.Denials[0]
		rep.Denied(capability.Denial{Tool: d.Tool, Target: d.Target, Fix: fixOf(d, res.CLI, o)})
		out := agentResult(res)
		out.Metadata["denied"] = deniedList(res.Denials)
		return out, deniedError(res, o)
	}
	return agentResult(res), agentFailure(res, o)
}

// deniedList names the refused tools, "Edit calc.go; Bash go test ./...".
func deniedList(ds []agent.Denial) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, strings.TrimSpace(d.Tool+" "+d.Target))
	}
	return strings.Join(slices.Compact(parts), "; ")
}

// deniedError is the failure of a call whose CLI was refused a tool: which
// one, on what, in the CLI's words, and the fix.
func deniedError(r agent.Result, o agent.Options) error {
	d := r.Denials[0]
	what := strings.TrimSpace(d.Tool + " " + d.Target)
	if what == "" {
		what = "a tool"
	}
	msg := fmt.Sprintf("agent.run: permission denied: %s was refused %s", r.CLI, what)
	if n := len(r.Denials); n > 1 {
		msg += fmt.Sprintf(" (and %d more: %s)", n-1, deniedList(r.Denials[1:]))
	}
	if w := oneLine(d.Message); w != "" {
		msg += " (" + w + ")"
	}
	return errors.New(msg + "; " + fixOf(d, r.CLI, o))
}

// fixOf is what lets the tool d was refused run: the CLI's own fix when
// its words made one certain, else its permissions' (denialFix).
func fixOf(d agent.Denial, cli string, o agent.Options) string {
	if d.Fix != "" {
		return d.Fix
	}
	return denialFix(cli, o.Args, o.Env)
}

// denialFix says what lets cli edit in its workspace: the flags or
// environment its backend knows, which `ralph init --agent` writes, less
// those the call already had (args, env); a flag the call gave another
// value (--approval-mode plan, --permission-mode manual) is to be
// replaced. When it had them all, the tool it was refused is one they do
// not allow, and the fix is to allow it where those permissions live.
func denialFix(cli string, args, env []string) string {
	p := agent.PermissionsFor(cli, nil, false)
	fix := argsFix(p.Args, args)
	var names []string
	for _, kv := range p.Env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		fix = append(fix, "set "+strings.Join(names, ", ")+" in [agent.env]")
	}
	const asked = "the loop's permissions are set, so the agent asked for something they do not allow (a command other than the tests, a path outside the workspace): "
	switch {
	case len(fix) > 0:
		return strings.Join(fix, " and ") + " (`ralph init --agent " + cli + "` writes them)"
	case len(p.Env) > 0:
		var set []string
		for _, kv := range p.Env {
			name, _, _ := strings.Cut(kv, "=")
			set = append(set, name)
		}
		return asked + "allow it in [agent.env] " + strings.Join(set, ", ") + " if it should run (docs/agents.md, Permissions)"
	case len(p.Args) > 0:
		return asked + "allow it in [agent] args if it should run (docs/agents.md, Permissions)"
	}
	return "give the agent CLI permission to edit files in its workspace (docs/agents.md, Permissions)"
}

// argsFix says how have gets want's flags (a flag with the value after
// it): "replace --approval-mode plan with --approval-mode auto_edit in
// [agent] args" for a flag have gives another value (the last one counts,
// as the CLIs read them), "add … to [agent] args" for those it lacks.
func argsFix(want, have []string) []string {
	var add, fix []string
	for _, flag := range flagsOf(want) {
		if hasFlag(have, flag) {
			continue
		}
		if len(flag) == 2 {
			if old := lastValue(have, flag[0]); old != "" {
				fix = append(fix, "replace "+flag[0]+" "+old+" with "+strings.Join(flag, " ")+" in [agent] args")
				continue
			}
		}
		add = append(add, flag...)
	}
	if len(add) > 0 {
		fix = append(fix, "add "+strings.Join(add, " ")+" to [agent] args")
	}
	return fix
}

// flagsOf splits args into flags, each with the value after it.
func flagsOf(args []string) [][]string {
	var flags [][]string
	for i := 0; i < len(args); i++ {
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			flags = append(flags, args[i:i+2])
			i++
			continue
		}
		flags = append(flags, args[i:i+1])
	}
	return flags
}

// hasFlag says whether have holds flag (with its value) in a row.
func hasFlag(have, flag []string) bool {
	for j := 0; j+len(flag) <= len(have); j++ {
		if slices.Equal(have[j:j+len(flag)], flag) {
			return true
		}
	}
	return false
}

// lastValue is the value have gives name last (--name V or --name=V), or "".
func lastValue(have []string, name string) string {
	v := ""
	for j, a := range have {
		switch {
		case a == name && j+1 < len(have):
			v = have[j+1]
		case strings.HasPrefix(a, name+"="):
			v = strings.TrimPrefix(a, name+"=")
		}
	}
	return v
}

// agentResult is the call's result map, metadata and cost.
func agentResult(r agent.Result) capability.Result {
	t := r.Tokens
	b := rtfs.NewMapBuilder(10)
	b.Set(rtfs.Keyword("text"), rtfs.String(r.Text))
	b.Set(rtfs.Keyword("exit"), rtfs.Int(int64(r.Exit)))
	b.Set(rtfs.Keyword("cost-usd"), rtfs.Float(r.CostUSD))
	b.Set(rtfs.Keyword("tokens"), rtfs.MapValue(rtfs.NewMap(
		rtfs.Keyword("input"), rtfs.Int(t.Input), rtfs.Keyword("output"), rtfs.Int(t.Output),
		rtfs.Keyword("cache-read"), rtfs.Int(t.CacheRead), rtfs.Keyword("cache-write"), rtfs.Int(t.CacheWrite),
		rtfs.Keyword("reasoning"), rtfs.Int(t.Reasoning))))
	b.Set(rtfs.Keyword("session-id"), rtfs.String(r.SessionID))
	b.Set(rtfs.Keyword("turns"), rtfs.Int(int64(r.Turns)))
	b.Set(rtfs.Keyword("tool-uses"), rtfs.Int(int64(r.ToolUses)))
	b.Set(rtfs.Keyword("duration-ms"), rtfs.Int(r.Duration.Milliseconds()))
	if r.Stopped != "" {
		b.Set(rtfs.Keyword("stopped"), rtfs.String(r.Stopped))
	}
	meta := map[string]string{
		"cli": r.CLI, "exit": strconv.Itoa(r.Exit),
		"cost_usd": strconv.FormatFloat(r.CostUSD, 'f', -1, 64), "cost_source": r.CostSource,
		// Every token the model read or wrote counts toward max_tokens, as
		// an OpenAI prompt_tokens counts cached tokens too, and its
		// completion_tokens the reasoning tokens.
		"prompt_tokens":      strconv.FormatInt(t.Input+t.CacheRead+t.CacheWrite, 10),
		"completion_tokens":  strconv.FormatInt(t.Output+t.Reasoning, 10),
		"reasoning_tokens":   strconv.FormatInt(t.Reasoning, 10),
		"input_tokens":       strconv.FormatInt(t.Input, 10),
		"output_tokens":      strconv.FormatInt(t.Output, 10),
		"cache_read_tokens":  strconv.FormatInt(t.CacheRead, 10),
		"cache_write_tokens": strconv.FormatInt(t.CacheWrite, 10),
		"session_id":         r.SessionID, "turns": strconv.Itoa(r.Turns), "tool_uses": strconv.Itoa(r.ToolUses),
	}
	if r.Stopped != "" {
		meta["stopped"] = r.Stopped
	}
	if r.Model != "" {
		meta["model"] = r.Model
	}
	if r.PricedAs != "" {
		meta["priced_as"] = r.PricedAs
	}
	if len(r.Retries) > 0 {
		meta["retries"] = strconv.Itoa(len(r.Retries))
		meta["retry_log"] = retryLog(r.Retries)
	}
	outputMeta(meta, "output", r.Output)
	outputMeta(meta, "stderr", r.ErrOutput)
	if r.TextCut > 0 {
		meta["text_cut_bytes"] = strconv.FormatInt(r.TextCut, 10)
	}
	if r.Containment != "" {
		meta["containment"] = r.Containment
	}
	if len(r.SandboxArgs) > 0 { // what ralph added because its sandbox confines the call
		meta["sandbox_args"] = strings.Join(r.SandboxArgs, " ")
	}
	if r.Limit != nil && !r.Limit.Reset.IsZero() {
		meta["limit_reset"] = r.Limit.Reset.UTC().Format(time.RFC3339)
		meta["limit_reset_exact"] = strconv.FormatBool(r.Limit.Exact)
	}
	return capability.Result{Value: rtfs.MapValue(b.Map()), Metadata: meta, Cost: r.CostUSD}
}

// maxRetryLog is how many retry notices a call's record lists: the first
// ones and the last, with a count of those left out between.
const maxRetryLog = 20

// retryLog lists a call's retry notices one a line, as the console shows
// them ("retrying after 429 (attempt 3/10, next in 8s): …").
func retryLog(rs []agent.Retry) string {
	var b strings.Builder
	for i, r := range rs {
		if len(rs) > maxRetryLog && i == maxRetryLog-1 {
			fmt.Fprintf(&b, "… %d more\n", len(rs)-maxRetryLog)
		}
		if len(rs) > maxRetryLog && i >= maxRetryLog-1 && i < len(rs)-1 {
			continue
		}
		b.WriteString(agent.RetryLine(r))
		if r.Message != "" {
			b.WriteString(": " + oneLine(r.Message))
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// agentFailure says, in one sentence with the fix, why a call that ran did
// not do its work, or returns nil when it ended well.
func agentFailure(r agent.Result, o agent.Options) error {
	switch r.Stopped {
	case agent.StoppedTimeout:
		return fmt.Errorf("agent.run: %s ran past its timeout of %s and its process group was killed; raise [agent].timeout or give the agent a smaller task", r.CLI, o.Timeout)
	case agent.StoppedIdleTimeout:
		return fmt.Errorf("agent.run: %s printed nothing for %s and its process group was killed; raise [agent].idle_timeout if it works silently for longer", r.CLI, o.IdleTimeout)
	case agent.StoppedCancelled:
		return fmt.Errorf("agent.run: %s was cancelled and its process group was killed", r.CLI)
	case agent.StoppedUsageLimit:
		msg := "its account hit a usage limit"
		if l := r.Limit; l != nil {
			msg = "its account hit a " + l.Kind
			if l.Kind == agent.LimitOverloaded {
				msg = "its API is overloaded (a transient)"
			}
			if !l.Reset.IsZero() {
				msg += " that lifts at " + l.Reset.Local().Format(time.DateTime)
			}
		}
		return fmt.Errorf("agent.run: %s stopped: %s; the loop waits for it to lift and runs the iteration again", r.CLI, msg)
	}
	if r.Exit == 0 && !r.IsError {
		return nil
	}
	why := oneLine(r.Stderr)
	if why == "" || r.IsError {
		why = oneLine(r.Text)
	}
	status := fmt.Sprintf("exited with status %d", r.Exit)
	if r.Exit == 0 {
		status = "reported an error"
	}
	if why != "" {
		status += " (" + why + ")"
	}
	return fmt.Errorf("agent.run: %s %s; run `%s` by hand in the workdir to see why (login, API key, arguments)", r.CLI, status, strings.Join(r.Argv, " "))
}

// oneLine is the last non-empty line of s, at most 300 bytes: where a CLI
// says what went wrong.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 300 {
		l = strings.ToValidUTF8(l[:300], "") + "…"
	}
	return l
}

// toolLog turns an agent's tool-use and tool-result events into
// AgentToolUse children of the call: one per tool use, recorded when its
// result arrives (or when the call ends, for a use with no result).
type toolLog struct {
	rep     capability.Reporter
	ctx     context.Context
	cli     string
	workdir string
	// refusals take the paths the run's sandbox refused a tool, as its
	// failed result says them (nil: no sandbox).
	refusals *sandbox.Refusals
	pending  map[string]pendingTool
	order    []string // pending ids in use order
	err      error    // the first recording failure
}

type pendingTool struct {
	name, input string
	start       time.Time
}

func (l *toolLog) event(e agent.Event) {
	switch e.Kind {
	case agent.EventToolUse:
		id := e.ToolID
		if _, dup := l.pending[id]; id == "" || dup { // no id to match a result with: record it now
			l.record(id, pendingTool{name: e.Tool, input: e.Input, start: time.Now()}, nil)
			return
		}
		l.pending[id] = pendingTool{name: e.Tool, input: e.Input, start: time.Now()}
		l.order = append(l.order, id)
	case agent.EventToolResult:
		p, ok := l.pending[e.ToolID]
		if !ok {
			return
		}
		delete(l.pending, e.ToolID)
		l.order = slices.DeleteFunc(l.order, func(id string) bool { return id == e.ToolID })
		l.record(e.ToolID, p, &e)
	}
}

// flush records the uses whose results never came. When the call was
// stopped (timeout, idle timeout, cancellation) or the agent failed, such
// a tool was killed with it or never finished: it is recorded as failed,
// "cancelled", with why, never as ok.
func (l *toolLog) flush(r agent.Result) {
	why := unfinishedWhy(r)
	for _, id := range l.order {
		l.recordUnfinished(id, l.pending[id], why)
	}
	l.order, l.pending = nil, map[string]pendingTool{}
}

// unfinishedWhy says why a call ended before a tool returned, or "" when
// it ended well (a CLI that reports no result for a tool).
func unfinishedWhy(r agent.Result) string {
	switch r.Stopped {
	case agent.StoppedTimeout:
		return "the call ran past its timeout and was killed"
	case agent.StoppedIdleTimeout:
		return "the call printed nothing for its idle timeout and was killed"
	case agent.StoppedCancelled:
		return "the call was cancelled and killed"
	case agent.StoppedUsageLimit:
		return "the agent stopped at a usage limit"
	case "":
	default:
		return "the call stopped (" + r.Stopped + ")"
	}
	switch {
	case r.Exit < 0:
		return "the agent was killed by a signal"
	case r.Exit != 0:
		return fmt.Sprintf("the agent exited with status %d", r.Exit)
	case r.IsError:
		return "the agent reported an error"
	}
	return ""
}

// recordUnfinished records a use with no result: cancelled (failed) when
// why says the call ended before the tool could return.
func (l *toolLog) recordUnfinished(id string, p pendingTool, why string) {
	if why == "" {
		l.record(id, p, nil)
		return
	}
	l.recordChild(id, p, func(c *capability.Child) {
		c.Success = false
		c.Error = "the call ended before the tool returned: " + why
		c.DurationMS = time.Since(p.start).Milliseconds()
		c.Metadata["result"] = rtfs.String("cancelled")
	})
}

func (l *toolLog) record(id string, p pendingTool, res *agent.Event) {
	l.recordChild(id, p, func(c *capability.Child) {
		if res != nil {
			c.Result = rtfs.String(res.Text)
			c.DurationMS = time.Since(p.start).Milliseconds()
			if res.IsError {
				c.Success, c.Error = false, "the tool reported an error: "+oneLine(res.Text)
				l.refused(p, res.Text, c)
			}
		} else {
			c.Metadata["result"] = rtfs.String("none reported")
		}
	})
}

// refused puts on the call, and on the tool use's record, a path the
// sandbox refused the tool, when its failed result names one.
func (l *toolLog) refused(p pendingTool, text string, c *capability.Child) {
	if l.refusals == nil {
		return
	}
	if d, ok := agent.PathRefusal(p.name, p.input, text, l.workdir); ok {
		l.refusals.Add(d)
		c.Metadata["sandbox_denied"] = rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("what"), rtfs.String(d.What),
			rtfs.Keyword("allow"), rtfs.String(d.Allow)))
	}
}

// recordChild records one AgentToolUse, as set finishes it.
func (l *toolLog) recordChild(id string, p pendingTool, set func(*capability.Child)) {
	if l.err != nil {
		return
	}
	if p.name == "" {
		p.name = "tool"
	}
	c := capability.Child{Type: AgentToolUse, Name: p.name, Args: []rtfs.Value{rtfs.String(p.input)}, Success: true,
		Metadata: map[string]rtfs.Value{"tool_id": rtfs.String(id), "cli": rtfs.String(l.cli)}}
	set(&c)
	l.err = l.rep.Child(l.ctx, c)
}

// recordable makes a call's result fit its record: the output files are
// named relative to the store (of.Rel), a text cut to its tail starts with
// a marker saying how much is missing and where the whole is, and text
// and standard error that are not UTF-8 (an agent printing binary) have
// their invalid bytes replaced, so that the call is always recorded.
func recordable(r *agent.Result, of capability.OutputFile) {
	if r.Output.Path != "" && r.Output.Path == of.Path {
		r.Output.Path = of.Rel
		if r.ErrOutput.Path != "" {
			r.ErrOutput.Path = strings.TrimSuffix(of.Rel, ".out") + ".err"
		}
	}
	r.Text = strings.ToValidUTF8(r.Text, "\uFFFD")
	r.Stderr = strings.ToValidUTF8(r.Stderr, "\uFFFD")
	if r.TextCut > 0 {
		where := "it was not kept: the call had no output file"
		if r.Output.Path != "" {
			where = fmt.Sprintf("the whole output is in %s (%d bytes, sha256 %s)", r.Output.Path, r.Output.Bytes, r.Output.SHA256)
		}
		r.Text = fmt.Sprintf("[ralph: %d bytes cut before this; %s]\n", r.TextCut, where) + r.Text
	}
}

// outputMeta puts one output file on the call's record: <name>_file
// (relative to the store), <name>_bytes, <name>_sha256, and
// <name>_error when writing it failed.
func outputMeta(meta map[string]string, name string, o agent.Output) {
	if o.Path == "" {
		return
	}
	meta[name+"_file"] = o.Path
	meta[name+"_bytes"] = strconv.FormatInt(o.Bytes, 10)
	meta[name+"_sha256"] = o.SHA256
	if o.Err != nil {
		meta[name+"_error"] = strings.ToValidUTF8(o.Err.Error(), "\uFFFD")
	}
}
