package assemble

import (
	"context"
	"fmt"
	"os/exec"
	"slices"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// AgentCLI resolves [agent].cli to the backend agent.run runs ("auto": the
// first agent CLI on PATH). An agent CLI that is not on PATH is a config
// error naming agent.cli's line, raised before any store is opened. With
// no [agent] it returns "".
func AgentCLI(cfg *config.Config) (string, error) {
	a := cfg.Agent
	if a == nil {
		return "", nil
	}
	name, _, err := agent.Resolve(a.CLI, exec.LookPath)
	if err != nil {
		return "", configError(cfg.ErrorAt("agent.cli", err.Error()))
	}
	if agent.TakesCommand(name) {
		if _, err := exec.LookPath(a.Command[0]); err != nil {
			return "", configError(cfg.ErrorAt("agent.command",
				fmt.Sprintf("agent.command program %q is not on PATH; install it or give its full path", a.Command[0])))
		}
	}
	return name, nil
}

// CheckAgentBudget refuses an agent loop whose max_cost could never fire
// (its CLI reports no cost and nothing prices its model), before any store
// is opened; cli is the resolved [agent].cli.
func CheckAgentBudget(cfg *config.Config, cli string) error {
	return configError(checkAgentBudget(cfg, cli))
}

// checkAgentBudget is CheckAgentBudget's check: a spend limit can never
// fire when the agent loop's CLI (cli, resolved from "auto") reports no
// cost, and neither [agent.price] nor the built-in table prices its model.
// nil when no condition limits spend, there is no agent loop, or the spend
// can be counted.
func checkAgentBudget(c *config.Config, cli string) error {
	if c.Agent == nil || c.Model.Provider != "agent" || cli == "" || agent.ReportsCost(cli) {
		return nil
	}
	budget := ""
	for i := range c.Stop {
		if stop.SpecLimits(&c.Stop[i]).CostUSD > 0 {
			budget = stop.SpecName(c.Stop, i)
			break
		}
	}
	if budget == "" {
		return nil
	}
	if !agent.ReportsTokens(cli) {
		return c.ErrorAt("agent.cli", fmt.Sprintf("stop condition %q (max_cost) can never fire: cli %q reports neither cost nor tokens; bound the run with max_iterations or max_duration instead, or use an agent CLI that reports its usage", budget, cli))
	}
	if c.Agent.Price != nil {
		return nil
	}
	model := c.AgentModel(cli)
	if _, ok := agent.LookupPrice(model); ok {
		return nil
	}
	what := "names no model"
	if model != "" {
		what = fmt.Sprintf("runs model %q, which the built-in price table does not know", model)
	}
	key := "agent"
	if len(c.Agent.Args) > 0 {
		key = "agent.args"
	}
	return c.ErrorAt(key, fmt.Sprintf("stop condition %q (max_cost) can never fire: %s reports tokens but no cost, and [agent] %s; add an [agent.price] section (USD per million tokens: input, output, cache_read, cache_write) or pass a priced model in [agent] args (e.g. [\"--model\", \"%s\"])", budget, cli, what, exampleModel(cli)))
}

// exampleModel is a model of the price table the CLI runs, for the fix
// (its row's ExampleModel).
func exampleModel(cli string) string {
	if f, ok := agent.Lookup(cli); ok && f.ExampleModel != "" {
		return f.ExampleModel
	}
	return "claude-sonnet-4-5"
}

// agentOptions configures agent.run from [agent] and agent_allow; cli is
// the resolved [agent].cli ("" without [agent]).
func agentOptions(cfg *config.Config, cli string) builtin.AgentOptions {
	o := builtin.AgentOptions{CLI: cli, Allow: agentAllow(cfg, cli)}
	if a := cfg.Agent; a != nil {
		o.Command, o.Args, o.Env = a.Command, a.Args, a.EnvList()
		o.Timeout, o.IdleTimeout = a.Timeout.Duration, a.IdleTimeout.Duration
		if p := a.Price; p != nil {
			o.Price = &agent.Price{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite,
				Reasoning: p.Reasoning}
		}
	}
	return o
}

// agentAllow is [governance].agent_allow, where "auto" also permits the
// CLI it resolved to.
func agentAllow(cfg *config.Config, cli string) []string {
	allow := slices.Clone(cfg.Governance.AgentAllow)
	if cli != "" && slices.Contains(allow, "auto") && !slices.Contains(allow, cli) {
		allow = append(allow, cli)
	}
	return allow
}

// CheckAgentPlan admits the agent loop's first plan: governance judges
// every iteration's plan the same way, so one it refuses (a CLI outside
// agent_allow) would fail them all.
func CheckAgentPlan(ctx context.Context, eng *Engine, p loop.AgentPlanner) error {
	resp, err := p.Plan(ctx, arbiter.PlanRequest{Iteration: 1})
	if err != nil {
		return configError(err)
	}
	forms, err := rtfs.Read(resp.Source, "agent plan")
	if err != nil {
		return configError(fmt.Errorf("the agent loop's plan cannot be read: %w", err))
	}
	if d := eng.Governance.Admit("agent plan", forms); !d.Allowed {
		return configError(fmt.Errorf("governance refuses the agent loop's plan, so every iteration would fail: %w; fix [governance]", d.Err()))
	}
	return nil
}
