package fleet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/config"
)

func mustPolicy(t *testing.T, src string) *config.WorkerPolicy {
	t.Helper()
	p, err := config.ParsePolicy([]byte(src), "worker.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustJob(t *testing.T, src string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte("[model]\nprovider = \"static\"\n[plan]\nrtfs = \"(do)\"\n"+src), "ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The default policy (no --policy) lets a job run no program and no agent.
func TestPolicyDefaultDenies(t *testing.T) {
	t.Parallel()
	refused := []struct{ job, want string }{
		{"[governance]\nshell_allow = [\"sh\"]\n", `its [governance].shell_allow names "sh"`},
		{"[[stop]]\nname = \"t\"\nkind = \"command\"\ncmd = [\"sh\", \"-c\", \"id\"]\n", `its stop condition "t" runs "sh"`},
		{"[[stop]]\nkind = \"any\"\n[[stop.conditions]]\nkind = \"command\"\ncmd = [\"go\", \"test\"]\n", `runs "go"`},
		{"[governance]\nagent_allow = [\"claude\"]\n", `its [governance].agent_allow names "claude"`},
		{"[[notify]]\nkind = \"command\"\ncmd = [\"curl\", \"-d@-\", \"https://example.com\"]\n", `its [[notify]] command-1 runs "curl"`},
	}
	for _, c := range refused {
		for _, p := range []*config.WorkerPolicy{nil, {}} {
			err := ApplyPolicy(p, mustJob(t, c.job), "")
			if err == nil || !strings.Contains(err.Error(), c.want) ||
				!strings.HasPrefix(err.Error(), "job refused by the worker's default policy (no --policy") ||
				!strings.HasSuffix(err.Error(), "run it on a worker whose --policy allows it") {
				t.Errorf("%q: got %v, want a refusal naming %q", c.job, err, c.want)
			}
		}
	}
	cmd := mustJob(t, "")
	cmd.Model.Provider, cmd.Model.Command = "command", []string{"claude", "-p"}
	if err := ApplyPolicy(nil, cmd, ""); err == nil || !strings.Contains(err.Error(), `its model.command runs "claude"`) {
		t.Errorf("command model: %v", err)
	}
	agent, err := config.Parse([]byte("[intent]\ngoal = \"g\"\nprompt_file = \"P.md\"\n[agent]\ncli = \"claude\"\n"), "ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyPolicy(nil, agent, ""); err == nil || !strings.Contains(err.Error(), `its [agent] runs the agent CLI "claude"`) {
		t.Errorf("agent job: %v", err)
	}
	if err := ApplyPolicy(nil, mustJob(t, ""), "https://git.example/any/repo"); err != nil {
		t.Errorf("a job that runs no program: %v", err)
	}
}

// A job gets the smaller of its governance and the policy's; a job that
// needs more is refused.
func TestPolicyIntersection(t *testing.T) {
	t.Parallel()
	p := mustPolicy(t, `[governance]
allow = ["fs.*", "shell.exec", "agent.run"]
deny = ["fs.delete"]
shell_allow = ["go", "sh"]
agent_allow = ["claude"]
max_cost_usd = 5.0
max_iterations = 10
max_steps = 50
workspaces = ["https://git.example/org/*", "/srv/git/*.git"]
`)
	c := mustJob(t, "[governance]\nshell_allow = [\"go\"]\ndeny = [\"fs.write\"]\n")
	if err := ApplyPolicy(p, c, "https://git.example/org/app"); err != nil {
		t.Fatal(err)
	}
	g := c.Governance
	if !slices.Equal(g.Allow, []string{"fs.*", "shell.exec", "agent.run"}) || !slices.Equal(g.Deny, []string{"fs.write", "fs.delete"}) ||
		!slices.Equal(g.ShellAllow, []string{"go"}) || g.MaxSteps != 50 {
		t.Errorf("governance %+v", g)
	}
	if specIterations(c.Stop) != 10 || len(c.Stop) != 2 || c.Stop[0].Kind != "max_cost" || c.Stop[0].USD != 5 || c.Stop[0].Name != "worker-policy-max-cost" {
		t.Errorf("stops %+v", c.Stop)
	}
	// Bounds within the ceiling are kept, not doubled.
	c = mustJob(t, "[governance]\nallow = [\"fs.read\"]\nmax_steps = 20\n[[stop]]\nkind = \"max_cost\"\nusd = 1.5\n[[stop]]\nkind = \"max_iterations\"\nmax = 3\n")
	if err := ApplyPolicy(p, c, "/srv/git/app.git"); err != nil {
		t.Fatal(err)
	}
	if len(c.Stop) != 2 || specIterations(c.Stop) != 3 || !slices.Equal(c.Governance.Allow, []string{"fs.read"}) || c.Governance.MaxSteps != 20 {
		t.Errorf("kept bounds: stops %+v governance %+v", c.Stop, c.Governance)
	}
	refused := []struct{ job, ws, want string }{
		{"", "https://git.example/other/app", `its workspace https://git.example/other/app matches none of the policy's workspaces`},
		{"", "https://git.example/org/app/sub", `matches none`},
		{"[governance]\nshell_allow = [\"curl\"]\n", "", `its [governance].shell_allow names "curl", which the policy's shell_allow ["go" "sh"] does not`},
		{"[governance]\nallow = [\"net.*\"]\n", "", `its [governance].allow names "net.*", beyond the policy's allow`},
		{"[governance]\nallow = [\"*\"]\n", "", `its [governance].allow names "*"`},
		{"[governance]\nagent_allow = [\"codex\"]\n", "", `agent_allow names "codex"`},
		{"[governance]\nmax_steps = 51\n", "", `max_steps 51 is above the policy's max_steps 50`},
		{"[governance]\nmax_cost_usd = 6.0\n", "", `max_cost_usd 6 is above the policy's max_cost_usd 5`},
		{"[[stop]]\nname = \"budget\"\nkind = \"max_cost\"\nusd = 7.5\n", "", `its stop condition "budget" allows $7.5, above the policy's max_cost_usd 5`},
		{"[[stop]]\nkind = \"max_iterations\"\nmax = 11\n", "", `allows 11 iterations, above the policy's max_iterations 10`},
		{"[loop]\nmax_iterations = 12\n", "", `its loop.max_iterations 12 is above`},
	}
	for _, r := range refused {
		err := ApplyPolicy(p, mustJob(t, r.job), r.ws)
		if err == nil || !strings.Contains(err.Error(), r.want) || !strings.HasPrefix(err.Error(), "job refused by worker policy worker.toml: ") {
			t.Errorf("%q at %q: got %v, want %q", r.job, r.ws, err, r.want)
		}
	}
	// Two budgets: the smaller one bounds the run.
	c = mustJob(t, "[[stop]]\nkind = \"max_cost\"\nusd = 50.0\n[[stop]]\nkind = \"max_cost\"\nusd = 2.0\n")
	if err := ApplyPolicy(p, c, ""); err != nil {
		t.Errorf("the smaller budget is within the ceiling: %v", err)
	}
}

// An agent loop's cli = "auto" runs the first CLI of the policy's on the
// worker's PATH (else its first, which the worker lacks: it hands the job
// back); cli = "command" runs agent.command, a program shell_allow must
// name.
func TestPolicyAgentCLI(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "codex"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := mustPolicy(t, "[governance]\nagent_allow = [\"command\", \"claude\", \"codex\"]\nshell_allow = [\"my-agent\"]\n")
	job := func(cli string) *config.Config {
		c, err := config.Parse([]byte("[intent]\ngoal = \"g\"\nprompt_file = \"P.md\"\n[agent]\n"+cli), "ralph.toml", func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct{ path, want string }{{bin, "codex"}, {t.TempDir(), "claude"}} {
		t.Setenv("PATH", c.path)
		cfg := job("cli = \"auto\"\n")
		if err := ApplyPolicy(p, cfg, ""); err != nil || cfg.Agent.CLI != c.want || !slices.Equal(cfg.Governance.AgentAllow, []string{c.want}) {
			t.Errorf("PATH %s: auto became %q, agent_allow %q (%v); want %q", c.path, cfg.Agent.CLI, cfg.Governance.AgentAllow, err, c.want)
		}
	}
	if err := ApplyPolicy(p, job("cli = \"command\"\ncommand = [\"my-agent\", \"-p\"]\n"), ""); err != nil {
		t.Errorf("an allowed agent.command: %v", err)
	}
	err := ApplyPolicy(p, job("cli = \"command\"\ncommand = [\"sh\", \"-c\", \"id\"]\n"), "")
	if err == nil || !strings.Contains(err.Error(), `its agent.command runs "sh", which the policy's shell_allow ["my-agent"] does not name`) {
		t.Errorf("agent.command sh: %v", err)
	}
	if err := ApplyPolicy(mustPolicy(t, "[governance]\nagent_allow = [\"command\"]\n"), job("cli = \"auto\"\n"), ""); err == nil ||
		!strings.Contains(err.Error(), `its [agent] runs the agent CLI "auto"`) {
		t.Errorf("auto under a policy of command alone: %v", err)
	}
}

// A worker's policy governs every process a job can start (hooks, notify
// commands, beside stop conditions and providers) and every endpoint and
// secret it names: base_url and webhook hosts must be the policy's hosts,
// and the worker variables a job reads must be the policy's env_allow.
func TestPolicyHoldsHooksEndpointsAndSecrets(t *testing.T) {
	t.Parallel()
	p := mustPolicy(t, "[governance]\nshell_allow = [\"go\"]\nhosts = [\"api.example.com\", \"*.internal.example\"]\nenv_allow = [\"EXAMPLE_KEY\", \"HOOK_URL\"]\n")
	openai := func(extra string) string {
		return "[model]\nprovider = \"openai\"\nmodel = \"m\"\n" + extra + "[[stop]]\nkind = \"max_iterations\"\nmax = 1\n"
	}
	parse := func(src string) *config.Config {
		c, err := config.Parse([]byte(src), "ralph.toml", func(string) string { return "" })
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		return c
	}
	for _, c := range []struct{ job, want string }{
		{"[[hook]]\nat = \"after_iteration\"\ncmd = [\"sh\", \"-c\", \"id\"]\n", `its [[hook]] after_iteration-1 runs "sh"`},
		{"[[notify]]\nkind = \"command\"\ncmd = [\"sh\", \"-c\", \"id\"]\n", `its [[notify]] command-1 runs "sh"`},
		{"[[notify]]\nkind = \"webhook\"\nurl = \"https://evil.example.net/h\"\n", `its [[notify]] webhook-1 url sends to host evil.example.net`},
		{"[[notify]]\nkind = \"webhook\"\nurl_env = \"AWS_SECRET_ACCESS_KEY\"\n", `its [[notify]] webhook-1 reads AWS_SECRET_ACCESS_KEY`},
		{"[[notify]]\nkind = \"webhook\"\nurl = \"https://api.example.com/h\"\nsecret_env = \"GITHUB_TOKEN\"\n", `reads GITHUB_TOKEN`},
	} {
		if err := ApplyPolicy(p, mustJob(t, c.job), ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want a refusal naming %q", c.job, err, c.want)
		}
	}
	for _, c := range []struct{ job, want string }{
		{openai("base_url = \"https://evil.example.net/v1\"\napi_key_env = \"EXAMPLE_KEY\"\n"), `its model.base_url sends to host evil.example.net`},
		{openai("base_url = \"https://api.example.com/v1\"\napi_key_env = \"AWS_SECRET_ACCESS_KEY\"\n"), `its model.api_key_env reads AWS_SECRET_ACCESS_KEY`},
		{openai("base_url = \"https://api.example.com/v1\"\n"), `its model.api_key_env reads OPENAI_API_KEY`},
	} {
		if err := ApplyPolicy(p, parse(c.job), ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want a refusal naming %q", c.job, err, c.want)
		}
	}
	for _, job := range []string{
		openai("base_url = \"https://api.example.com/v1\"\napi_key_env = \"EXAMPLE_KEY\"\n"),
		openai("base_url = \"https://llm.internal.example:8443/v1\"\napi_key_env = \"EXAMPLE_KEY\"\n"),
		openai(""), // the worker's own key to the default endpoint
	} {
		if err := ApplyPolicy(p, parse(job), ""); err != nil {
			t.Errorf("%q: %v", job, err)
		}
	}
	for _, job := range []string{
		"[[hook]]\nat = \"after_iteration\"\ncmd = [\"go\", \"vet\"]\n",
		"[[notify]]\nkind = \"webhook\"\nurl = \"https://api.example.com/h\"\n",
		"[[notify]]\nkind = \"webhook\"\nurl_env = \"HOOK_URL\"\n",
	} {
		if err := ApplyPolicy(p, mustJob(t, job), ""); err != nil {
			t.Errorf("%q: %v", job, err)
		}
	}
	if err := ApplyPolicy(nil, parse(openai("")), ""); err != nil {
		t.Errorf("the default policy and the default key and endpoint: %v", err)
	}
	if err := ApplyPolicy(nil, parse(openai("api_key_env = \"HOME\"\n")), ""); err == nil || !strings.Contains(err.Error(), "api_key_env reads HOME") {
		t.Errorf("the default policy and a job's api_key_env: %v", err)
	}
}
