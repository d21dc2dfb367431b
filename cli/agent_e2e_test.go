package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// fakeAgentBin is the directory of the fake agent CLIs (claude, codex, …),
// each speaking its CLI's documented output format.
func fakeAgentBin(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "agent", "testdata", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// agentProject is a Go module whose one test fails until calc.go is fixed,
// with the agent loop `ralph init --agent claude` writes for it.
type agentProject struct {
	e     *e2e.E
	dir   string
	state string   // the fake agent's call counter lives here
	env   []string // added to the test's environment for ralph: fake agents first on PATH
}

const brokenCalc = "package calc\n\nfunc Add(a, b int) int { return a - b }\n"

// fixCalc is the shell command the honest fake agent runs when it is done.
const fixCalc = `printf 'package calc\n\nfunc Add(a, b int) int { return a + b }\n' > calc.go`

func newAgentProject(t *testing.T, e *e2e.E, extraEnv ...string) *agentProject {
	t.Helper()
	p := &agentProject{e: e, dir: t.TempDir(), state: t.TempDir()}
	writeFile(t, filepath.Join(p.dir, "go.mod"), "module example.com/calc\n\ngo 1.22\n")
	writeFile(t, filepath.Join(p.dir, "calc.go"), brokenCalc)
	writeFile(t, filepath.Join(p.dir, "calc_test.go"), `package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 3); got != 5 {
		t.Fatalf("Add(2, 3) = %d, want 5", got)
	}
}
`)
	p.env = []string{"PATH=" + fakeAgentBin(t) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"FAKE_AGENT_STATE=" + p.state, "FAKE_AGENT_ON_DONE=" + fixCalc}
	p.env = append(p.env, extraEnv...)
	out, errOut, code := p.ralph("init", "--agent", "claude", "--test", "go test ./...")
	if code != 0 || !strings.Contains(out, "ralph.toml") {
		t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
	}
	// These rows prove the agent loop; init's sandbox (mode = "auto") is
	// proven by the sandbox's own rows, so the loop here runs unconfined.
	cfg := filepath.Join(p.dir, "ralph.toml")
	text, err := os.ReadFile(cfg)
	if err != nil || !strings.Contains(string(text), "\nmode = \"auto\"") {
		t.Fatalf("init wrote no [sandbox] mode = \"auto\" (%v):\n%s", err, text)
	}
	writeFile(t, cfg, strings.Replace(string(text), "\nmode = \"auto\"", "\nmode = \"off\"", 1))
	return p
}

// ralph runs ralph in the project, in the test's environment and the
// project's.
func (p *agentProject) ralph(args ...string) (string, string, int) {
	return p.cmd(args...).Run()
}

// cmd is ralph in the project, to run another way than to its end.
func (p *agentProject) cmd(args ...string) *e2e.Cmd {
	return p.e.Ralph(args...).In(p.dir).With(p.env...)
}

func (p *agentProject) calls(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.state, "calls"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// chainJSON is the run's chain as actions.
func (p *agentProject) chain(t *testing.T) []map[string]any {
	t.Helper()
	out, errOut, code := p.ralph("chain", "show", "--json")
	if code != 0 {
		t.Fatalf("chain show: %d %s", code, errOut)
	}
	var acts []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var a map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("chain line %q: %v", line, err)
		}
		acts = append(acts, a)
	}
	return acts
}

func countType(acts []map[string]any, typ string) int {
	n := 0
	for _, a := range acts {
		if a["action_type"] == typ {
			n++
		}
	}
	return n
}

