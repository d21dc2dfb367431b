package assemble

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/sandbox"
)

// SandboxSpec is the run's [sandbox] (after --sandbox) as the sandbox
// package reads it, its mode and network checked by their owner
// (sandbox.ParseMode, ParseNetwork) and a bad value named at its
// file:line:col. No [sandbox] section is mode off, as before there was a
// sandbox; a section that names no mode is auto.
func SandboxSpec(cfg *config.Config) (sandbox.Spec, error) {
	s := cfg.Sandbox
	if s == nil {
		return sandbox.Spec{Mode: sandbox.Off}, nil
	}
	mode := sandbox.Auto
	if s.Mode != "" {
		m, err := sandbox.ParseMode(s.Mode)
		if err != nil {
			return sandbox.Spec{}, cfg.ErrorAtValue("sandbox.mode", err.Error()+"; write one of them, or leave [sandbox] out for none")
		}
		mode = m
	}
	network, err := sandbox.ParseNetwork(s.Network)
	if err != nil {
		return sandbox.Spec{}, cfg.ErrorAtValue("sandbox.network", err.Error()+"; leave it out for model, the default")
	}
	for _, l := range []struct {
		key  string
		list []string
	}{{"read", s.Read}, {"write", s.Write}, {"hide", s.Hide}, {"hosts", s.Hosts}} {
		if slices.Contains(l.list, "") {
			return sandbox.Spec{}, cfg.ErrorAtValue("sandbox."+l.key, "sandbox."+l.key+" has an empty entry; remove it")
		}
	}
	return sandbox.Spec{Mode: mode, Network: network, Read: s.Read, Write: s.Write, Hide: s.Hide, Hosts: s.Hosts}, nil
}

// Sandboxed says whether cfg runs its processes in a sandbox: a
// [sandbox] (or --sandbox) whose mode is not off.
func Sandboxed(cfg *config.Config) bool {
	return cfg != nil && cfg.Sandbox != nil && cfg.Sandbox.Mode != string(sandbox.Off)
}

// SandboxBounds is what the run adds to its Spec: the workdir to write;
// its store, ralph's key directory and witness directory and hidden
// (more files to hide, such as the RALPH_KEY the store signs with) never
// visible; the agent CLIs' state directories to write and hosts to reach
// (their descriptors', agent.StateDirs and APIHosts, with [model]
// base_url's host); and the per-project cache root under ralph's state
// directory. Each [sandbox] write path must be a directory that does not
// hold the store.
func SandboxBounds(cfg *config.Config, storeDir string, hidden []string) (sandbox.Bounds, error) {
	b := sandbox.Bounds{Workdir: cfg.Loop.Workdir, Hidden: appendNew(nil, storeDir)}
	if d, err := ledger.DefaultKeyDir(); err == nil {
		b.Hidden = append(b.Hidden, d)
	}
	if d, err := ledger.DefaultWitnessDir(); err == nil {
		b.Hidden = append(b.Hidden, d)
	}
	b.Hidden = append(b.Hidden, slices.DeleteFunc(slices.Clone(hidden), func(p string) bool { return p == "" })...)
	if err := checkSandboxWrites(cfg, storeDir); err != nil {
		return sandbox.Bounds{}, err
	}
	home, _ := os.UserHomeDir()
	env := agentEnv(cfg)
	for _, cli := range sandboxCLIs(cfg) {
		b.StateDirs = appendNew(b.StateDirs, agent.StateDirs(cli, home, env)...)
		for p, doc := range agent.StateFiles(cli, home, env) {
			if b.StateFiles == nil {
				b.StateFiles = map[string]string{}
			}
			b.StateFiles[p] = doc
		}
		b.Hosts = appendNew(b.Hosts, agent.APIHosts(cli, home, env)...)
	}
	if h := agent.URLHost(cfg.Model.BaseURL); h != "" {
		b.Hosts = appendNew(b.Hosts, h)
	}
	state, err := StateDir()
	if err != nil {
		return sandbox.Bounds{}, err
	}
	b.CacheRoot = filepath.Join(state, "cache", projectKey(cfg.Loop.Workdir))
	return b, nil
}

