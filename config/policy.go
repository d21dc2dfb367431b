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

	lines *lineIndex
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
	// Hosts are the host names (globs, '*' within one '.'-free run) a job's
	// endpoints may name: model.base_url, a [[notify]] url. Empty: none.
	Hosts []string `toml:"hosts"`
	// EnvAllow names the variables of the worker's environment a job may
	// read: model.api_key_env, a [[notify]] url_env or secret_env. Empty:
	// none (but OPENAI_API_KEY sent to the default endpoint).
	EnvAllow []string `toml:"env_allow"`
	// Sandbox is the [sandbox] mode every job runs under ("" none
	// required): a job asking for off, or for no sandbox, is refused.
	// Its value is checked by its owner (fleet.CheckPolicy).
	Sandbox string `toml:"sandbox"`
}

// policyKeys lists the keys a policy's [governance] takes, for messages.
const policyKeys = "allow, deny, shell_allow, agent_allow, max_cost_usd, max_iterations, max_steps, workspaces, hosts, env_allow and sandbox"

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
	lines := indexLines(data)
	p := &WorkerPolicy{File: file, lines: lines}
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
		if !slices.Contains(agent.Known(), s) || s == agent.Auto {
			return nil, at("agent_allow", "governance.agent_allow names %q, which is not an agent CLI; list some of %s", s,
				strings.Join(slices.DeleteFunc(agent.Known(), func(n string) bool { return n == agent.Auto }), ", "))
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

// ErrorAt is an error about the policy's [governance] key, naming the
// file, the line and the column of its value.
func (p *WorkerPolicy) ErrorAt(key, msg string) error {
	e := &Error{File: p.File, Msg: msg}
	if p.lines != nil {
		path := "governance." + key
		e.Line = p.lines.findPath(path)
		if l, ok := p.lines.keys[path]; ok && l == e.Line {
			e.Col = p.lines.cols[path]
		}
	}
	return e
}

// Name says which policy p is, for messages.
func (p *WorkerPolicy) Name() string {
	if p == nil || p.File == "" {
		return "the worker's default policy (no --policy: no shell.exec, no program, no agent)"
	}
	return "worker policy " + p.File
}
