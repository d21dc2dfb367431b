package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// recorder is a capability.Reporter that keeps what a call reports.
type recorder struct {
	mu       sync.Mutex
	children []capability.Child
	events   []agent.Event
	limits   []capability.Limit
	denials  []capability.Denial
}

func (r *recorder) Child(_ context.Context, c capability.Child) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.children = append(r.children, c)
	return nil
}

func (r *recorder) Stream(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, *ev.(*agent.Event))
}

func (r *recorder) Denied(d capability.Denial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denials = append(r.denials, d)
}

func (r *recorder) Limited(l capability.Limit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = append(r.limits, l)
}

// fakeAgents is the directory of the fake agent CLIs (agent/testdata/bin).
func fakeAgents(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "agent", "testdata", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// agentRegistry registers agent.run running the fake CLIs in scenario.
func agentRegistry(t *testing.T, scenario string, o AgentOptions) (*capability.Registry, string) {
	t.Helper()
	dir := t.TempDir()
	bin := fakeAgents(t)
	o.LookPath = func(name string) (string, error) {
		p := filepath.Join(bin, name)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	env := append(os.Environ(), "FAKE_AGENT_SCENARIO="+scenario, "FAKE_AGENT_STATE="+t.TempDir(), "FAKE_AGENT_RESET_SECONDS=3600")
	r := capability.NewRegistry()
	if err := Register(r, Options{Workdir: dir, Env: env, Agent: o}); err != nil {
		t.Fatal(err)
	}
	return r, dir
}

func runAgent(t *testing.T, r *capability.Registry, input string) (capability.Result, *recorder, error) {
	t.Helper()
	c := r.Get("agent.run")
	v, err := rtfs.ReadValue(input)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Spec.InputFrom([]rtfs.Value{v})
	if err != nil {
		return capability.Result{}, nil, err
	}
	rec := &recorder{}
	res, err := c.Handler(capability.WithReporter(context.Background(), rec), in)
	return res, rec, err
}

func TestAgentRunRecordsToolUsesCostAndTokens(t *testing.T) {
	t.Parallel()
	r, dir := agentRegistry(t, "honest", AgentOptions{CLI: "claude", Allow: []string{"claude"}})
	res, rec, err := runAgent(t, r, `{:prompt "Fix the failing test."}`)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Value.AsMap()
	if m.GetKey("exit").AsInt() != 0 || m.GetKey("tool-uses").AsInt() != 1 || !strings.Contains(m.GetKey("text").Str(), "Step 1 of 3") {
		t.Errorf("result = %s", rtfs.Print(res.Value))
	}
	if !m.GetKey("stopped").IsNil() {
		t.Errorf(":stopped = %s on a call that ended by itself", rtfs.Print(m.GetKey("stopped")))
	}
	if res.Cost != 0.01 || res.Metadata["cost_source"] != "reported" || res.Metadata["cli"] != "claude" {
		t.Errorf("cost %v metadata %v", res.Cost, res.Metadata)
	}
	tok := m.GetKey("tokens").AsMap()
	in, out, cr, cw := tok.GetKey("input").AsInt(), tok.GetKey("output").AsInt(), tok.GetKey("cache-read").AsInt(), tok.GetKey("cache-write").AsInt()
	if in == 0 || out == 0 || res.Metadata["prompt_tokens"] != itoa(in+cr+cw) || res.Metadata["completion_tokens"] != itoa(out) {
		t.Errorf("tokens %s, metadata %v: max_tokens counts every token read or written", rtfs.Print(m.GetKey("tokens")), res.Metadata)
	}
	if len(rec.children) != 1 {
		t.Fatalf("children = %+v, want one AgentToolUse", rec.children)
	}
	c := rec.children[0]
	if c.Type != AgentToolUse || c.Name != "Edit" || !c.Success || !strings.Contains(c.Result.Str(), "updated") ||
		!strings.Contains(c.Args[0].Str(), "progress.txt") || c.Metadata["tool_id"].Str() == "" {
		t.Errorf("tool use = %+v", c)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "progress.txt")); err != nil || string(b) != "step 1\n" {
		t.Errorf("the agent ran elsewhere than the workdir: %q %v", b, err)
	}
	var kinds []string
	for _, e := range rec.events {
		kinds = append(kinds, e.Kind.String())
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "text") || !strings.Contains(got, "tool-use") {
		t.Errorf("streamed %q, want text and tool-use as they happened", got)
	}
	if len(rec.limits) != 0 {
		t.Errorf("limits %v on a call that hit none", rec.limits)
	}
}

func TestAgentRunUsageLimit(t *testing.T) {
	t.Parallel()
	r, _ := agentRegistry(t, "usage-limit-once", AgentOptions{CLI: "claude", Allow: []string{"claude"}})
	res, rec, err := runAgent(t, r, `{:prompt "Fix it."}`)
	if err == nil || !strings.Contains(err.Error(), "usage-limit that lifts at") || !strings.Contains(err.Error(), "runs the iteration again") {
		t.Fatalf("err = %v", err)
	}
	if res.Value.AsMap().GetKey("stopped").Str() != agent.StoppedUsageLimit || res.Metadata["limit_reset"] == "" {
		t.Errorf("result %s metadata %v", rtfs.Print(res.Value), res.Metadata)
	}
	if len(rec.limits) != 1 || rec.limits[0].Kind != agent.LimitUsage || time.Until(rec.limits[0].Reset) < 30*time.Minute {
		t.Errorf("limits = %+v, want one usage limit an hour away", rec.limits)
	}
}

func TestAgentRunRefusals(t *testing.T) {
	t.Parallel()
	r, _ := agentRegistry(t, "honest", AgentOptions{CLI: "claude", Allow: []string{"claude"}})
	_, _, err := runAgent(t, r, `{:prompt "x" :cli "codex"}`)
	var na *AgentNotAllowedError
	if !errors.As(err, &na) || !strings.Contains(err.Error(), "add it there to permit it") {
		t.Errorf("a CLI outside agent_allow: %v", err)
	}
	if _, _, err := runAgent(t, r, `{:prompt "x" :timeout-ms 0}`); err == nil || !strings.Contains(err.Error(), ":timeout-ms must be positive") {
		t.Errorf("timeout 0: %v", err)
	}
	if _, _, err := runAgent(t, r, `{:prompt 5}`); err == nil {
		t.Error("a prompt that is not a string was accepted")
	}
	bare, _ := agentRegistry(t, "honest", AgentOptions{})
	if _, _, err := runAgent(t, bare, `{:prompt "x"}`); err == nil || !strings.Contains(err.Error(), "add an [agent] section") {
		t.Errorf("no CLI configured: %v", err)
	}
}

func TestAgentRunFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "broken-agent")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'Error: invalid API key' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hang := filepath.Join(dir, "silent-agent")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, input string
		o           AgentOptions
		want        string
		stopped     string
	}{
		{"exits at once", `{:prompt "x"}`, AgentOptions{CLI: "command", Command: []string{script}, Allow: []string{"command"}},
			"command exited with status 1 (Error: invalid API key); run `" + script + "` by hand in the workdir", ""},
		{"idle timeout", `{:prompt "x" :idle-timeout-ms 200}`, AgentOptions{CLI: "command", Command: []string{hang}, Allow: []string{"command"}},
			"printed nothing for 200ms and its process group was killed; raise [agent].idle_timeout", agent.StoppedIdleTimeout},
		{"timeout", `{:prompt "x" :timeout-ms 300}`, AgentOptions{CLI: "command", Command: []string{hang}, Allow: []string{"command"}},
			"ran past its timeout of 300ms and its process group was killed", agent.StoppedTimeout},
		{"not on PATH", `{:prompt "x"}`, AgentOptions{CLI: "command", Command: []string{"no-such-agent-cli"}, Allow: []string{"command"}},
			`"no-such-agent-cli" is not on PATH`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := capability.NewRegistry()
			if err := Register(r, Options{Workdir: t.TempDir(), Agent: tc.o}); err != nil {
				t.Fatal(err)
			}
			res, _, err := runAgent(t, r, tc.input)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if tc.stopped != "" && res.Value.AsMap().GetKey("stopped").Str() != tc.stopped {
				t.Errorf("result %s, want :stopped %q", rtfs.Print(res.Value), tc.stopped)
			}
		})
	}
}

