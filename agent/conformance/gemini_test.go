package conformance

// The real Gemini CLI against the mock Gemini API (internal/mockmodel):
// the loop `ralph init --agent gemini` writes, limits, retries, denials,
// hangs and containment; and, with RALPH_RECORD=1, the transcripts the
// parser's unit tests read (agent/testdata/real/gemini-<version>-*.jsonl).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/mockmodel"
)

// geminiVersion is the pinned @google/gemini-cli (agents/package.json).
const geminiVersion = "0.61.0"

// geminiMock serves turns on 127.0.0.1 until the test ends.
func geminiMock(t *testing.T, turns []mockmodel.GeminiTurn) (*mockmodel.Gemini, string) {
	t.Helper()
	g := &mockmodel.Gemini{Turns: turns, Logf: t.Logf}
	srv := httptest.NewServer(g)
	t.Cleanup(func() {
		g.Close()
		srv.Close()
	})
	return g, srv.URL
}

// geminiEnv is env(t) for a Gemini CLI that talks to the mock at url: the
// API key auth chosen in the isolated home's settings (the base URL alone
// would select the gateway auth, which headless mode refuses), telemetry,
// usage statistics and update checks off.
func geminiEnv(t *testing.T, url string, extra ...string) []string {
	t.Helper()
	e := env(t, append([]string{
		"GEMINI_API_KEY=mock-key",
		"GOOGLE_GEMINI_BASE_URL=" + url,
		"TMPDIR=" + t.TempDir(), // its error reports go to the temporary directory
	}, extra...)...)
	home := ""
	for _, kv := range e {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	settings := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mkdir(t, filepath.Join(home, ".gemini")), "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// geminiPermissionArgs are the arguments `ralph init --agent gemini`
// writes for a loop whose test command is `go test ./...` (asserted by
// TestGeminiInitWorks).
var geminiPermissionArgs = []string{"--skip-trust", "--approval-mode", "auto_edit", "--allowed-tools", "run_shell_command(go test ./...)"}

// runGemini runs the real gemini as ralph does (`gemini --output-format
// stream-json` plus args, the prompt on stdin) in dir.
func runGemini(t *testing.T, dir string, env []string, limit time.Duration, prompt string, args ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	bin := needCLI(t, "gemini")
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--output-format", "stream-json"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(prompt)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.Bytes(), errOut.Bytes(), code
}

// record writes a transcript into agent/testdata/real when RALPH_RECORD=1.
func record(t *testing.T, name string, stdout, stderr []byte) {
	t.Helper()
	if os.Getenv("RALPH_RECORD") != "1" {
		return
	}
	dir := filepath.Join("..", "testdata", "real")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "gemini-"+geminiVersion+"-"+name)
	if err := os.WriteFile(base+".jsonl", stdout, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".stderr", stderr, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s.jsonl (%d bytes) and .stderr (%d bytes)", base, len(stdout), len(stderr))
}

const geminiPrompt = "Make the tests pass: `go test ./...` fails because Add is wrong.\n"

// TestGeminiTranscripts runs the real gemini directly on each scripted
// case and checks what it printed (recording it with RALPH_RECORD=1).
func TestGeminiTranscripts(t *testing.T) {
	needCLI(t, "gemini")
	type tcase struct {
		name  string
		turns []mockmodel.GeminiTurn
		args  []string
		extra []string
		check func(t *testing.T, dir string, out, errOut []byte, code int)
	}
	fixed := func(t *testing.T, dir string) bool {
		b, err := os.ReadFile(filepath.Join(dir, "calc.go"))
		return err == nil && strings.Contains(string(b), "return a + b")
	}
	cases := []tcase{
		{name: "fix", turns: mockmodel.GeminiFix("go test ./..."), args: geminiPermissionArgs,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code != 0 || !fixed(t, dir) || !bytes.Contains(out, []byte(`"tool_name":"run_shell_command"`)) {
					t.Errorf("fix: exit %d, calc.go fixed %v", code, fixed(t, dir))
				}
			}},
		{name: "denied", turns: mockmodel.GeminiFix("go test ./..."), args: []string{"--skip-trust"},
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if fixed(t, dir) || !bytes.Contains(out, []byte(`not found`)) {
					t.Errorf("denied: exit %d, calc.go fixed %v", code, fixed(t, dir))
				}
			}},
		{name: "untrusted", turns: mockmodel.GeminiFix("go test ./..."),
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code == 0 || !bytes.Contains(errOut, []byte("trusted")) {
					t.Errorf("untrusted: exit %d", code)
				}
			}},
		{name: "limit", turns: mockmodel.GeminiLimit("go test ./...", 2*time.Hour), args: geminiPermissionArgs,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code == 0 {
					t.Errorf("limit: exit 0")
				}
			}},
		{name: "retry", turns: mockmodel.GeminiRetry("go test ./...", mockmodel.Gemini503, mockmodel.Gemini429), args: geminiPermissionArgs,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code != 0 || !fixed(t, dir) {
					t.Errorf("retry: exit %d, fixed %v", code, fixed(t, dir))
				}
			}},
		{name: "retry-fail", turns: mockmodel.GeminiRetryFail(), args: geminiPermissionArgs,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code == 0 {
					t.Errorf("retry-fail: exit 0")
				}
			}},
		{name: "flood", turns: mockmodel.GeminiFlood(256 << 10), args: geminiPermissionArgs,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code != 0 || len(out) < 256<<10 {
					t.Errorf("flood: exit %d, %d bytes", code, len(out))
				}
			}},
		{name: "denied-shell", turns: mockmodel.GeminiShell("rm -rf calc_test.go"), args: geminiPermissionArgs,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if _, err := os.Stat(filepath.Join(dir, "calc_test.go")); err != nil {
					t.Errorf("denied-shell: the command ran: %v", err)
				}
			}},
		{name: "invalid-key", turns: mockmodel.GeminiFix("go test ./..."), args: geminiPermissionArgs,
			extra: []string{"GEMINI_API_KEY=" + mockmodel.GeminiInvalidKey},
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code == 0 {
					t.Errorf("invalid-key: exit 0")
				}
			}},
		{name: "unauthenticated", turns: mockmodel.GeminiFix("go test ./..."), args: geminiPermissionArgs,
			extra: []string{"GEMINI_API_KEY="},
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code == 0 {
					t.Errorf("unauthenticated: exit 0")
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, url := geminiMock(t, c.turns)
			dir := goProject(t)
			out, errOut, code := runGemini(t, dir, geminiEnv(t, url, c.extra...), 90*time.Second, geminiPrompt, c.args...)
			t.Logf("exit %d\n--- stdout\n%s\n--- stderr\n%s", code, clip(out), clip(errOut))
			record(t, c.name, out, errOut)
			c.check(t, dir, out, errOut, code)
		})
	}
}

func clip(b []byte) string {
	if len(b) > 4000 {
		return string(b[:2000]) + "\n…\n" + string(b[len(b)-2000:])
	}
	return string(b)
}
