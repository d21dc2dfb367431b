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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	srv := serveMock(t, g)
	t.Cleanup(g.Close) // before the server closes (cleanups run last first)
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
	// gemini relaunches itself in a child node: kill the whole group, and
	// stop waiting for output a straggler still holds.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
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

// geminiRecord writes a transcript into agent/testdata/real when RALPH_RECORD=1.
func geminiRecord(t *testing.T, name string, stdout, stderr []byte) {
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
		name   string
		turns  []mockmodel.GeminiTurn
		args   []string
		extra  []string
		prompt string
		limit  time.Duration // gemini is killed after this long (default 90 s)
		check  func(t *testing.T, dir string, out, errOut []byte, code int)
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
		// --approval-mode plan: read-only planning; the edit is refused by
		// the plan policy.
		{name: "denied-plan", turns: mockmodel.GeminiFix("go test ./..."), args: []string{"--skip-trust", "--approval-mode", "plan"},
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if fixed(t, dir) || !bytes.Contains(out, []byte(`Plan Mode`)) {
					t.Errorf("denied-plan: exit %d, calc.go fixed %v", code, fixed(t, dir))
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
		{name: "big-prompt", turns: mockmodel.GeminiShell("go test ./..."), args: geminiPermissionArgs,
			prompt: geminiPrompt + strings.Repeat("Context line that makes the prompt long.\n", 1<<20/41),
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code != 0 || !bytes.Contains(out, []byte(`"status":"success"`)) {
					t.Errorf("big-prompt: exit %d", code)
				}
			}},
		{name: "hang", turns: mockmodel.GeminiHang(), args: geminiPermissionArgs, limit: 12 * time.Second,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if code != -1 || !bytes.Contains(out, []byte("Let me think")) {
					t.Errorf("hang: exit %d; want it killed mid-reply", code)
				}
			}},
		{name: "outside", turns: mockmodel.GeminiWriteFile("/tmp/ralph-gemini-outside-workspace.txt", "x\n"), args: geminiPermissionArgs,
			check: func(t *testing.T, dir string, out, errOut []byte, code int) {
				if _, err := os.Stat("/tmp/ralph-gemini-outside-workspace.txt"); err == nil {
					_ = os.Remove("/tmp/ralph-gemini-outside-workspace.txt")
					t.Errorf("outside: auto_edit wrote outside the workspace")
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
	// The ralph-level tests below run fix, denied, limit and retry through
	// the loop; here they run only when recording.
	loop := map[string]bool{"fix": true, "denied": true, "limit": true, "retry": true, "retry-fail": true, "hang": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if loop[c.name] && os.Getenv("RALPH_RECORD") != "1" {
				t.Skip("run through ralph by the tests below; RALPH_RECORD=1 runs it here to record it")
			}
			t.Parallel()
			_, url := geminiMock(t, c.turns)
			dir := goProject(t)
			prompt := c.prompt
			if prompt == "" {
				prompt = geminiPrompt
			}
			limit := c.limit
			if limit == 0 {
				limit = 90 * time.Second
			}
			out, errOut, code := runGemini(t, dir, geminiEnv(t, url, c.extra...), limit, prompt, c.args...)
			t.Logf("exit %d\n--- stdout\n%s\n--- stderr\n%s", code, geminiClip(out), geminiClip(errOut))
			if c.prompt == "" {
				geminiRecord(t, c.name, out, errOut)
			}
			c.check(t, dir, out, errOut, code)
		})
	}
}

func geminiClip(b []byte) string {
	if len(b) > 4000 {
		return string(b[:2000]) + "\n…\n" + string(b[len(b)-2000:])
	}
	return string(b)
}

// geminiInit runs `ralph init --agent gemini` in a fresh goProject and
// returns the directory and the ralph.toml it wrote. It checks that init
// wrote gemini's permission arguments; where it did not, the test fails
// and they are added to [agent] args as init should have written them, so
// that the rest of the test still runs.
func geminiInit(t *testing.T, e []string) (dir string, toml string) {
	t.Helper()
	dir = goProject(t)
	if r := ralph(t, dir, e, time.Minute, "init", "--agent", "gemini"); r.code != 0 {
		t.Fatalf("ralph init --agent gemini:\n%s", r)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ralph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	toml = string(b)
	if !strings.Contains(toml, `"run_shell_command(go test ./...)"`) || !strings.Contains(toml, `"--skip-trust"`) {
		t.Errorf("ralph init --agent gemini did not write gemini's permissions %q into [agent] args:\n%s", geminiPermissionArgs, toml)
		toml = geminiSetAgentArgs(t, toml, geminiPermissionArgs)
		geminiWriteToml(t, dir, toml)
	}
	return dir, toml
}

// geminiSetAgentArgs replaces the [agent] args line (written or commented out).
func geminiSetAgentArgs(t *testing.T, toml string, args []string) string {
	t.Helper()
	q, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	done := false
	for _, l := range strings.Split(toml, "\n") {
		trimmed := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if !done && strings.HasPrefix(trimmed, "args =") {
			out, done = append(out, "args = "+string(q)), true
			continue
		}
		if done && strings.HasPrefix(strings.TrimSpace(l), `"`) {
			continue // a multi-line array's elements
		}
		if done && strings.TrimSpace(l) == "]" {
			continue
		}
		out = append(out, l)
	}
	if !done {
		t.Fatalf("no [agent] args line in ralph.toml:\n%s", toml)
	}
	return strings.Join(out, "\n")
}

// geminiSetKey replaces the first line setting key (e.g. `idle_timeout =`).
func geminiSetKey(t *testing.T, toml, key, value string) string {
	t.Helper()
	lines := strings.Split(toml, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), key+" =") {
			lines[i] = key + " = " + value
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no %s in ralph.toml:\n%s", key, toml)
	return ""
}

func geminiWriteToml(t *testing.T, dir, toml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "ralph.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGeminiInitWorks: the loop `ralph init --agent gemini` writes, used
// as written, fixes calc.go with the real gemini and ends done.
func TestGeminiInitWorks(t *testing.T) {
	needCLI(t, "gemini")
	t.Parallel()
	g, url := geminiMock(t, mockmodel.GeminiFix("go test ./..."))
	e := geminiEnv(t, url)
	dir, _ := geminiInit(t, e)
	r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
	if r.code != 0 {
		t.Fatalf("ralph run:\n%s", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "calc.go")); !strings.Contains(string(b), "return a + b") {
		t.Errorf("calc.go not fixed:\n%s", b)
	}
	if g.Attempts(3) != 1 {
		t.Errorf("the script's last turn was asked %d times", g.Attempts(3))
	}
	t.Logf("%s", r)
	verifyChain(t, dir, e)
}

// TestGeminiDeniedStops: without init's permission arguments the edit is
// denied; the run stops after the first iteration, failure class, reason
// permission denied.
func TestGeminiDeniedStops(t *testing.T) {
	needCLI(t, "gemini")
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		fix  string // what the run's reason says to do
	}{
		// The edit tools are left out of the tool list: `Tool "replace" not found`.
		{"default", []string{"--skip-trust"}, "add --approval-mode auto_edit to [agent] args"},
		// Plan mode: "Tool execution denied by policy. You are in Plan Mode and
		// cannot modify source code. …" (policy_violation).
		{"plan", []string{"--skip-trust", "--approval-mode", "plan"}, "replace --approval-mode plan with --approval-mode auto_edit in [agent] args"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, url := geminiMock(t, mockmodel.GeminiFix("go test ./..."))
			e := geminiEnv(t, url)
			dir, toml := geminiInit(t, e)
			geminiWriteToml(t, dir, geminiSetAgentArgs(t, toml, tc.args))
			r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
			out := r.stdout + r.stderr
			if r.code != 1 || !strings.Contains(out, "permission denied") || !strings.Contains(out, tc.fix) {
				t.Errorf("want exit 1 with reason permission denied and %q:\n%s", tc.fix, r)
			}
			if !strings.Contains(out, "replace") || !strings.Contains(out, "calc.go") {
				t.Errorf("the denial does not name the tool and path:\n%s", r)
			}
			if n := g.Attempts(0); n != 1 {
				t.Errorf("%d iterations ran; the run must stop after the first", n)
			}
			t.Logf("%s", r)
			verifyChain(t, dir, e)
		})
	}
}

// TestGeminiLimitWaits: a spent daily quota whose reset is 2 s ahead: the
// run waits for it and goes on to done.
func TestGeminiLimitWaits(t *testing.T) {
	needCLI(t, "gemini")
	t.Parallel()
	g, url := geminiMock(t, mockmodel.GeminiLimit("go test ./...", 2*time.Second))
	e := geminiEnv(t, url)
	dir, _ := geminiInit(t, e)
	r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
	if r.code != 0 || g.Attempts(0) != 2 {
		t.Errorf("want done after one wait (turn 0 asked twice, was %d):\n%s", g.Attempts(0), r)
	}
	if out := r.stdout + r.stderr; !strings.Contains(strings.ToLower(out), "limit") {
		t.Errorf("the wait for the limit is not shown:\n%s", r)
	}
	t.Logf("%s", r)
	verifyChain(t, dir, e)
}

// TestGeminiRetries: an overload and a per-minute quota before success are
// retried by gemini itself and shown; a 429 then a 400 is a failure, not a
// limit to wait for.
func TestGeminiRetries(t *testing.T) {
	needCLI(t, "gemini")
	t.Parallel()
	t.Run("transient", func(t *testing.T) {
		t.Parallel()
		g, url := geminiMock(t, mockmodel.GeminiRetry("go test ./...", mockmodel.Gemini503, mockmodel.Gemini429))
		e := geminiEnv(t, url)
		dir, _ := geminiInit(t, e)
		r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
		if r.code != 0 || g.Attempts(0) != 3 {
			t.Errorf("want done (turn 0 asked 3 times, was %d):\n%s", g.Attempts(0), r)
		}
		if out := r.stdout + r.stderr; !strings.Contains(out, "retrying after 503") || !strings.Contains(out, "retrying after 429") {
			t.Errorf("the retries are not shown (agent ~ retrying after …):\n%s", r)
		}
		verifyChain(t, dir, e)
	})
	t.Run("then-error", func(t *testing.T) {
		t.Parallel()
		_, url := geminiMock(t, mockmodel.GeminiRetryFail())
		e := geminiEnv(t, url)
		dir, toml := geminiInit(t, e)
		geminiWriteToml(t, dir, geminiSetKey(t, toml, "max", "1"))
		r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
		out := r.stdout + r.stderr
		if r.code == 0 || strings.Contains(out, "waiting until") || !strings.Contains(out, "INVALID_ARGUMENT") {
			t.Errorf("want a failure naming the 400, no wait:\n%s", r)
		}
		t.Logf("%s", r)
	})
}

// TestGeminiIdleTimeout: a reply that goes silent is killed by the idle
// timeout and recorded so.
func TestGeminiIdleTimeout(t *testing.T) {
	needCLI(t, "gemini")
	t.Parallel()
	_, url := geminiMock(t, mockmodel.GeminiHang())
	e := geminiEnv(t, url)
	dir, toml := geminiInit(t, e)
	toml = geminiSetKey(t, toml, "idle_timeout", `"4s"`)
	geminiWriteToml(t, dir, geminiSetKey(t, toml, "max", "1"))
	start := time.Now()
	r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
	if r.code == 0 || time.Since(start) > time.Minute {
		t.Errorf("want the hung call killed at its idle timeout:\n%s", r)
	}
	export := ralph(t, dir, e, time.Minute, "chain", "export")
	if !strings.Contains(export.stdout, `"stopped":"idle-timeout"`) {
		t.Errorf("idle-timeout is not recorded on the chain:\n%s\n%s", r, export)
	}
	verifyChain(t, dir, e)
}

// TestGeminiContainment: kill -9 of ralph while gemini's shell tool runs
// `sleep 300` leaves no process of the call behind, including those in
// new sessions.
func TestGeminiContainment(t *testing.T) {
	needCLI(t, "gemini")
	t.Parallel()
	_, url := geminiMock(t, mockmodel.GeminiShell("sleep 300"))
	e := geminiEnv(t, url)
	dir, toml := geminiInit(t, e)
	geminiWriteToml(t, dir, geminiSetAgentArgs(t, toml, []string{"--skip-trust", "--approval-mode", "yolo"}))
	cmd := exec.Command(ralphBin, "run", "--no-tui")
	cmd.Dir, cmd.Env = dir, e
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var sleep int
	deadline := time.Now().Add(90 * time.Second)
	for sleep == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		for _, p := range geminiProcsIn(dir) {
			if p.cmdline == "sleep 300" {
				sleep = p.pid
			}
		}
	}
	if sleep == 0 {
		t.Fatalf("gemini's shell never ran sleep 300:\n%s", out.String())
	}
	call := geminiProcsIn(dir)
	sid := geminiSessionOf(sleep)
	t.Logf("before kill -9 of ralph (pid %d): %d processes in %s; sleep 300 is pid %d in session %d", cmd.Process.Pid, len(call), dir, sleep, sid)
	if err := cmd.Process.Signal(geminiSyscallKill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	pids := make([]int, 0, len(call))
	for _, p := range call {
		if geminiAlive(p) { // the same process, not a pid used again since
			pids = append(pids, p.pid)
		}
	}
	if left := survivors(pids); len(left) > 0 {
		t.Errorf("after kill -9 of ralph, processes of the call remain: %v", left)
	}
}
