package config

import (
	"strings"
	"testing"
)

func TestPolicyErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want string }{
		{"[governance]\nshell_allow = [\"go\"]\nshel_allow = [\"sh\"]\n",
			"worker.toml:3: unknown key governance.shel_allow; a worker policy has one [governance] table with allow, deny, shell_allow"},
		{"[governance]\n[agent]\ncli = \"claude\"\n", "worker.toml:2: unknown key agent; a worker policy has one [governance] table"},
		{"[governance]\nmax_cost_usd = \"ten\"\n", "worker.toml:2: governance.max_cost_usd must be a number, not a string"},
		{"[governance]\nshell_allow = \"go\"\n", "worker.toml:2: governance.shell_allow must be a list of strings"},
		{"[governance]\n\nmax_cost_usd = -1.0\n", "worker.toml:3: governance.max_cost_usd must be more than 0, got -1"},
		{"[governance]\nmax_iterations = 0\n", "worker.toml:2: governance.max_iterations must be at least 1"},
		{"[governance]\nworkspaces = [\"https://git.example/[\"]\n", "worker.toml:2: governance.workspaces has a bad glob"},
		{"[governance]\nagent_allow = [\"\"]\n", `worker.toml:2: governance.agent_allow names "", which is not an agent CLI; list some of claude, codex`},
		{"[governance]\nagent_allow = [\"auto\"]\n", `worker.toml:2: governance.agent_allow names "auto", which is not an agent CLI`},
		{"[governance]\nshell_allow = [\" \"]\n", "worker.toml:2: governance.shell_allow has an empty name"},
		{"[governance\n", "worker.toml:2:12: "},
	}
	for _, c := range cases {
		_, err := ParsePolicy([]byte(c.src), "worker.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
	if _, err := LoadPolicy("/nonexistent/worker.toml"); err == nil || !strings.Contains(err.Error(), "does not exist; write one") {
		t.Errorf("missing file: %v", err)
	}
}
