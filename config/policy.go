package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/ralphloop/ralph/agent"
)

// WorkerPolicy is a fleet worker's own ceiling (`ralph worker --policy
// worker.toml`): every job's config is held to it (Apply) before anything
// of the job runs. The zero policy, a worker's without --policy, lets a job
// run no shell.exec, no program and no agent.
type WorkerPolicy struct {
	File       string           `toml:"-"` // the file it was read from ("" for the default policy)
	Governance PolicyGovernance `toml:"governance"`
}

// PolicyGovernance is a policy's [governance] table: the keys of a run
// config's [governance] where they exist, plus max_iterations and the
// workspaces a job may name.
type PolicyGovernance struct {
	Allow         []string `toml:"allow"`          // capability globs a job may use; empty: every one
	Deny          []string `toml:"deny"`           // capability globs no job may use
	ShellAllow    []string `toml:"shell_allow"`    // programs a job may run (shell.exec, command stops, a command model)
	AgentAllow    []string `toml:"agent_allow"`    // agent CLIs a job may run
	MaxCostUSD    *float64 `toml:"max_cost_usd"`   // a job's cost budget is at most this
	MaxIterations *int     `toml:"max_iterations"` // a job's iteration budget is at most this
	MaxSteps      int      `toml:"max_steps"`      // a job's max_steps is at most this
	Workspaces    []string `toml:"workspaces"`     // workspace URL globs ('*' stays within one '/'-separated segment); empty: any
}

// policyKeys lists the keys a policy's [governance] takes, for messages.
const policyKeys = "allow, deny, shell_allow, agent_allow, max_cost_usd, max_iterations, max_steps and workspaces"

// LoadPolicy reads and checks a worker policy file.
func LoadPolicy(file string) (*WorkerPolicy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("worker policy %s does not exist; write one with a [governance] table (docs/fleet.md, \"Worker policy\")", file)
		}
		return nil, fmt.Errorf("read worker policy %s: %w", file, err)
	}
	return ParsePolicy(data, file)
}

// ParsePolicy is LoadPolicy on bytes; file names them in messages.
func ParsePolicy(data []byte, file string) (*WorkerPolicy, error) {
	p := &WorkerPolicy{File: file}
	lines := indexLines(data)
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(p)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: file, Line: pe.Position.Line, Col: pe.Position.Col, Msg: parseMessage(pe, data)}
		}
		if te := typeErrorIn(reflect.TypeOf(WorkerPolicy{}), lines, file, err); te != nil {
			return nil, te
		}
		return nil, &Error{File: file, Msg: decodeMessage(err)}
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, &Error{File: file, Line: lines.find(und[0]),
			Msg: fmt.Sprintf("unknown key %s; a worker policy has one [governance] table with %s", und[0], policyKeys)}
	}
	at := func(key, format string, args ...any) error {
		return &Error{File: file, Line: lines.findPath("governance." + key), Msg: fmt.Sprintf(format, args...)}
	}
	g := p.Governance
	for _, l := range []struct {
		key   string
		globs []string
	}{{"allow", g.Allow}, {"deny", g.Deny}, {"workspaces", g.Workspaces}} {
		for _, s := range l.globs {
			if _, err := path.Match(s, ""); err != nil || s == "" {
				return nil, at(l.key, "governance.%s has a bad glob %q; write a capability id or URL where '*' stands for any run of characters but '/'", l.key, s)
			}
		}
	}
	for _, s := range g.ShellAllow {
		if strings.TrimSpace(s) == "" {
			return nil, at("shell_allow", "governance.shell_allow has an empty name; list programs by the name a job runs them by, such as \"go\"")
		}
	}
	for _, s := range g.AgentAllow {
		if !slices.Contains(agent.Known(), s) || s == "auto" {
			return nil, at("agent_allow", "governance.agent_allow names %q, which is not an agent CLI; list some of %s", s,
				strings.Join(slices.DeleteFunc(agent.Known(), func(n string) bool { return n == "auto" }), ", "))
		}
	}
	switch {
	case g.MaxCostUSD != nil && *g.MaxCostUSD <= 0:
		return nil, at("max_cost_usd", "governance.max_cost_usd must be more than 0, got %g; leave it out for no cost ceiling", *g.MaxCostUSD)
	case g.MaxIterations != nil && *g.MaxIterations < 1:
		return nil, at("max_iterations", "governance.max_iterations must be at least 1, got %d; leave it out for no iteration ceiling", *g.MaxIterations)
	case g.MaxSteps < 0:
		return nil, at("max_steps", "governance.max_steps must not be negative, got %d", g.MaxSteps)
	}
	return p, nil
}

// Name says which policy p is, for messages.
func (p *WorkerPolicy) Name() string {
	if p == nil || p.File == "" {
		return "the worker's default policy (no --policy: no shell.exec, no program, no agent)"
	}
	return "worker policy " + p.File
}

// PolicyStopName names the stop conditions Apply adds for a policy's
// ceilings.
const PolicyStopName = "worker-policy"

