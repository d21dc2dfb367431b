package agent

import (
	"slices"
	"testing"
)

func TestStateDirs(t *testing.T) {
	none := func(string) string { return "" }
	env := func(m map[string]string) Env { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		cli  string
		env  Env
		want []string
	}{
		{"claude", none, []string{"/h/.claude", "/h/.claude.json"}},
		{"claude", env(map[string]string{"CLAUDE_CONFIG_DIR": "/c"}), []string{"/c"}},
		{"codex", none, []string{"/h/.codex"}},
		{"codex", env(map[string]string{"CODEX_HOME": "/x/codex"}), []string{"/x/codex"}},
		{"codex", env(map[string]string{"CODEX_HOME": "rel"}), []string{"/h/.codex"}}, // not a path it can mean
		{"gemini", none, []string{"/h/.gemini"}},
		{"opencode", none, []string{"/h/.local/share/opencode", "/h/.config/opencode", "/h/.cache/opencode", "/h/.local/state/opencode"}},
		{"opencode", env(map[string]string{"XDG_DATA_HOME": "/d", "XDG_CONFIG_HOME": "/cf"}),
			[]string{"/d/opencode", "/cf/opencode", "/h/.cache/opencode", "/h/.local/state/opencode"}},
		{"command", none, nil},
		{"nosuch", none, nil},
	} {
		if got := StateDirs(c.cli, "/h", c.env); !slices.Equal(got, c.want) {
			t.Errorf("StateDirs(%s) = %q, want %q", c.cli, got, c.want)
		}
	}
}

// TestStateFiles: Claude's ~/.claude.json is a file that starts as a
// JSON object; with CLAUDE_CONFIG_DIR there is none outside that
// directory; the other CLIs keep directories only.
func TestStateFiles(t *testing.T) {
	none := func(string) string { return "" }
	if got := StateFiles("claude", "/h", none); len(got) != 1 || got["/h/.claude.json"] != "{}\n" {
		t.Errorf("claude's state files = %q", got)
	}
	if got := StateFiles("claude", "/h", func(k string) string { return map[string]string{"CLAUDE_CONFIG_DIR": "/c"}[k] }); got != nil {
		t.Errorf("with CLAUDE_CONFIG_DIR claude's state files = %q", got)
	}
	for _, cli := range []string{"codex", "gemini", "opencode", "nosuch"} {
		if got := StateFiles(cli, "/h", none); got != nil {
			t.Errorf("%s's state files = %q", cli, got)
		}
	}
}

// TestEveryCLIHasSandboxFacts holds each CLI ralph runs itself to state
// directories and API hosts: a CLI without them could not work in a
// sandbox.
func TestEveryCLIHasSandboxFacts(t *testing.T) {
	for _, cli := range CLIs() {
		if len(StateDirs(cli, "/h", func(string) string { return "" })) == 0 {
			t.Errorf("%s has no StateDirs", cli)
		}
		if len(APIHosts(cli, "/h", func(string) string { return "" })) == 0 {
			t.Errorf("%s has no APIHosts", cli)
		}
	}
}

func TestAPIHostsAddBaseURL(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:4010/v1", "OPENAI_BASE_URL": "https://gw.example:8443"}[k]
	}
	if got := APIHosts("claude", "/h", env); !slices.Contains(got, "127.0.0.1:4010") || !slices.Contains(got, "api.anthropic.com") {
		t.Errorf("claude's hosts = %q, want api.anthropic.com and 127.0.0.1:4010", got)
	}
	if got := APIHosts("codex", "/h", env); !slices.Contains(got, "gw.example:8443") || slices.Contains(got, "127.0.0.1:4010") {
		t.Errorf("codex's hosts = %q, want gw.example:8443 and not claude's base URL", got)
	}
}

func TestURLHost(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/v1":  "api.example.com",
		"https://api.example.com:443": "api.example.com",
		"https://h:8443/x":            "h:8443",
		"http://h/x":                  "h:80",
		"http://[::1]:9/":             "[::1]:9",
		"ftp://h":                     "",
		"":                            "",
		"not a url":                   "",
	} {
		if got := URLHost(in); got != want {
			t.Errorf("URLHost(%q) = %q, want %q", in, got, want)
		}
	}
}