func itoa(n int64) string { return strings.TrimSpace(rtfs.Print(rtfs.Int(n))) }

func TestDeniedErrorNamesToolTargetAndFix(t *testing.T) {
	t.Parallel()
	r := agent.Result{CLI: "claude", Denials: []agent.Denial{
		{Tool: "Edit", Target: "/w/calc.go", Message: "Claude requested permissions to write to /w/calc.go, but you haven't granted it yet."},
		{Tool: "Bash", Target: "go test ./..."},
	}}
	msg := deniedError(r, agent.Options{}).Error()
	for _, want := range []string{"agent.run: permission denied: claude was refused Edit /w/calc.go", "(and 1 more: Bash go test ./...)",
		"you haven't granted it yet", "add --permission-mode acceptEdits to [agent] args (`ralph init --agent claude` writes them)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q\nlacks %q", msg, want)
		}
	}
	if got := deniedList(r.Denials); got != "Edit /w/calc.go; Bash go test ./..." {
		t.Errorf("deniedList = %q", got)
	}
}

func TestDenialFixNamesOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	full := agent.PermissionsFor("gemini", nil, false).Args
	if len(full) == 0 {
		t.Skip("gemini asks for no permission flags")
	}
	if got := denialFix("gemini", nil, nil); !strings.Contains(got, "add "+strings.Join(full, " ")+" to [agent] args") {
		t.Errorf("with no args: %q", got)
	}
	if got := denialFix("gemini", append([]string{"--model", "m"}, full...), nil); strings.Contains(got, "add --") ||
		!strings.Contains(got, "permissions are set") {
		t.Errorf("with the flags already there: %q", got)
	}
	if got := denialFix("gemini", full[:1], nil); strings.HasPrefix(got, "add "+full[0]+" ") || !strings.HasPrefix(got, "add ") {
		t.Errorf("with %s already there: %q", full[0], got)
	}
	if got := denialFix("opencode", nil, []string{"OPENCODE_PERMISSION={}"}); strings.Contains(got, "OPENCODE_PERMISSION in [agent.env]") {
		t.Errorf("names OPENCODE_PERMISSION, which the call had: %q", got)
	}
}

