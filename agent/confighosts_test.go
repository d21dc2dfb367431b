package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mapEnv(m map[string]string) Env { return func(k string) string { return m[k] } }

// TestCodexConfigHosts: the providers of config.toml and of a profile,
// openai_base_url, and nothing from a file codex could not read either.
func TestCodexConfigHosts(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".codex", "config.toml"), `model_provider = "mock"
openai_base_url = "https://gw.example/v1"

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:4010/v1"
wire_api = "responses"

[model_providers.azure]
base_url = "https://my.openai.azure.com/openai"
`)
	writeFile(t, filepath.Join(home, ".codex", "work.config.toml"), "[model_providers.work]\nbase_url = \"https://llm.work.example:8443/v1\"\n")
	writeFile(t, filepath.Join(home, ".codex", "broken.config.toml"), "[model_providers.x\nbase_url = \"https://never.example\"\n")
	got := APIHosts("codex", home, mapEnv(nil))
	for _, want := range []string{"api.openai.com", "gw.example", "127.0.0.1:4010", "my.openai.azure.com", "llm.work.example:8443"} {
		if !slices.Contains(got, want) {
			t.Errorf("codex's hosts %q lack %s", got, want)
		}
	}
	if slices.Contains(got, "never.example") {
		t.Errorf("codex's hosts %q hold a host of a file that does not parse", got)
	}
	// CODEX_HOME moves the whole of it.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "config.toml"), "[model_providers.m]\nbase_url = \"http://10.0.0.7:8000/v1\"\n")
	if got := APIHosts("codex", home, mapEnv(map[string]string{"CODEX_HOME": other})); !slices.Contains(got, "10.0.0.7:8000") || slices.Contains(got, "gw.example") {
		t.Errorf("with CODEX_HOME=%s codex's hosts are %q", other, got)
	}
}

// TestOpencodeConfigHosts: the global config (JSONC), OPENCODE_CONFIG's
// file and OPENCODE_CONFIG_CONTENT, with {env:NAME} read; a project's
// opencode.json in the working directory is not read.
func TestOpencodeConfigHosts(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".config", "opencode", "opencode.jsonc"), `{
  // the company gateway
  "provider": {
    "gw": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "https://llm.corp.example/v1", /* key below */ "apiKey": "{env:GW_KEY}"},},
  },
}`)
	custom := filepath.Join(home, "custom.json")
	writeFile(t, custom, `{"provider": {"local": {"options": {"baseURL": "{env:LOCAL_URL}"}}}}`)
	content := `{"provider": {"mock": {"options": {"baseURL": "http://127.0.0.1:5050/v1"}}}}`
	writeFile(t, filepath.Join(home, "project", "opencode.json"), `{"provider": {"p": {"options": {"baseURL": "https://project.example"}}}}`)
	t.Chdir(filepath.Join(home, "project"))
	got := APIHosts("opencode", home, mapEnv(map[string]string{
		"OPENCODE_CONFIG": custom, "OPENCODE_CONFIG_CONTENT": content, "LOCAL_URL": "http://localhost:11434/v1"}))
	for _, want := range []string{"api.anthropic.com", "llm.corp.example", "localhost:11434", "127.0.0.1:5050"} {
		if !slices.Contains(got, want) {
			t.Errorf("opencode's hosts %q lack %s", got, want)
		}
	}
	if slices.Contains(got, "project.example") {
		t.Errorf("opencode's hosts %q hold the project's provider", got)
	}
}

func TestStripJSONC(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": 1}`:                      `{"a": 1}`,
		"{\"a\": 1, // one\n}":          "{\"a\": 1 \n}",
		`{"u": "http://x//y", /* c */}`: `{"u": "http://x//y"  }`,
		`[1, 2, ]`:                      `[1, 2 ]`,
		`{"s": "a\"//b"}`:               `{"s": "a\"//b"}`,
		`{"a": "b" /* open`:             `{"a": "b"  `,
	} {
		if got := string(stripJSONC([]byte(in))); got != want {
			t.Errorf("stripJSONC(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzStripJSONC: it never panics, leaves valid JSON as it is, and what
// it makes of JSONC decodes to what the same text without its comments
// and trailing commas does.
func FuzzStripJSONC(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, "{\"a\": [1, 2,], // x\n}", `{"u": "//", /* */ "v": "\"/*"}`, `"`, `/*`, `//`, `,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := stripJSONC(b)
		if json.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("stripJSONC changed valid JSON %q into %q", b, out)
		}
		if again := stripJSONC(out); json.Valid(out) && !bytes.Equal(again, out) {
			t.Fatalf("stripJSONC is not idempotent on %q: %q", out, again)
		}
	})
}
