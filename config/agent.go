package config

import (
	"regexp"
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
	// MaxRateLimitWait is the longest the loop waits for an account limit
	// to lift; a later reset ends the run as a limit. Default 6h.
	MaxRateLimitWait Duration `toml:"max_rate_limit_wait"`

	CLI         string      `toml:"cli"`         // claude | codex | gemini | opencode | command | auto
	Args        []string    `toml:"args"`        // extra arguments after the backend's own
	Command     []string    `toml:"command"`     // cli = "command": the argv (prompt on stdin, text out)
	PromptFile  string      `toml:"prompt_file"` // default [intent].prompt_file
	Timeout     Duration    `toml:"timeout"`     // the whole call; default 30m, "0s" for none
	IdleTimeout Duration    `toml:"idle_timeout"`
	Price       *AgentPrice `toml:"price"` // fallback when the CLI reports no cost
	// Env is [agent.env]: variables set for the agent's process on top of
	// ralph's environment (OpenCode reads its permissions from one). Not
	// for secrets: the config is recorded on the chain, so a name that
	// looks like one is refused.
	Env map[string]string `toml:"env"`
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

// envName is what a POSIX shell accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// secretName matches variable names that hold credentials by convention.
var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)`)

// validateAgentEnv checks [agent.env]: names a shell accepts, and none that
// holds a credential (the config is recorded on the chain; a secret belongs
// in the environment ralph runs in, which the agent inherits).
func (c *Config) validateAgentEnv(file string) error {
	for _, name := range sortedKeys(c.Agent.Env) {
		key := "agent.env." + name
		switch {
		case !envName.MatchString(name):
			return c.errAt(file, key, "[agent.env] name %q is not a variable name; use letters, digits and _ , not starting with a digit", name)
		case secretName.MatchString(name):
			return c.errAt(file, key, "[agent.env] %s looks like a credential, and the config is recorded on the run's chain; remove it and export it in the environment ralph runs in, which the agent inherits", name)
		case strings.ContainsRune(c.Agent.Env[name], 0):
			return c.errAt(file, key, "[agent.env] %s holds a NUL byte, which no environment variable can; remove it", name)
		}
	}
	return nil
}

// EnvList is [agent.env] as "NAME=value" entries, sorted by name.
func (a *Agent) EnvList() []string {
	var out []string
	for _, name := range sortedKeys(a.Env) {
		out = append(out, name+"="+a.Env[name])
	}
	return out
}

func (c *Config) validateAgent(file string) error {
	known := agent.Known()
	if err := c.validateAgentCLI(file, known); err != nil {
		return err
	}
	if err := c.validateAgentLimits(file); err != nil {
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
			return c.errAt(file, "model.provider", "provider \"agent\" needs an [agent] section; add one with cli = \"%s\" (or %s)", agent.CLIs()[0], strings.Join(agent.CLIs()[1:], ", "))
		}
		return nil
	}
	switch {
	case !slices.Contains(known, a.CLI):
		return c.errAt(file, "agent.cli", "agent.cli %q is not a known agent CLI; use one of %s", a.CLI, strings.Join(known, ", "))
	case agent.TakesCommand(a.CLI) && len(a.Command) == 0:
		return c.errAt(file, "agent.cli", "cli = \"command\" needs agent.command, the argv to run with the prompt on stdin, e.g. [\"my-agent\", \"--yes\"]")
	case agent.TakesCommand(a.CLI) && a.Command[0] == "":
		return c.errAt(file, "agent.command", "agent.command starts with an empty program name; put the program first")
	case !agent.TakesCommand(a.CLI) && len(a.Command) > 0:
		return c.errAt(file, "agent.command", "agent.command applies only to cli = \"command\"; remove it or set cli = \"command\"")
	case c.Model.Provider == "agent" && (c.Plan.RTFS != "" || c.Plan.File != ""):
		return c.errAt(file, "model.provider", "provider \"agent\" writes each iteration's plan itself; remove [plan] or choose provider \"static\"")
	case c.Model.Provider == "agent" && a.CLI != agent.Auto && !slices.Contains(c.Governance.AgentAllow, a.CLI):
		return c.errAt(file, "governance.agent_allow", "the agent loop runs cli %q, which governance.agent_allow %q does not list, so every iteration would be refused; add it", a.CLI, c.Governance.AgentAllow)
	case c.Model.Provider == "agent" && c.AgentPromptFile() == "" && c.Intent.Goal == "":
		return c.errAt(file, "agent", "the agent loop has no prompt; set [agent].prompt_file or [intent].prompt_file (e.g. \"PROMPT.md\")")
	}
	if err := c.validateAgentEnv(file); err != nil {
		return err
	}
	if p := a.Price; p != nil && (p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0) {
		return c.errAt(file, "agent.price", "[agent.price] must not be negative; prices are USD per million tokens")
	}
	return nil
}
