package config

import (
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
