package agent

import (
	"net"
	"net/url"
	"path/filepath"
	"slices"
)

// What a sandbox needs of a CLI (DESIGN §22): the directories it keeps
// its own state in, which it must write, and the hosts it reaches for
// its model. Each CLI's Facts carry them; StateDirs and APIHosts read
// them by name.

// Env reads the environment a CLI will run with (os.Getenv, or a test's).
type Env func(string) string

// StateDirs are the directories (and files) the CLI called name keeps its
// state in, for a user whose home is home: its login, settings and
// sessions. nil for a name with none (command) or no CLI.
func StateDirs(name, home string, env Env) []string {
	f, ok := Lookup(name)
	if !ok || f.StateDirs == nil {
		return nil
	}
	return f.StateDirs(home, env)
}

// APIHosts are the hosts the CLI called name reaches for its model ("host"
// for port 443, else "host:port"), the hosts its base-URL variables
// (Facts.BaseURLEnv, as env has them) point it at, and those its own
// configuration names (Facts.ConfigHosts) for a user whose home is home.
func APIHosts(name, home string, env Env) []string {
	f, _ := Lookup(name)
	hosts := slices.Clone(f.APIHosts)
	for _, v := range f.BaseURLEnv {
		hosts = appendHosts(hosts, env(v))
	}
	if f.ConfigHosts != nil {
		for _, h := range f.ConfigHosts(home, env) {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts
}

// orDefault is env's value of name, else def.
func orDefault(env Env, name, def string) string {
	if v := env(name); v != "" && filepath.IsAbs(v) {
		return v
	}
	return def
}

// StateFiles are the files among StateDirs(name, home, env), each with
// the document it starts as when a sandbox makes it (Facts.StateFiles);
// nil when all are directories.
func StateFiles(name, home string, env Env) map[string]string {
	f, ok := Lookup(name)
	if !ok || f.StateFiles == nil {
		return nil
	}
	return f.StateFiles(home, env)
}

// claudeStateFiles: ~/.claude.json, Claude Code's settings and login
// state, a JSON object (an empty file it takes for a corrupted one and
// moves aside); with CLAUDE_CONFIG_DIR it lives in that directory.
func claudeStateFiles(home string, env Env) map[string]string {
	if orDefault(env, "CLAUDE_CONFIG_DIR", "") != "" {
		return nil
	}
	return map[string]string{filepath.Join(home, ".claude.json"): "{}\n"}
}

func claudeStateDirs(home string, env Env) []string {
	if d := orDefault(env, "CLAUDE_CONFIG_DIR", ""); d != "" {
		return []string{d}
	}
	return []string{filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json")}
}

func codexStateDirs(home string, env Env) []string {
	return []string{orDefault(env, "CODEX_HOME", filepath.Join(home, ".codex"))}
}

func geminiStateDirs(home string, _ Env) []string {
	return []string{filepath.Join(home, ".gemini")}
}

// opencodeStateDirs are OpenCode's XDG directories: its data (auth.json,
// sessions, logs), config, cache and state.
func opencodeStateDirs(home string, env Env) []string {
	return []string{
		filepath.Join(orDefault(env, "XDG_DATA_HOME", filepath.Join(home, ".local", "share")), "opencode"),
		filepath.Join(orDefault(env, "XDG_CONFIG_HOME", filepath.Join(home, ".config")), "opencode"),
		filepath.Join(orDefault(env, "XDG_CACHE_HOME", filepath.Join(home, ".cache")), "opencode"),
		filepath.Join(orDefault(env, "XDG_STATE_HOME", filepath.Join(home, ".local", "state")), "opencode"),
	}
}

// URLHost is the "host:port" an http(s) URL reaches (its scheme's port
// when it names none), "host" alone for https on 443; "" for anything
// else.
func URLHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	port := u.Port()
	switch {
	case port == "" && u.Scheme == "http":
		port = "80"
	case port == "" || (port == "443" && u.Scheme == "https"):
		return u.Hostname()
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// geminiHosts are the Gemini API's and, for a Google login, the Code
// Assist API's and Google's OAuth hosts.
var geminiHosts = []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com",
	"oauth2.googleapis.com", "www.googleapis.com", "accounts.google.com"}

// opencodeHosts are the providers ralph init's models name (Anthropic's,
// OpenAI's) and models.dev, whose model list OpenCode reads; another
// provider of its config goes in [sandbox] hosts.
var opencodeHosts = []string{"api.anthropic.com", "api.openai.com", "models.dev"}