// AgentInitLoop is the loop a new user writes with one command: it
// runs the fake claude until the tests pass, and ends done.
var _ = suite.Add(e2e.Test{Name: "AgentInitLoop", Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e)
	for _, f := range []string{"ralph.toml", "PROMPT.md", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(p.dir, f)); err != nil {
			t.Fatalf("init did not write %s: %v", f, err)
		}
	}
	out, errOut, code := p.ralph("run", "--no-tui")
	if code != 0 || !strings.Contains(out, "done after 3 iteration(s)") || !strings.Contains(out, "success by tests") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	// Streamed while it ran: the agent's text and its tool uses.
	for _, want := range []string{"agent | Working on step 1 of 3.", "agent > Edit", "AgentToolUse Edit ok", "PlanGenerated agent ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("headless output lacks %q:\n%s", want, out)
		}
	}
	acts := p.chain(t)
	if n := countType(acts, "AgentToolUse"); n != 3 {
		t.Errorf("%d AgentToolUse actions, want one per call", n)
	}
	calls := map[string]bool{}
	var cost float64
	for _, a := range acts {
		if a["action_type"] == "CapabilityCall" && a["function_name"] == "agent.run" {
			calls[a["action_id"].(string)] = true
			cost += a["cost"].(float64)
			if md := a["metadata"].(map[string]any); md["cli"] != "claude" || md["prompt_tokens"] == "0" {
				t.Errorf("agent.run metadata %v", md)
			}
		}
		if a["action_type"] == "PlanGenerated" && a["metadata"].(map[string]any)["mode"] != "agent" {
			t.Errorf("plan mode %v, want agent", a["metadata"])
		}
	}
	for _, a := range acts {
		if a["action_type"] == "AgentToolUse" && !calls[a["parent_action_id"].(string)] {
			t.Errorf("AgentToolUse %v is not a child of an agent.run call", a["action_id"])
		}
	}
	if cost < 0.0299 || cost > 0.0301 {
		t.Errorf("agent.run calls cost $%v, want $0.03 (3 × $0.01 as the CLI reported)", cost)
	}
	runs, _, _ := p.ralph("runs", "--json")
	var rec struct {
		State   string  `json:"state"`
		CostUSD float64 `json:"cost_usd"`
		Tokens  int64   `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(runs)), &rec); err != nil || rec.State != "done" || rec.CostUSD < 0.0299 || rec.Tokens == 0 {
		t.Errorf("runs: %q %v: want done with the agent's cost and tokens", runs, err)
	}
	if _, errOut, code := p.ralph("chain", "verify"); code != 0 {
		t.Errorf("verify: %d %s", code, errOut)
	}
	// The second prompt carried the failing test's tail.
	if n := p.calls(t); n != 3 {
		t.Errorf("%d agent calls, want 3", n)
	}
}})

// AgentFeedbackReachesThePrompt checks that the failing test output
// is in the next prompt, so the tests push back without running twice.
var _ = suite.Add(e2e.Test{Name: "AgentFeedbackReachesThePrompt", Run: func(t *testing.T, e *e2e.E) {
	log := filepath.Join(t.TempDir(), "prompts.log")
	p := newAgentProject(t, e, "FAKE_AGENT_LOG="+log)
	if out, errOut, code := p.ralph("run", "--no-tui", "--max-iterations", "2"); code != 3 {
		t.Fatalf("run: exit %d, want 3 (two iterations, tests still red)\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	prompts := string(b)
	for _, want := range []string{"## ralph feedback", "Iteration 1 of 2.", "Last iteration: none; this is the first.",
		"Iteration 2 of 2.", "Last iteration (1): ok.", "### tests (command): go test ./... exited 1, want 0",
		"calc_test.go:7: Add(2, 3) = -1, want 5"} {
		if !strings.Contains(prompts, want) {
			t.Errorf("prompts lack %q:\n%s", want, prompts)
		}
	}
}})

// AgentCostlyStopsBeforeOvershoot: $0.40 a call against max_cost
// $1.00 stops after two calls ($0.80), never at $1.20.
var _ = suite.Add(e2e.Test{Name: "AgentCostlyStopsBeforeOvershoot", Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e, "FAKE_AGENT_SCENARIO=costly", "FAKE_AGENT_DONE_AFTER=9")
	cfg := filepath.Join(p.dir, "ralph.toml")
	b, _ := os.ReadFile(cfg)
	writeFile(t, cfg, strings.Replace(string(b), "usd = 10.0", "usd = 1.00", 1))
	out, errOut, code := p.ralph("run", "--no-tui", "--json")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (limit)\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var sum struct {
		Condition string  `json:"condition"`
		CostUSD   float64 `json:"cost_usd"`
		Tokens    int64   `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Condition != "budget" || sum.CostUSD > 1.0 || sum.CostUSD < 0.79 || sum.Tokens == 0 {
		t.Errorf("summary %+v: want budget at $0.80 with tokens, never past $1.00", sum)
	}
	if n := p.calls(t); n != 2 {
		t.Errorf("%d agent calls, want 2", n)
	}
	if !strings.Contains(out, `"event":"agent"`) || !strings.Contains(out, `"kind":"cost"`) {
		t.Errorf("--json has no streamed agent events:\n%s", out)
	}
}})

