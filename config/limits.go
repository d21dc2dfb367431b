package config

import (
	"fmt"
	"time"

	"github.com/ralphloop/ralph/agent"
)

// validateAgentLimits checks the [agent] keys of limits and money:
// max_rate_limit_wait and [agent.price] reasoning.
func (c *Config) validateAgentLimits(file string) error {
	a := c.Agent
	if a == nil {
		return nil
	}
	if p := a.Price; p != nil && p.Reasoning < 0 {
		return c.errAt(file, "agent.price", "[agent.price] must not be negative; prices are USD per million tokens")
	}
	if a.MaxRateLimitWait.Duration <= 0 {
		return c.errAt(file, "agent.max_rate_limit_wait", "agent.max_rate_limit_wait must be positive (e.g. \"6h\"): it is the longest the loop waits for the agent's account limit to lift")
	}
	return nil
}

// MaxRateLimitWait is the longest the loop waits for an agent's account
// limit to lift: [agent] max_rate_limit_wait, else its default.
func (c *Config) MaxRateLimitWait() time.Duration {
	if c.Agent != nil && c.Agent.MaxRateLimitWait.Duration > 0 {
		return c.Agent.MaxRateLimitWait.Duration
	}
	return DefaultMaxRateLimitWait
}

// AgentModel is the model [agent] args name (--model X, -m X), else the
// one the CLI runs by default as far as ralph knows it, or "".
func (c *Config) AgentModel(cli string) string {
	if c.Agent == nil {
		return ""
	}
	return agent.ConfiguredModel(cli, c.Agent.Args)
}

// CheckAgentBudget refuses a max_cost stop condition that can never fire:
// the agent loop's CLI (cli, resolved from "auto") reports no cost, and
// neither [agent.price] nor the built-in table prices its model. nil when
// there is no max_cost, no agent loop, or a way to count the spend.
func (c *Config) CheckAgentBudget(cli string) error {
	if c.Agent == nil || c.Model.Provider != "agent" || cli == "" || agent.ReportsCost(cli) {
		return nil
	}
	budget := ""
	for _, s := range c.Stop {
		if s.Kind == KindMaxCost {
			budget = s.Name
			break
		}
	}
	if budget == "" {
		return nil
	}
	if !agent.ReportsTokens(cli) {
		return c.errAt(c.displayName(), "agent.cli", "stop condition %q (max_cost) can never fire: cli %q reports neither cost nor tokens; bound the run with max_iterations or max_duration instead, or use an agent CLI that reports its usage", budget, cli)
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
	return c.errAt(c.displayName(), key, "stop condition %q (max_cost) can never fire: %s reports tokens but no cost, and [agent] %s; add an [agent.price] section (USD per million tokens: input, output, cache_read, cache_write) or pass a priced model in [agent] args (e.g. [\"--model\", \"%s\"])", budget, cli, what, examplePriced(cli))
}

// examplePriced is a model of the price table the CLI runs, for the fix.
func examplePriced(cli string) string {
	switch cli {
	case "codex":
		return "gpt-5-codex"
	case "gemini":
		return "gemini-2.5-pro"
	}
	return "claude-sonnet-4-5"
}

// IterationLimit is the run's iteration budget: the smallest of the
// max_iterations stop conditions and [loop] max_iterations, or 0 for none.
func (c *Config) IterationLimit() int {
	return smallestLimit(c.Stop, KindMaxIterations, c.Loop.MaxIterations, func(s Stop) int { return s.Max })
}

// CostLimit is the run's spend budget in USD: the smallest of the
// max_cost stop conditions and [governance] max_cost_usd, or 0 for none.
func (c *Config) CostLimit() float64 {
	return smallestLimit(c.Stop, KindMaxCost, c.Governance.MaxCostUSD, func(s Stop) float64 { return s.USD })
}

// smallestLimit is the smallest positive of limit and of each stop of kind
// (its limit read by of), or 0 when none is positive.
func smallestLimit[T int | float64](stops []Stop, kind string, limit T, of func(Stop) T) T {
	n := max(limit, 0)
	for _, s := range stops {
		if v := of(s); s.Kind == kind && v > 0 && (n == 0 || v < n) {
			n = v
		}
	}
	return n
}
