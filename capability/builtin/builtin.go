package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// Register adds every built-in capability to r.
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
	env := opts.Env
	if env == nil {
		env = filterEnv(os.Environ(), opts.SecretEnv)
	}
	caps := []*capability.Capability{echo()}
	caps = append(caps, mathCaps()...)
	caps = append(caps, (&shell{workdir: wd, allow: opts.ShellAllow, env: env}).capability())
	caps = append(caps, (&files{workdir: wd}).capabilities()...)
	// The agent CLI reads its own credentials (ANTHROPIC_API_KEY,
	// OPENAI_API_KEY for codex, …) from the environment: it gets all of it.
	agentEnv := opts.Env
	if agentEnv == nil {
		agentEnv = os.Environ()
	}
	caps = append(caps, (&agentRunner{o: opts.Agent, workdir: wd, env: agentEnv}).capability())
	if opts.KV != nil {
		caps = append(caps, kvCaps(opts.KV)...)
	}
	for _, c := range caps {
		if err := r.Register(c); err != nil {
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