// checkSandboxWrites checks each [sandbox] write path: a directory that
// exists and does not hold the store.
func checkSandboxWrites(cfg *config.Config, storeDir string) error {
	if cfg.Sandbox == nil {
		return nil
	}
	for _, w := range cfg.Sandbox.Write {
		fi, err := os.Stat(w)
		switch {
		case err != nil:
			return cfg.ErrorAtValue("sandbox.write", fmt.Sprintf("sandbox.write names %s, which cannot be read (%v); create it or remove it from the list", w, errors.Unwrap(err)))
		case !fi.IsDir():
			return cfg.ErrorAtValue("sandbox.write", fmt.Sprintf("sandbox.write names %s, which is not a directory; list directories", w))
		case within(storeDir, w):
			return cfg.ErrorAtValue("sandbox.write", fmt.Sprintf("sandbox.write names %s, which holds the run's store %s; list a directory that does not, or move the store with --store", w, storeDir))
		}
	}
	return nil
}

// sandboxCLIs are the agent CLIs a run may start: [agent] cli (auto as
// this machine resolves it) and governance.agent_allow's.
func sandboxCLIs(cfg *config.Config) []string {
	var clis []string
	if cfg.Agent != nil {
		name := cfg.Agent.CLI
		if name == agent.Auto {
			name, _, _ = agent.Resolve(name, nil)
		}
		clis = append(clis, name)
	}
	return appendNew(clis, cfg.Governance.AgentAllow...)
}

// agentEnv is the environment an agent call runs with: [agent.env] over
// ralph's own.
func agentEnv(cfg *config.Config) agent.Env {
	return func(k string) string {
		if cfg.Agent != nil {
			if v, ok := cfg.Agent.Env[k]; ok {
				return v
			}
		}
		return os.Getenv(k)
	}
}

func appendNew(to []string, add ...string) []string {
	for _, s := range add {
		if s != "" && !slices.Contains(to, s) {
			to = append(to, s)
		}
	}
	return to
}

// StateDir is ralph's state directory: $XDG_STATE_HOME/ralph, else
// ~/.local/state/ralph.
func StateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "ralph"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find ralph's state directory: %w; set XDG_STATE_HOME", err)
	}
	return filepath.Join(home, ".local", "state", "ralph"), nil
}

// projectKey names a project's directory under ralph's state directory:
// the directory's base name and a hash of its absolute path.
func projectKey(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Base(abs) + "-" + hex.EncodeToString(sum[:6])
}

// within reports whether p is dir or inside it, symbolic links in both
// resolved as far as they exist.
func within(p, dir string) bool {
	rel, err := filepath.Rel(resolved(dir), resolved(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolved is p made absolute with the symbolic links of its longest
// existing prefix resolved.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for cur := abs; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// StorePlace is where a run's store goes, given the directory its flags
// and config name (dir) and whether --store named it (flagged). Without a
// sandbox it is dir. Under one, the store must never be in the
// sandbox's view, and the workdir always is: the default store
// (<config dir>/.ralph) when it sits in the workdir moves to ralph's state
// directory (moved is true, and the run says so); a store named inside
// the workdir is refused with the fix.
func StorePlace(cfg *config.Config, dir string, flagged bool) (place string, moved bool, err error) {
	if !Sandboxed(cfg) || !within(dir, cfg.Loop.Workdir) {
		return dir, false, nil
	}
	if !flagged && resolved(dir) == resolved(defaultStoreDir(cfg)) {
		state, err := StateDir()
		if err != nil {
			return "", false, err
		}
		return filepath.Join(state, "stores", projectKey(cfg.Loop.Workdir)), true, nil
	}
	named := "store.dir or RALPH_STORE names"
	if flagged {
		named = "--store names"
	}
	return "", false, &ConfigError{Err: fmt.Errorf("%s the store %s, inside the workdir %s, which the sandbox lets the agent read and write; "+
		"name a store outside the workdir, or leave --store, RALPH_STORE and store.dir unset to keep it in ralph's state directory", named, dir, cfg.Loop.Workdir)}
}

// defaultStoreDir is the store a config names when nothing names one:
// .ralph beside its file (in the current directory without one).
func defaultStoreDir(cfg *config.Config) string {
	if cfg.File == "" {
		return ".ralph"
	}
	return filepath.Join(filepath.Dir(cfg.File), ".ralph")
}