// AgentUsageLimitWaitsAndRetries: the first call hits a usage limit
// that lifts in 2 s; the run waits, records it, runs iteration 1 again and
// ends done.
var _ = suite.Add(e2e.Test{Name: "AgentUsageLimitWaitsAndRetries", Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e, "FAKE_AGENT_SCENARIO=usage-limit-once", "FAKE_AGENT_RESET_SECONDS=2", "FAKE_AGENT_DONE_AFTER=2")
	out, errOut, code := p.ralph("run", "--no-tui")
	if code != 0 || !strings.Contains(out, "done after 1 iteration(s)") {
		t.Fatalf("exit %d, want done after the one iteration that counts\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "RateLimitWait usage-limit") || !strings.Contains(out, "waiting until") {
		t.Errorf("no wait shown:\n%s", out)
	}
	acts := p.chain(t)
	if n := countType(acts, "RateLimitWait"); n != 1 {
		t.Errorf("%d RateLimitWait actions, want 1", n)
	}
	var statuses []string
	for _, a := range acts {
		if a["action_type"] == "IterationCompleted" {
			md := a["metadata"].(map[string]any)
			statuses = append(statuses, fmt.Sprintf("%v:%v", md["iteration"], md["status"]))
		}
	}
	if got := strings.Join(statuses, " "); got != "1:usage-limit 1:ok" {
		t.Errorf("iterations %q, want iteration 1 limited, then run again", got)
	}
}})

// AgentKilledLeavesNoAgent: SIGKILL ralph while the agent works;
// no agent process survives, and resume repeats nothing that completed.
var _ = suite.Add(e2e.Test{Name: "AgentKilledLeavesNoAgent", Needs: []e2e.Need{e2e.File("/proc/self/environ")}, Run: func(t *testing.T, e *e2e.E) {
	// The second call hangs (its hook sleeps); every other call works.
	hang := `[ "$(cat "$FAKE_AGENT_STATE/calls")" = 2 ] && exec sleep 86400; true`
	p := newAgentProject(t, e, "FAKE_AGENT_EACH="+hang)
	ralph := p.cmd("run", "--no-tui").Start()
	var agents []int
	waitUntil(t, "the second agent call to start", func() bool {
		agents = agentPIDs(t, p.state, ralph.Pid())
		return p.calls(t) == 2 && hasSleeper(agents)
	})
	if err := ralph.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ralph.Wait()
	waitUntil(t, "the agent's processes to die with ralph", func() bool { return len(alive(agents)) == 0 })

	runs, _, _ := p.ralph("runs", "--json")
	var rec struct{ ID string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(runs)), &rec); err != nil {
		t.Fatalf("runs: %q: %v", runs, err)
	}
	res, errOut, code := p.ralph("resume", rec.ID, "--no-tui")
	if code != 0 || !strings.Contains(res, "done after 2 iteration(s)") {
		t.Fatalf("resume: exit %d\n%s\n%s\nfirst process:\n%s", code, res, errOut, ralph.Output())
	}
	completed := map[string]int{}
	for _, a := range p.chain(t) {
		if a["action_type"] == "IterationCompleted" {
			completed[fmt.Sprint(a["metadata"].(map[string]any)["iteration"])]++
		}
	}
	if completed["1"] != 1 || completed["2"] != 1 || len(completed) != 2 {
		t.Errorf("iterations completed %v: each exactly once (the killed one ran again, nothing else)", completed)
	}
	if n := p.calls(t); n != 3 {
		t.Errorf("%d agent calls, want 3: two iterations and the one that was killed", n)
	}
}})

// agentPIDs lists the processes other than ralph that carry the fake
// agent's state directory in their environment: the agent and its children.
func agentPIDs(t *testing.T, state string, ralph int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	marker := []byte("FAKE_AGENT_STATE=" + state + "\x00")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == ralph {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, marker) {
			out = append(out, pid)
		}
	}
	return out
}

func hasSleeper(pids []int) bool {
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.HasPrefix(b, []byte("sleep\x0086400")) {
			return true
		}
	}
	return false
}

