package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/ralphloop/ralph/agent"
)

// Agent is the [agent] section: the coding agent CLI that agent.run runs
// (DESIGN §12). With [agent] and no [plan], every iteration's plan is one
// agent.run call on the prompt (provider "agent").
type Agent struct {
	CLI         string      `toml:"cli"`         // claude | codex | gemini | opencode | command | auto
	Args        []string    `toml:"args"`        // extra arguments after the backend's own
	Command     []string    `toml:"command"`     // cli = "command": the argv (prompt on stdin, text out)
	PromptFile  string      `toml:"prompt_file"` // default [intent].prompt_file
	Timeout     Duration    `toml:"timeout"`     // the whole call; default 30m, "0s" for none
	IdleTimeout Duration    `toml:"idle_timeout"`
	Price       *AgentPrice `toml:"price"` // fallback when the CLI reports no cost
	// MaxRateLimitWait is the longest the loop waits for an account limit
	// to lift; a later reset ends the run as a limit. Default 6h.
	MaxRateLimitWait Duration `toml:"max_rate_limit_wait"`
}

// AgentPrice is [agent.price]: USD per million tokens, used to price a
// call whose CLI reports tokens but no cost.
type AgentPrice struct {
	Input      float64 `toml:"input"`
	Output     float64 `toml:"output"`
	CacheRead  float64 `toml:"cache_read"`
	CacheWrite float64 `toml:"cache_write"`
	Reasoning  float64 `toml:"reasoning"` // 0: reasoning tokens are priced as output
}

// Defaults of [agent].
const (
	DefaultAgentCLI         = "auto"
	DefaultAgentTimeout     = 30 * time.Minute
	DefaultAgentIdleTimeout = 5 * time.Minute
	DefaultMaxRateLimitWait = 6 * time.Hour
)

// agentDefaults completes [agent] after decoding; md says which keys the
// file set, so "0s" (no timeout) is kept as written.
func (c *Config) agentDefaults(md toml.MetaData) {
	a := c.Agent
	if a == nil {
		return
	}
	if a.CLI == "" {
		a.CLI = DefaultAgentCLI
	}
	if !md.IsDefined("agent", "timeout") {
		a.Timeout.Duration = DefaultAgentTimeout
	}
	if !md.IsDefined("agent", "idle_timeout") {
		a.IdleTimeout.Duration = DefaultAgentIdleTimeout
	}
	if !md.IsDefined("agent", "max_rate_limit_wait") {
		a.MaxRateLimitWait.Duration = DefaultMaxRateLimitWait
	}
	if !md.IsDefined("governance", "agent_allow") {
		c.Governance.AgentAllow = []string{a.CLI}
	}
}

// AgentPromptFile is the prompt an agent loop sends: [agent].prompt_file,
// else [intent].prompt_file ("" when neither is set).
func (c *Config) AgentPromptFile() string {
	if c.Agent != nil && c.Agent.PromptFile != "" {
		return c.Agent.PromptFile
	}
	return c.Intent.PromptFile
}

// MaxIterations is the smallest max_iterations of the stop conditions, or
// 0 when none bounds the run.
func (c *Config) MaxIterations() int {
	n := 0
	for _, s := range c.Stop {
		if s.Kind == "max_iterations" && (n == 0 || s.Max < n) {
			n = s.Max
		}
	}
	return n
}

func (c *Config) validateAgent(file string) error {
	known := agent.Known()
	if err := c.validateAgentCLI(file, known); err != nil {
		return err
	}
	for _, name := range c.Governance.AgentAllow {
		if !slices.Contains(known, name) {
			return c.errAt(file, "governance.agent_allow", "governance.agent_allow names %q, which is not a known agent CLI; use %s", name, strings.Join(known, ", "))
		}
	}
	return nil
}

func (c *Config) validateAgentCLI(file string, known []string) error {
	a := c.Agent
	if a == nil {
		if c.Model.Provider == "agent" {
			return c.errAt(file, "model.provider", "provider \"agent\" needs an [agent] section; add one with cli = \"claude\" (or codex, gemini, opencode)")
		}
		return nil
	}
	switch {
	case !slices.Contains(known, a.CLI):
		return c.errAt(file, "agent.cli", "agent.cli %q is not a known agent CLI; use one of %s", a.CLI, strings.Join(known, ", "))
	case a.CLI == "command" && len(a.Command) == 0:
		return c.errAt(file, "agent.cli", "cli = \"command\" needs agent.command, the argv to run with the prompt on stdin, e.g. [\"my-agent\", \"--yes\"]")
	case a.CLI == "command" && a.Command[0] == "":
		return c.errAt(file, "agent.command", "agent.command starts with an empty program name; put the program first")
	case a.CLI != "command" && len(a.Command) > 0:
		return c.errAt(file, "agent.command", "agent.command applies only to cli = \"command\"; remove it or set cli = \"command\"")
	case c.Model.Provider == "agent" && (c.Plan.RTFS != "" || c.Plan.File != ""):
		return c.errAt(file, "model.provider", "provider \"agent\" writes each iteration's plan itself; remove [plan] or choose provider \"static\"")
	case c.Model.Provider == "agent" && a.CLI != "auto" && !slices.Contains(c.Governance.AgentAllow, a.CLI):
		return c.errAt(file, "governance.agent_allow", "the agent loop runs cli %q, which governance.agent_allow %q does not list, so every iteration would be refused; add it", a.CLI, c.Governance.AgentAllow)
	case c.Model.Provider == "agent" && c.AgentPromptFile() == "" && c.Intent.Goal == "":
		return c.errAt(file, "agent", "the agent loop has no prompt; set [agent].prompt_file or [intent].prompt_file (e.g. \"PROMPT.md\")")
	}
	if p := a.Price; p != nil && (p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0 || p.Reasoning < 0) {
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
	if m := agent.ArgsModel(c.Agent.Args); m != "" {
		return m
	}
	return agent.DefaultModel(cli)
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
		if s.Kind == "max_cost" {
			budget = s.Name
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
	return c.ErrorAt(key, fmt.Sprintf("stop condition %q (max_cost) can never fire: %s reports tokens but no cost, and [agent] %s; add an [agent.price] section (USD per million tokens: input, output, cache_read, cache_write) or pass a priced model in [agent] args (e.g. [\"--model\", \"%s\"])", budget, cli, what, examplePriced(cli)))
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