// TestDenialFixSaysWhereToChange: a flag the call gave another value is
// to be replaced, not added a second time (Gemini CLI's --approval-mode
// plan, Claude Code's --permission-mode default, which 2.1.332 calls
// manual); a CLI whose permissions live in its environment is told to
// allow the tool there ([agent.env] OPENCODE_PERMISSION), not in args.
func TestDenialFixSaysWhereToChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cli       string
		args, env []string
		want      string
	}{
		{"gemini plan", "gemini", []string{"--skip-trust", "--approval-mode", "plan"}, nil,
			"replace --approval-mode plan with --approval-mode auto_edit in [agent] args (`ralph init --agent gemini` writes them)"},
		{"gemini plan with =", "gemini", []string{"--skip-trust", "--approval-mode=plan"}, nil,
			"replace --approval-mode plan with --approval-mode auto_edit in [agent] args"},
		{"claude manual", "claude", []string{"--permission-mode", "manual"}, nil,
			"replace --permission-mode manual with --permission-mode acceptEdits in [agent] args"},
		{"claude default", "claude", []string{"--permission-mode", "default"}, nil,
			"replace --permission-mode default with --permission-mode acceptEdits in [agent] args"},
		{"claude none", "claude", nil, nil, "add --permission-mode acceptEdits to [agent] args"},
		{"opencode unset", "opencode", nil, nil, "set OPENCODE_PERMISSION in [agent.env] (`ralph init --agent opencode` writes them)"},
		{"opencode set", "opencode", nil, []string{`OPENCODE_PERMISSION={"edit":"ask"}`},
			"allow it in [agent.env] OPENCODE_PERMISSION if it should run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := denialFix(tc.cli, tc.args, tc.env); !strings.Contains(got, tc.want) {
				t.Errorf("denialFix = %q, want it to say %q", got, tc.want)
			}
		})
	}
}
