package fleet

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/notify"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// A worker's policy (config.WorkerPolicy, read from --policy) held against
// a job's config before anything of the job runs. What a stop table bounds
// or runs is its kind's row's to say (stop.SpecLimits, stop.SpecRuns), and
// what a [[notify]] table runs its sink's (notify.Runs).

// PolicyStopName names the stop conditions Apply adds for a policy's
// ceilings.
const PolicyStopName = "worker-policy"

// ApplyPolicy holds c, a job's config, and workspace, the URL it is cloned from
// ("" none), to the policy: c's governance becomes the smaller of the two
// (allow narrowed to the policy's, deny joined, max_steps and the budgets
// the lower, a ceiling the job does not bound added as a stop condition),
// and a job that needs more than the policy allows is an error saying what
// and the fix. A nil policy is the default one.
func ApplyPolicy(p *config.WorkerPolicy, c *config.Config, workspace string) error {
	var g config.PolicyGovernance
	if p != nil {
		g = p.Governance
	}
	if workspace != "" && len(g.Workspaces) > 0 && !matchGlob(g.Workspaces, workspace) {
		return refuse(p, "its workspace %s matches none of the policy's workspaces %q", workspace, g.Workspaces)
	}
	for _, s := range c.Governance.ShellAllow {
		if !slices.Contains(g.ShellAllow, s) {
			return refuse(p, "its [governance].shell_allow names %q, which the policy's shell_allow %q does not", s, g.ShellAllow)
		}
	}
	if prog, where := firstProgram(c, g.ShellAllow); prog != "" {
		return refuse(p, "its %s runs %q, which the policy's shell_allow %q does not name", where, prog, g.ShellAllow)
	}
	if err := applyReach(p, c, &g); err != nil {
		return err
	}
	if err := applySandbox(p, c, g.Sandbox); err != nil {
		return err
	}
	if err := applyAgents(p, c, &g); err != nil {
		return err
	}
	if err := applyLimits(p, &c.Governance, &g); err != nil {
		return err
	}
	if err := applyMaxCost(p, c, &g); err != nil {
		return err
	}
	return applyMaxIterations(p, c, &g)
}

// refuse says that the policy refuses the job, why, and the fix.
func refuse(p *config.WorkerPolicy, format string, args ...any) error {
	return fmt.Errorf("job refused by %s: %s; run it on a worker whose --policy allows it", p.Name(), fmt.Sprintf(format, args...))
}

// CheckPolicy checks what config.ParsePolicy only decodes: the policy's
// sandbox mode (sandbox.ParseMode), at its file:line:col.
func CheckPolicy(p *config.WorkerPolicy) error {
	if p == nil || p.Governance.Sandbox == "" {
		return nil
	}
	if _, err := sandbox.ParseMode(p.Governance.Sandbox); err != nil {
		return p.ErrorAt("sandbox", "governance.sandbox: "+err.Error()+"; leave it out to require none")
	}
	return nil
}

// applySandbox holds the job to the sandbox mode the policy requires:
// a job asking for off, or for no sandbox, is refused; one asking for a
// mode runs under the policy's (a job's bwrap or landlock stands for a
// policy's auto, which it satisfies).
func applySandbox(p *config.WorkerPolicy, c *config.Config, required string) error {
	if required == "" || required == string(sandbox.Off) {
		return nil
	}
	switch asked := c.SandboxMode(); {
	case c.Sandbox == nil:
		return refuse(p, "it has no [sandbox] and the policy requires sandbox mode %q; add [sandbox] mode = %q to the job's config", required, required)
	case asked == string(sandbox.Off):
		return refuse(p, "its [sandbox] mode is \"off\" and the policy requires sandbox mode %q; set mode = %q", required, required)
	case required == string(sandbox.Auto) && asked != "":
		return nil
	}
	c.SetSandboxMode(required)
	return nil
}

