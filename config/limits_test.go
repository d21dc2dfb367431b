package config

import (
	"strings"
	"testing"
	"time"
)

func TestMaxRateLimitWait(t *testing.T) {
	t.Parallel()
	base := "[intent]\ngoal = \"g\"\n[agent]\ncli = \"claude\"\n"
	c, err := Parse([]byte(base), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.MaxRateLimitWait.Duration != 6*time.Hour || c.MaxRateLimitWait() != 6*time.Hour {
		t.Errorf("default %v, want 6h", c.Agent.MaxRateLimitWait)
	}
	c, err = Parse([]byte(base+"max_rate_limit_wait = \"90m\"\n"), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxRateLimitWait() != 90*time.Minute {
		t.Errorf("set %v, want 90m", c.MaxRateLimitWait())
	}
	back, err := Parse([]byte(c.Snapshot()), "snapshot", noEnv)
	if err != nil || back.MaxRateLimitWait() != 90*time.Minute {
		t.Errorf("snapshot: %v, %v", err, back)
	}
	_, err = Parse([]byte(base+"max_rate_limit_wait = \"0s\"\n"), "ralph.toml", noEnv)
	if err == nil || !strings.Contains(err.Error(), "ralph.toml:5: agent.max_rate_limit_wait must be positive") {
		t.Errorf("0s: %v", err)
	}
	// Without [agent] the default still holds (agent.run in a plan).
	c, err = Parse([]byte("[plan]\nrtfs = '(step \"A\" (call :ccos.echo {:message \"a\"}))'\n"), "ralph.toml", noEnv)
	if err != nil || c.MaxRateLimitWait() != 6*time.Hour {
		t.Errorf("no [agent]: %v %v", err, c)
	}
}

func TestAgentPriceReasoning(t *testing.T) {
	t.Parallel()
	src := "[intent]\ngoal = \"g\"\n[agent]\ncli = \"codex\"\n[agent.price]\ninput = 1.25\noutput = 10\nreasoning = 12\n"
	c, err := Parse([]byte(src), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.Price.Reasoning != 12 {
		t.Errorf("reasoning price %v", c.Agent.Price.Reasoning)
	}
	if _, err := Parse([]byte(strings.Replace(src, "reasoning = 12", "reasoning = -1", 1)), "ralph.toml", noEnv); err == nil ||
		!strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("negative reasoning price: %v", err)
	}
}

// A max_cost the agent loop cannot reach refuses the run: the CLI reports
// no cost and nothing prices its model.
func TestCheckAgentBudget(t *testing.T) {
	t.Parallel()
	loop := func(cli, extra string) *Config {
		t.Helper()
		src := "[intent]\ngoal = \"g\"\n[agent]\ncli = \"" + cli + "\"\n" + extra +
			"[[stop]]\nname = \"budget\"\nkind = \"max_cost\"\nusd = 5.0\n"
		if cli == "command" {
			src = strings.Replace(src, "[agent]\n", "[agent]\ncommand = [\"my-agent\"]\n", 1)
		}
		c, err := Parse([]byte(src), "ralph.toml", noEnv)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cases := []struct {
		name, cli, extra, err string
	}{
		{"claude reports cost", "claude", "", ""},
		{"opencode reports cost", "opencode", "", ""},
		{"codex without a model", "codex", "", `stop condition "budget" (max_cost) can never fire: codex reports tokens but no cost, and [agent] names no model; add an [agent.price] section`},
		{"codex with a priced model", "codex", "args = [\"-m\", \"gpt-5-codex\"]\n", ""},
		{"codex with an unknown model", "codex", "args = [\"--model\", \"my-finetune\"]\n", `runs model "my-finetune", which the built-in price table does not know`},
		{"codex with [agent.price]", "codex", "[agent.price]\ninput = 1\noutput = 2\n", ""},
		{"gemini's default model is priced", "gemini", "", ""},
		{"gemini with an unknown model", "gemini", "args = [\"-m\", \"gemini-9\"]\n", `e.g. ["--model", "gemini-2.5-pro"]`},
		{"command reports nothing", "command", "", `cli "command" reports neither cost nor tokens`},
	}
	for _, c := range cases {
		err := loop(c.cli, c.extra).CheckAgentBudget(c.cli)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
	// No max_cost: nothing to refuse.
	c, err := Parse([]byte("[intent]\ngoal = \"g\"\n[agent]\ncli = \"codex\"\n"), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckAgentBudget("codex"); err != nil {
		t.Errorf("no max_cost: %v", err)
	}
}