// alive is the pids that still run (a zombie waiting to be reaped has ended).
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if s := string(b); strings.Contains(s[strings.LastIndexByte(s, ')')+1:], " Z ") {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// AgentBadInput: each mistake is one sentence with its fix and a
// usage exit, or a run that records the failure; nothing panics.
var _ = suite.Add(e2e.Test{Name: "AgentBadInput", Run: func(t *testing.T, e *e2e.E) {
	e.Run("unknown cli", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		p := newAgentProject(t, e)
		cfg := filepath.Join(p.dir, "ralph.toml")
		b, _ := os.ReadFile(cfg)
		writeFile(t, cfg, strings.Replace(string(b), `cli = "claude"`, `cli = "cursor"`, 1))
		_, errOut, code := p.ralph("run", "--no-tui")
		if code != 2 || !strings.Contains(errOut, `ralph.toml:12: agent.cli "cursor" is not a known agent CLI; use one of`) {
			t.Errorf("exit %d stderr %q", code, errOut)
		}
		if _, err := os.Stat(filepath.Join(p.dir, ".ralph")); err == nil {
			t.Error("a refused config left a store behind")
		}
	})
	e.Run("cli not on PATH", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		p := newAgentProject(t, e)
		goBin, err := exec.LookPath("go")
		if err != nil {
			t.Fatal(err)
		}
		path := "PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin" // go for the tests condition, no claude
		if _, err := exec.LookPath(filepath.Join("/usr/bin", "claude")); err == nil {
			t.Skip("a real claude is installed in /usr/bin")
		}
		_, errOut, code := p.cmd("run", "--no-tui").With(path).Run()
		if code != 2 || !strings.Contains(errOut, `ralph.toml:12: agent cli not found: "claude" is not on PATH; install it`) ||
			strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("exit %d stderr %q", code, errOut)
		}
	})
	e.Run("agent.run without agent_allow", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		p := newAgentProject(t, e)
		writeFile(t, filepath.Join(p.dir, "plan.rtfs"), `(step "Agent" (call :agent.run {:prompt "fix it" :cli "codex"}))`)
		out, errOut, code := p.ralph("exec", "plan.rtfs", "--config", "ralph.toml")
		if code != 2 || !strings.Contains(errOut, `agent CLI "codex" is not in [governance].agent_allow [claude]; add it there to permit it`) {
			t.Errorf("exit %d\n%s\n%s", code, out, errOut)
		}
		show, _, _ := p.ralph("chain", "show")
		if !strings.Contains(show, "GovernanceDecision admission FAILED") || !strings.Contains(show, "agent_allow") {
			t.Errorf("the refusal is not on the chain:\n%s", show)
		}
	})
	e.Run("the loop's cli outside agent_allow", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		p := newAgentProject(t, e)
		cfg := filepath.Join(p.dir, "ralph.toml")
		b, _ := os.ReadFile(cfg)
		writeFile(t, cfg, strings.Replace(string(b), `cli = "claude"`, `cli = "auto"`, 1)+"\n[governance]\nagent_allow = [\"codex\"]\n")
		_, errOut, code := p.ralph("run", "--no-tui")
		if code != 2 || !strings.Contains(errOut, `governance refuses the agent loop's plan, so every iteration would fail`) ||
			!strings.Contains(errOut, `agent CLI "claude" is not in [governance].agent_allow [codex]`) {
			t.Errorf("exit %d stderr %q", code, errOut)
		}
		if _, err := os.Stat(filepath.Join(p.dir, ".ralph")); !os.IsNotExist(err) {
			t.Errorf("a refused agent loop left a store behind (%v)", err)
		}
	})
	e.Run("malformed stream line", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		p := newAgentProject(t, e)
		bin := t.TempDir() // a claude that prints one broken line, then speaks properly
		writeFile(t, filepath.Join(bin, "claude"), "#!/bin/sh\necho '{\"type\":\"assistant\",\"message\":{'\nexec "+
			filepath.Join(fakeAgentBin(t), "claude")+" \"$@\"\n")
		if err := os.Chmod(filepath.Join(bin, "claude"), 0o755); err != nil {
			t.Fatal(err)
		}
		path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
		out, errOut, code := p.cmd("run", "--no-tui").With(path).Run()
		if code != 0 || !strings.Contains(out, `agent | {"type":"assistant","message":{`) || !strings.Contains(out, "done after 3") {
			t.Errorf("exit %d: the broken line must be kept as text and the run go on\n%s\n%s", code, out, errOut)
		}
	})
	e.Run("agent exits at once", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		p := newAgentProject(t, e)
		bin := t.TempDir()
		writeFile(t, filepath.Join(bin, "claude"), "#!/bin/sh\necho 'Invalid API key · Please run /login' >&2\nexit 1\n")
		if err := os.Chmod(filepath.Join(bin, "claude"), 0o755); err != nil {
			t.Fatal(err)
		}
		path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
		out, errOut, code := p.cmd("run", "--no-tui").With(path).Run()
		if code != 1 || !strings.Contains(out, "failed after 3 iteration(s)") || !strings.Contains(out, "failure by broken") {
			t.Fatalf("exit %d: three failed calls in a row must stop the run\n%s\n%s", code, out, errOut)
		}
		show, _, _ := p.ralph("chain", "show", "--json")
		if !strings.Contains(show, "claude exited with status 1 (Invalid API key · Please run /login); run `") {
			t.Errorf("the call's error is not on the chain:\n%s", show)
		}
	})
}})