// applyAgents resolves agent CLI "auto" to the policy's first CLI on this
// worker's PATH and refuses an agent CLI the policy does not allow.
func applyAgents(p *config.WorkerPolicy, c *config.Config, g *config.PolicyGovernance) error {
	jg := &c.Governance
	if c.Agent != nil && c.Agent.CLI == "auto" {
		// "auto" is the first CLI of the policy's on this worker's PATH;
		// with none there, the first (the worker hands the job back, as
		// for any missing agent CLI).
		if cli := autoCLI(g.AgentAllow); cli != "" {
			c.Agent.CLI = cli
			if i := slices.Index(jg.AgentAllow, "auto"); i >= 0 {
				jg.AgentAllow = slices.DeleteFunc(slices.Clone(jg.AgentAllow), func(a string) bool { return a == "auto" || a == cli })
				jg.AgentAllow = append(jg.AgentAllow, cli)
			}
		}
	}
	if c.Agent != nil && !slices.Contains(g.AgentAllow, c.Agent.CLI) {
		return refuse(p, "its [agent] runs the agent CLI %q, which the policy's agent_allow %q does not name", c.Agent.CLI, g.AgentAllow)
	}
	for _, a := range jg.AgentAllow {
		if !slices.Contains(g.AgentAllow, a) {
			return refuse(p, "its [governance].agent_allow names %q, which the policy's agent_allow %q does not", a, g.AgentAllow)
		}
	}
	return nil
}

// applyLimits narrows the job's allow to the policy's, joins the denies
// and takes the lower max_steps.
func applyLimits(p *config.WorkerPolicy, jg *config.Governance, g *config.PolicyGovernance) error {
	if len(g.Allow) > 0 {
		if len(jg.Allow) == 0 {
			jg.Allow = slices.Clone(g.Allow)
		}
		for _, a := range jg.Allow {
			if !matchGlob(g.Allow, a) {
				return refuse(p, "its [governance].allow names %q, beyond the policy's allow %q", a, g.Allow)
			}
		}
	}
	for _, d := range g.Deny {
		if !slices.Contains(jg.Deny, d) {
			jg.Deny = append(jg.Deny, d)
		}
	}
	if g.MaxSteps > 0 {
		if jg.MaxSteps > g.MaxSteps {
			return refuse(p, "its [governance].max_steps %d is above the policy's max_steps %d", jg.MaxSteps, g.MaxSteps)
		}
		if jg.MaxSteps == 0 {
			jg.MaxSteps = g.MaxSteps
		}
	}
	return nil
}

// applyMaxCost holds the job's max_cost_usd and max_cost stop conditions
// to the policy's max_cost_usd, adding a stop condition when none bounds
// the job.
func applyMaxCost(p *config.WorkerPolicy, c *config.Config, g *config.PolicyGovernance) error {
	if g.MaxCostUSD == nil {
		return nil
	}
	ceiling := *g.MaxCostUSD
	if c.Governance.MaxCostUSD > ceiling {
		return refuse(p, "its [governance].max_cost_usd %g is above the policy's max_cost_usd %g", c.Governance.MaxCostUSD, ceiling)
	}
	budget, name := 0.0, ""
	for i := range c.Stop {
		if usd := stop.SpecLimits(&c.Stop[i]).CostUSD; usd > 0 && (name == "" || usd < budget) {
			budget, name = usd, stop.SpecName(c.Stop, i)
		}
	}
	switch {
	case name != "" && budget > ceiling:
		return refuse(p, "its stop condition %q allows $%g, above the policy's max_cost_usd %g", name, budget, ceiling)
	case name == "":
		c.Stop = append(c.Stop, config.Stop{Name: PolicyStopName + "-max-cost", Kind: stop.KindMaxCost, USD: ceiling})
	}
	return nil
}

// applyMaxIterations holds the job's iterations to the policy's
// max_iterations, adding a stop condition when none bounds the job.
func applyMaxIterations(p *config.WorkerPolicy, c *config.Config, g *config.PolicyGovernance) error {
	if g.MaxIterations == nil {
		return nil
	}
	ceiling := *g.MaxIterations
	if l := c.Loop.MaxIterations; l > ceiling {
		return refuse(p, "its loop.max_iterations %d is above the policy's max_iterations %d", l, ceiling)
	}
	switch n := specIterations(c.Stop); {
	case n > ceiling:
		return refuse(p, "its max_iterations stop condition allows %d iterations, above the policy's max_iterations %d", n, ceiling)
	case n == 0:
		c.Stop = append(c.Stop, config.Stop{Name: PolicyStopName + "-max-iterations", Kind: stop.KindMaxIterations, Max: ceiling})
	}
	return nil
}

// specIterations is the smallest iteration limit of the stop tables, or 0
// when none bounds the run.
func specIterations(specs []config.Stop) int {
	n := 0
	for i := range specs {
		if m := stop.SpecLimits(&specs[i]).Iterations; m > 0 && (n == 0 || m < n) {
			n = m
		}
	}
	return n
}

// autoCLI is the agent CLI "auto" stands for under a policy allowing
// allow: the first of them (but "command") on PATH, else the first of
// them, else "".
func autoCLI(allow []string) string {
	first := ""
	for _, a := range allow {
		if agent.TakesCommand(a) {
			continue
		}
		if first == "" {
			first = a
		}
		if name, _, err := agent.Resolve(a, nil); err == nil && name == a {
			return a
		}
	}
	return first
}

