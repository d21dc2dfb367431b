package builtin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ralphloop/ralph/capability"
)

// Options configure the built-in capabilities.
type Options struct {
	Workdir    string   // where fs.* and shell.exec are confined; required
	ShellAllow []string // commands shell.exec may run (empty: none)
	Env        []string // environment for shell.exec children; nil means os.Environ() minus secrets
	SecretEnv  []string // names removed from the inherited environment (API keys)
	KV         KV       // storage for kv.*; nil leaves kv.* unregistered
	Agent      AgentOptions
}

// row is one built-in capability: its spec, where every fact the rest of
// ralph asks of it is a field (capability.Spec), and the handler a run
// gets of its host; a nil handler leaves the capability out of that run
// (kv.* without a KV).
type row struct {
	spec    *capability.Spec
	handler func(h *host) capability.Handler
}

// host is what a run gives the built-ins' handlers: its Options, resolved.
type host struct {
	Options
	workdir  string   // absolute, symlinks resolved
	env      []string // shell.exec's children: Env, else os.Environ() minus SecretEnv
	agentEnv []string // the agent CLI's: Env, else all of os.Environ()
}

// builtinRows is the one table of built-in capabilities (a file's rows
// sit in its file: mathRows, fileRows, kvRows). To add a capability: its
// row here, its spec and handler in a file of its own, and its id in the
// README's list; TestACapabilityIsOneRow shows that is all it takes.
func builtinRows() []row {
	rows := []row{echoRow()}
	rows = append(rows, mathRows()...)
	rows = append(rows, shellRow())
	rows = append(rows, fileRows()...)
	rows = append(rows, agentRow())
	return append(rows, kvRows()...)
}

// rows are the built-ins, filled in init; a test of the extension point
// adds one (register). Their specs are shared by every registry.
var (
	rowsMu sync.RWMutex
	rows   []row
)

func init() { rows = builtinRows() }

// register adds row r (a test of the extension point adds one). It
// refuses an id already taken and a row with no spec or handler.
func register(r row) error {
	if r.spec == nil || r.handler == nil || r.spec.ID == "" {
		return errors.New("a built-in capability needs a spec with an id and a handler")
	}
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if slices.ContainsFunc(rows, func(o row) bool { return o.spec.ID == r.spec.ID }) {
		return fmt.Errorf("capability %s is taken", r.spec.ID)
	}
	rows = append(rows, r)
	return nil
}

// unregister removes a row register added.
func unregister(id string) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	rows = slices.DeleteFunc(slices.Clone(rows), func(r row) bool { return r.spec.ID == id })
}

// Lookup is the spec of built-in capability id: what code that reads a
// run off its chain, with no registry at hand (a replay, the kv's rebuild,
// a view of a recorded run), asks of a call's capability.
func Lookup(id string) (*capability.Spec, bool) {
	rowsMu.RLock()
	defer rowsMu.RUnlock()
	for _, r := range rows {
		if r.spec.ID == id {
			return r.spec, true
		}
	}
	return nil, false
}

// Specs are the built-ins' specs, in the table's order.
func Specs() []*capability.Spec {
	rowsMu.RLock()
	defer rowsMu.RUnlock()
	out := make([]*capability.Spec, len(rows))
	for i, r := range rows {
		out[i] = r.spec
	}
	return out
}

// Register adds every built-in capability to r, each with the handler its
// row makes of opts.
func Register(r *capability.Registry, opts Options) error {
	wd, err := filepath.Abs(opts.Workdir)
	if err != nil {
		return fmt.Errorf("workdir %q: %w", opts.Workdir, err)
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		return fmt.Errorf("workdir %s is not a directory; create it or fix [loop].workdir", wd)
	}
	if resolved, err := filepath.EvalSymlinks(wd); err == nil {
		wd = resolved
	}
	h := &host{Options: opts, workdir: wd, env: opts.Env, agentEnv: opts.Env}
	if h.env == nil {
		h.env = filterEnv(os.Environ(), opts.SecretEnv)
	}
	// The agent CLI reads its own credentials (ANTHROPIC_API_KEY,
	// OPENAI_API_KEY for codex, …) from the environment: it gets all of it.
	if h.agentEnv == nil {
		h.agentEnv = os.Environ()
	}
	rowsMu.RLock()
	table := rows
	rowsMu.RUnlock()
	for _, row := range table {
		handler := row.handler(h)
		if handler == nil {
			continue
		}
		if err := r.Register(&capability.Capability{Spec: row.spec, Handler: handler}); err != nil {
			return err
		}
	}
	return nil
}

func filterEnv(env, secrets []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(secrets, name) {
			out = append(out, kv)
		}
	}
	return out
}
