package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// AgentLimitPastMaxRateLimitWait: the agent's usage limit lifts in
// 10 h, past the default max_rate_limit_wait of 6 h: the run ends at once
// as a limit (exit 3), naming the reset and the key to raise, and waits
// for nothing.
var _ = suite.Add(e2e.Test{Name: "AgentLimitPastMaxRateLimitWait", Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e, "FAKE_AGENT_SCENARIO=usage-limit-once", "FAKE_AGENT_RESET_SECONDS=36000")
	out, errOut, code := p.ralph("run", "--no-tui")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (limit)\n%s\n%s", code, out, errOut)
	}
	all := out + errOut
	for _, want := range []string{"max_rate_limit_wait", "lifts at ", "longer than [agent] max_rate_limit_wait 6h0m0s"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	if strings.Contains(out, "waiting until") {
		t.Errorf("the run waited:\n%s", out)
	}
	if n := p.calls(t); n != 1 {
		t.Errorf("%d agent calls, want 1", n)
	}
	if n := countType(p.chain(t), "RateLimitWait"); n != 0 {
		t.Errorf("%d RateLimitWait actions, want none", n)
	}
}})

// AgentUnreachableBudgetIsRefused: an agent loop on Codex (tokens,
// no cost) with a max_cost and no price for its model refuses to start,
// with the fix; with a priced --model it starts.
var _ = suite.Add(e2e.Test{Name: "AgentUnreachableBudgetIsRefused", Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e)
	cfg := filepath.Join(p.dir, "ralph.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), `cli = "claude"`, `cli = "codex"`, 1)
	if src == string(b) || !strings.Contains(src, `kind = "max_cost"`) {
		t.Fatalf("the written loop has no claude cli or no max_cost:\n%s", b)
	}
	// Whatever args init wrote for Claude are not Codex's.
	src = dropKey(src, "args")
	writeFile(t, cfg, src)
	out, errOut, code := p.ralph("run", "--no-tui")
	if code != 2 || !strings.Contains(errOut, `(max_cost) can never fire: codex reports tokens but no cost, and [agent] names no model; add an [agent.price] section`) {
		t.Fatalf("exit %d, want 2 and the refusal\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(p.dir, ".ralph")); err == nil {
		t.Error("the refused run left a store behind")
	}
	if n := p.calls(t); n != 0 {
		t.Errorf("%d agent calls, want none", n)
	}
	// A model the price table knows: it runs.
	writeFile(t, cfg, strings.Replace(src, `cli = "codex"`, "cli = \"codex\"\nargs = [\"-m\", \"gpt-5-codex\"]", 1))
	out, errOut, code = p.ralph("run", "--no-tui")
	if code == 2 {
		t.Fatalf("a priced model was refused: exit %d\n%s\n%s", code, out, errOut)
	}
}})

// dropKey removes the lines of a top-level key (and its continuation
// lines, for an array written over several) from a TOML section's text.
func dropKey(src, key string) string {
	var keep []string
	skipping := false
	for _, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, key+" =") || strings.HasPrefix(t, key+"="):
			skipping = !strings.Contains(t, "]") || strings.Count(t, "[") > strings.Count(t, "]")
			continue
		case skipping:
			if strings.HasPrefix(t, "]") {
				skipping = false
			}
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// SubmitRefusesAnUnreachableBudget: ralph submit checks a config as
// ralph run does, so a max_cost the Codex loop could never reach is refused
// before the fleet is contacted.
var _ = suite.Add(e2e.Test{Name: "SubmitRefusesAnUnreachableBudget", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[intent]
goal = "Make go test pass"
[agent]
cli = "codex"
[[stop]]
name = "budget"
kind = "max_cost"
usd = 5.0
`)
	path := "PATH=" + fakeAgentBin(t) + string(os.PathListSeparator) + os.Getenv("PATH")
	out, errOut, code := e.Ralph("submit", "ralph.toml", "--nats", "nats://127.0.0.1:1").In(dir).With(path).Run()
	if code != 2 || !strings.Contains(errOut, `stop condition "budget" (max_cost) can never fire: codex reports tokens but no cost`) {
		t.Fatalf("exit %d, want 2 and the refusal\n%s\n%s", code, out, errOut)
	}
}})