// firstProgram returns the first program c runs outside shell.exec (a
// command model's, a command agent's, a command stop condition's, a
// [[notify]] sink's, by its row: notify.Runs) that allow does not name,
// and where it is written, or "".
func firstProgram(c *config.Config, allow []string) (prog, where string) {
	if c.Model.Provider == "command" && len(c.Model.Command) > 0 && !slices.Contains(allow, c.Model.Command[0]) {
		return c.Model.Command[0], "model.command"
	}
	if a := c.Agent; a != nil && agent.TakesCommand(a.CLI) && len(a.Command) > 0 && !slices.Contains(allow, a.Command[0]) {
		return a.Command[0], "agent.command"
	}
	var walk func(stops []config.Stop) (string, string)
	walk = func(stops []config.Stop) (string, string) {
		for i, s := range stops {
			if prog := stop.SpecRuns(&s); prog != "" && !slices.Contains(allow, prog) {
				return prog, fmt.Sprintf("stop condition %q", stop.SpecName(stops, i))
			}
			if p, w := walk(s.Conditions); p != "" {
				return p, w
			}
		}
		return "", ""
	}
	if prog, where := walk(c.Stop); prog != "" {
		return prog, where
	}
	for i := range c.Notify {
		if prog := notify.Runs(&c.Notify[i]); prog != "" && !slices.Contains(allow, prog) {
			return prog, "[[notify]] " + notify.Name(c.Notify, i)
		}
	}
	for _, h := range c.Hook {
		if len(h.Cmd) > 0 && !slices.Contains(allow, h.Cmd[0]) {
			return h.Cmd[0], "[[hook]] " + h.Name
		}
	}
	return "", ""
}

// defaultKeyEnv is the variable an openai model's key is read from when
// the job names none (config's default for model.api_key_env).
const defaultKeyEnv = "OPENAI_API_KEY"

// applyReach holds what a job reaches beyond the processes it starts to
// the policy: every endpoint it names (model.base_url, a [[notify]] url)
// must be on a host the policy's hosts allow, and every variable of the
// worker's environment it reads (an openai model's api_key_env, a
// [[notify]] url_env or secret_env) must be named by the policy's
// env_allow, so a job cannot send a worker's secret to a host it picks.
// The worker's own settings stand: OPENAI_API_KEY sent to the default
// endpoint, or to the worker's own OPENAI_BASE_URL.
func applyReach(p *config.WorkerPolicy, c *config.Config, g *config.PolicyGovernance) error {
	operators := c.Model.BaseURL == "" || c.Model.BaseURL == os.Getenv("OPENAI_BASE_URL")
	if !operators {
		if err := allowedHost(p, g, "model.base_url", c.Model.BaseURL); err != nil {
			return err
		}
	}
	if k := c.Model.APIKeyEnv; c.Model.Provider == "openai" && !slices.Contains(g.EnvAllow, k) && (k != defaultKeyEnv || !operators) {
		return refuse(p, "its model.api_key_env reads %s from the worker's environment, which the policy's env_allow %q does not name", k, g.EnvAllow)
	}
	for i := range c.Notify {
		n := &c.Notify[i]
		where := "[[notify]] " + notify.Name(c.Notify, i)
		if n.URL != "" {
			if err := allowedHost(p, g, where+" url", n.URL); err != nil {
				return err
			}
		}
		for _, v := range []string{n.URLEnv, n.SecretEnv} {
			if v != "" && !slices.Contains(g.EnvAllow, v) {
				return refuse(p, "its %s reads %s from the worker's environment, which the policy's env_allow %q does not name", where, v, g.EnvAllow)
			}
		}
	}
	return nil
}

// allowedHost refuses raw, an endpoint the job names at where, unless its
// host is one of the policy's hosts.
func allowedHost(p *config.WorkerPolicy, g *config.PolicyGovernance, where, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return refuse(p, "its %s %q names no host", where, config.RedactURL(raw))
	}
	if !matchGlob(g.Hosts, strings.ToLower(u.Hostname())) {
		return refuse(p, "its %s sends to host %s, which the policy's hosts %q do not allow", where, u.Hostname(), g.Hosts)
	}
	return nil
}

// matchGlob reports whether s is one of globs or matches one of them
// (path.Match: '*' stands for any run of characters but '/').
func matchGlob(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok || g == s {
			return true
		}
	}
	return false
}
