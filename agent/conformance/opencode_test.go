package conformance

// The real OpenCode (opencode-ai 1.18.33) against internal/mockmodel's
// OpenCode endpoint (OpenAI Chat Completions SSE, through the
// "@ai-sdk/openai-compatible" provider OpenCode bundles).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/internal/mockmodel"
)

const opencodeVersion = "1.18.33"

// opencodeMock serves script and returns the environment that points
// OpenCode at it: its provider config (OPENCODE_CONFIG_CONTENT: a provider
// "mock" through the bundled @ai-sdk/openai-compatible package, whose one
// model is the default), and the switches that keep it off the network
// (no models.dev fetch, no autoupdate, no LSP downloads, no sharing).
func opencodeMock(t *testing.T, script []mockmodel.OpenCodeTurn) (*mockmodel.OpenCode, []string) {
	t.Helper()
	h := mockmodel.NewOpenCode(script, t.Logf)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"mock": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "Mock",
			"options": map[string]any{"baseURL": srv.URL + "/v1", "apiKey": "mock-key"},
			"models":  map[string]any{"mock-coder": map[string]any{"name": "Mock Coder"}},
		}},
		"model":       "mock/mock-coder",
		"small_model": "mock/mock-coder",
		"autoupdate":  false,
		"share":       "disabled",
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, []string{
		"OPENCODE_CONFIG_CONTENT=" + string(b),
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_SHARE=1",
	}
}

// opencodePerms is what `ralph init --agent opencode` writes for the
// project's test command.
func opencodePerms(full bool) agent.Permissions {
	return agent.PermissionsFor("opencode", []string{"go", "test", "./..."}, full)
}

// runOpencode runs the real opencode in dir as ralph does (`opencode run
// --format json` plus args, the prompt on stdin) and returns its stdout,
// stderr and exit code.
func runOpencode(t *testing.T, dir string, env []string, limit time.Duration, prompt string, args ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	bin := needCLI(t, "opencode")
	// The argv of agent/opencode.go.
	cmd := exec.Command(bin, append([]string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(prompt)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
	}
	return out.Bytes(), errOut.Bytes(), cmd.ProcessState.ExitCode()
}

const opencodePrompt = "Make TestAdd pass: fix Add in calc.go, then run go test ./...\n"

// TestOpencodeRecord re-records the real OpenCode's transcripts into
// agent/testdata/real (RALPH_RECORD=1): the parser's fixtures.
func TestOpencodeRecord(t *testing.T) {
	if os.Getenv("RALPH_RECORD") != "1" {
		t.Skip("RALPH_RECORD is not 1")
	}
	cases := []struct {
		name   string
		script []mockmodel.OpenCodeTurn
		args   []string
		env    []string
		limit  time.Duration
	}{
		{"fix", mockmodel.OpenCodeScript("fix", 0, 0), nil, opencodePerms(false).Env, time.Minute},
		{"denied", mockmodel.OpenCodeScript("denied", 0, 0), nil, []string{`OPENCODE_PERMISSION={"edit":"ask"}`}, time.Minute},
		{"limit", mockmodel.OpenCodeScript("limit", 2*time.Second, 0), nil, opencodePerms(false).Env, time.Minute},
		{"retry", mockmodel.OpenCodeScript("retry", 0, 0), nil, opencodePerms(false).Env, time.Minute},
		{"unauth", mockmodel.OpenCodeScript("unauth", 0, 0), nil, opencodePerms(false).Env, time.Minute},
		{"denied-bash", mockmodel.OpenCodeScript("sleep", 0, 0), nil, opencodePerms(false).Env, time.Minute},
		{"retry-fail", mockmodel.OpenCodeScript("retry-fail", 0, 0), nil, opencodePerms(false).Env, time.Minute},
		{"hang", mockmodel.OpenCodeScript("hang", 0, 0), nil, opencodePerms(false).Env, 45 * time.Second},
		{"flood", mockmodel.OpenCodeScript("flood", 0, 256<<10), nil, opencodePerms(false).Env, time.Minute},
	}
	out := filepath.Join("..", "testdata", "real")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := goProject(t)
			_, mockEnv := opencodeMock(t, c.script)
			e := env(t, append(mockEnv, c.env...)...)
			stdout, stderr, code := runOpencode(t, dir, e, c.limit, opencodePrompt, c.args...)
			base := filepath.Join(out, fmt.Sprintf("opencode-%s-%s", opencodeVersion, c.name))
			if err := os.WriteFile(base+".jsonl", stdout, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(base+".stderr", stderr, 0o644); err != nil {
				t.Fatal(err)
			}
			calc, _ := os.ReadFile(filepath.Join(dir, "calc.go"))
			t.Logf("exit %d, %d bytes out, %d bytes err; calc.go:\n%s", code, len(stdout), len(stderr), calc)
		})
	}
}