// Apply holds c, a job's config, and workspace, the URL it is cloned from
// ("" none), to the policy: c's governance becomes the smaller of the two
// (allow narrowed to the policy's, deny joined, max_steps and the budgets
// the lower, a ceiling the job does not bound added as a stop condition),
// and a job that needs more than the policy allows is an error saying what
// and the fix. A nil policy is the default one.
func (p *WorkerPolicy) Apply(c *Config, workspace string) error {
	var g PolicyGovernance
	if p != nil {
		g = p.Governance
	}
	if workspace != "" && len(g.Workspaces) > 0 && !matchGlob(g.Workspaces, workspace) {
		return p.refuse("its workspace %s matches none of the policy's workspaces %q", workspace, g.Workspaces)
	}
	for _, s := range c.Governance.ShellAllow {
		if !slices.Contains(g.ShellAllow, s) {
			return p.refuse("its [governance].shell_allow names %q, which the policy's shell_allow %q does not", s, g.ShellAllow)
		}
	}
	if prog, where := c.firstProgram(g.ShellAllow); prog != "" {
		return p.refuse("its %s runs %q, which the policy's shell_allow %q does not name", where, prog, g.ShellAllow)
	}
	if err := p.applyAgents(c, &g); err != nil {
		return err
	}
	if err := p.applyLimits(&c.Governance, &g); err != nil {
		return err
	}
	if err := p.applyMaxCost(c, &g); err != nil {
		return err
	}
	return p.applyMaxIterations(c, &g)
}

// refuse says that the policy refuses the job, why, and the fix.
func (p *WorkerPolicy) refuse(format string, args ...any) error {
	return fmt.Errorf("job refused by %s: %s; run it on a worker whose --policy allows it", p.Name(), fmt.Sprintf(format, args...))
}

// applyAgents resolves agent CLI "auto" to the policy's first CLI on this
// worker's PATH and refuses an agent CLI the policy does not allow.
func (p *WorkerPolicy) applyAgents(c *Config, g *PolicyGovernance) error {
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
		return p.refuse("its [agent] runs the agent CLI %q, which the policy's agent_allow %q does not name", c.Agent.CLI, g.AgentAllow)
	}
	for _, a := range jg.AgentAllow {
		if !slices.Contains(g.AgentAllow, a) {
			return p.refuse("its [governance].agent_allow names %q, which the policy's agent_allow %q does not", a, g.AgentAllow)
		}
	}
	return nil
}

// applyLimits narrows the job's allow to the policy's, joins the denies
// and takes the lower max_steps.
func (p *WorkerPolicy) applyLimits(jg *Governance, g *PolicyGovernance) error {
	if len(g.Allow) > 0 {
		if len(jg.Allow) == 0 {
			jg.Allow = slices.Clone(g.Allow)
		}
		for _, a := range jg.Allow {
			if !matchGlob(g.Allow, a) {
				return p.refuse("its [governance].allow names %q, beyond the policy's allow %q", a, g.Allow)
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
			return p.refuse("its [governance].max_steps %d is above the policy's max_steps %d", jg.MaxSteps, g.MaxSteps)
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
func (p *WorkerPolicy) applyMaxCost(c *Config, g *PolicyGovernance) error {
	if g.MaxCostUSD == nil {
		return nil
	}
	ceiling := *g.MaxCostUSD
	if c.Governance.MaxCostUSD > ceiling {
		return p.refuse("its [governance].max_cost_usd %g is above the policy's max_cost_usd %g", c.Governance.MaxCostUSD, ceiling)
	}
	budget, name := 0.0, ""
	for _, s := range c.Stop {
		if s.Kind == KindMaxCost && (name == "" || s.USD < budget) {
			budget, name = s.USD, s.Name
		}
	}
	switch {
	case name != "" && budget > ceiling:
		return p.refuse("its stop condition %q allows $%g, above the policy's max_cost_usd %g", name, budget, ceiling)
	case name == "":
		c.Stop = append(c.Stop, Stop{Name: PolicyStopName + "-max-cost", Kind: KindMaxCost, USD: ceiling})
	}
	return nil
}

// applyMaxIterations holds the job's iterations to the policy's
// max_iterations, adding a stop condition when none bounds the job.
func (p *WorkerPolicy) applyMaxIterations(c *Config, g *PolicyGovernance) error {
	if g.MaxIterations == nil {
		return nil
	}
	ceiling := *g.MaxIterations
	if l := c.Loop.MaxIterations; l > ceiling {
		return p.refuse("its loop.max_iterations %d is above the policy's max_iterations %d", l, ceiling)
	}
	switch n := c.MaxIterations(); {
	case n > ceiling:
		return p.refuse("its max_iterations stop condition allows %d iterations, above the policy's max_iterations %d", n, ceiling)
	case n == 0:
		c.Stop = append(c.Stop, Stop{Name: PolicyStopName + "-max-iterations", Kind: KindMaxIterations, Max: ceiling})
	}
	return nil
}

// autoCLI is the agent CLI "auto" stands for under a policy allowing
// allow: the first of them (but "command") on PATH, else the first of
// them, else "".
func autoCLI(allow []string) string {
	first := ""
	for _, a := range allow {
		if a == "command" {
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
// command stop condition's, a command model's) that allow does not name,
// and where it is written, or "".
func (c *Config) firstProgram(allow []string) (prog, where string) {
	if c.Model.Provider == "command" && len(c.Model.Command) > 0 && !slices.Contains(allow, c.Model.Command[0]) {
		return c.Model.Command[0], "model.command"
	}
	if a := c.Agent; a != nil && a.CLI == "command" && len(a.Command) > 0 && !slices.Contains(allow, a.Command[0]) {
		return a.Command[0], "agent.command"
	}
	var walk func(stops []Stop) (string, string)
	walk = func(stops []Stop) (string, string) {
		for _, s := range stops {
			if s.Kind == KindCommand && len(s.Cmd) > 0 && !slices.Contains(allow, s.Cmd[0]) {
				return s.Cmd[0], fmt.Sprintf("stop condition %q", s.Name)
			}
			if p, w := walk(s.Conditions); p != "" {
				return p, w
			}
		}
		return "", ""
	}
	return walk(c.Stop)
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
