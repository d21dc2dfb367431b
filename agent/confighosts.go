package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"

	"github.com/BurntSushi/toml"
)

// The hosts a CLI's own configuration points it at: a model provider the
// user configured there (codex's [model_providers.<id>] base_url,
// OpenCode's provider.<id>.options.baseURL) is the CLI's model as much as
// its built-in one, so a sandbox's proxy lets it through (Facts.ConfigHosts).
// Only the user's configuration is read, never a project's: a file in the
// workdir does not widen what the run may reach. A file that cannot be
// read or parsed gives no hosts: the CLI reports its own configuration's
// errors when it starts, and a host it then needs is refused by name, with
// the [sandbox] hosts line that allows it.

// codexConfig is what codexConfigHosts reads of a codex config.toml: the
// base URLs of the built-in OpenAI provider and ChatGPT login
// (openai_base_url, chatgpt_base_url) and of each [model_providers.<id>]
// (developers.openai.com/codex/config-reference).
type codexConfig struct {
	OpenAIBaseURL  string `toml:"openai_base_url"`
	ChatGPTBaseURL string `toml:"chatgpt_base_url"`
	ModelProviders map[string]struct {
		BaseURL string `toml:"base_url"`
	} `toml:"model_providers"`
}

// codexConfigSandboxMode is sandbox_mode in $CODEX_HOME/config.toml ("":
// none, or a file codex could not read either).
func codexConfigSandboxMode(home string, env Env) string {
	var c struct {
		SandboxMode string `toml:"sandbox_mode"`
	}
	if _, err := toml.DecodeFile(filepath.Join(codexStateDirs(home, env)[0], "config.toml"), &c); err != nil {
		return "" // see the comment at the top of the file
	}
	return c.SandboxMode
}

// codexConfigHosts are the hosts of the base URLs in $CODEX_HOME/config.toml
// and in its profiles, $CODEX_HOME/<name>.config.toml (`codex -p name`).
func codexConfigHosts(home string, env Env) []string {
	dir := codexStateDirs(home, env)[0]
	files, _ := filepath.Glob(filepath.Join(dir, "*.config.toml")) // only ErrBadPattern, which this pattern is not
	files = append([]string{filepath.Join(dir, "config.toml")}, files...)
	var hosts []string
	for _, f := range files {
		var c codexConfig
		if _, err := toml.DecodeFile(f, &c); err != nil {
			continue // see the comment at the top of the file
		}
		urls := []string{c.OpenAIBaseURL, c.ChatGPTBaseURL}
		for _, id := range sortedKeys(c.ModelProviders) {
			urls = append(urls, c.ModelProviders[id].BaseURL)
		}
		hosts = appendHosts(hosts, urls...)
	}
	return hosts
}

// opencodeConfig is what opencodeConfigHosts reads of an OpenCode config:
// each provider's options.baseURL (opencode.ai/docs/config,
// opencode.ai/docs/providers).
type opencodeConfig struct {
	Provider map[string]struct {
		Options struct {
			BaseURL string `json:"baseURL"`
		} `json:"options"`
	} `json:"provider"`
}

// opencodeConfigHosts are the hosts of the providers' base URLs in the
// user's OpenCode configuration: the global config
// ($XDG_CONFIG_HOME/opencode/opencode.json, .jsonc or config.json), the
// file OPENCODE_CONFIG names, and the JSON OPENCODE_CONFIG_CONTENT holds.
// A base URL written "{env:NAME}" is NAME's value, as OpenCode reads it.
func opencodeConfigHosts(home string, env Env) []string {
	dir := filepath.Join(orDefault(env, "XDG_CONFIG_HOME", filepath.Join(home, ".config")), "opencode")
	var docs [][]byte
	for _, f := range []string{filepath.Join(dir, "config.json"), filepath.Join(dir, "opencode.json"),
		filepath.Join(dir, "opencode.jsonc"), orDefault(env, "OPENCODE_CONFIG", "")} {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil {
			docs = append(docs, b)
		}
	}
	if s := env("OPENCODE_CONFIG_CONTENT"); s != "" {
		docs = append(docs, []byte(s))
	}
	var hosts []string
	for _, b := range docs {
		var c opencodeConfig
		if err := json.Unmarshal(stripJSONC(b), &c); err != nil {
			continue // see the comment at the top of the file
		}
		for _, id := range sortedKeys(c.Provider) {
			hosts = appendHosts(hosts, opencodeEnvRef(c.Provider[id].Options.BaseURL, env))
		}
	}
	return hosts
}

// opencodeEnvVar is OpenCode's variable substitution in a config value.
var opencodeEnvVar = regexp.MustCompile(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// opencodeEnvRef is v with each {env:NAME} replaced by NAME's value.
func opencodeEnvRef(v string, env Env) string {
	return opencodeEnvVar.ReplaceAllStringFunc(v, func(m string) string {
		return env(opencodeEnvVar.FindStringSubmatch(m)[1])
	})
}

// appendHosts adds the host of each URL (URLHost) not there already.
func appendHosts(hosts []string, urls ...string) []string {
	for _, u := range urls {
		if h := URLHost(u); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stripJSONC makes JSONC (JSON with // and /* */ comments and trailing
// commas, as OpenCode reads its .jsonc files) JSON: comments outside
// strings become spaces, and a comma followed only by space before a
// closing bracket or brace goes. Plain JSON comes back unchanged; what is
// not JSONC stays invalid for the JSON decoder to refuse.
func stripJSONC(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			j := stringEnd(b, i)
			out = append(out, b[i:j]...)
			i = j - 1
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			out = append(out, '\n')
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			i += 2
			for i+1 < len(b) && !(b[i] == '*' && b[i+1] == '/') {
				i++
			}
			i++ // onto the closing '/' (or past the end of an unclosed comment)
			out = append(out, ' ')
		case c == ']' || c == '}':
			out = append(dropTrailingComma(out), c)
		default:
			out = append(out, c)
		}
	}
	return out
}

// stringEnd is the index just past the JSON string starting at b[i] (a
// quote), or len(b) for one never closed.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// dropTrailingComma removes a comma that only white space follows at the
// end of out.
func dropTrailingComma(out []byte) []byte {
	j := len(out) - 1
	for j >= 0 && (out[j] == ' ' || out[j] == '\t' || out[j] == '\n' || out[j] == '\r') {
		j--
	}
	if j >= 0 && out[j] == ',' {
		return append(out[:j], out[j+1:]...)
	}
	return out
}
