package conformance

// The real OpenCode (opencode-ai 1.18.33) against internal/mockmodel's
// OpenCode endpoint (OpenAI Chat Completions SSE, through the
// "@ai-sdk/openai-compatible" provider OpenCode bundles).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	srv := serveMock(t, h)
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
		{"limit-final", mockmodel.OpenCodeScript("limit-final", 300*time.Millisecond, 0), nil, opencodePerms(false).Env, 2 * time.Minute},
		{"retry", mockmodel.OpenCodeScript("retry", 0, 0), nil, opencodePerms(false).Env, time.Minute},
		{"unauth", mockmodel.OpenCodeScript("unauth", 0, 0), nil, opencodePerms(false).Env, time.Minute},
		{"bad-model", mockmodel.OpenCodeScript("fix", 0, 0), []string{"--model", "mock/no-such-model"}, opencodePerms(false).Env, time.Minute},
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

// opencodeProject is goProject with `ralph init --agent opencode` (full:
// --full-access) run in it, and the environment that points OpenCode at
// a mock serving script; extra is appended to that environment.
func opencodeProject(t *testing.T, script []mockmodel.OpenCodeTurn, full bool, extra ...string) (dir string, e []string, mock *mockmodel.OpenCode) {
	t.Helper()
	needCLI(t, "opencode")
	dir = goProject(t)
	mock, mockEnv := opencodeMock(t, script)
	e = env(t, append(mockEnv, extra...)...)
	args := []string{"init", "--agent", "opencode"}
	if full {
		args = append(args, "--full-access")
	}
	if r := ralph(t, dir, e, time.Minute, args...); r.code != 0 {
		t.Fatalf("ralph init: %s", r)
	}
	return dir, e, mock
}

// TestOpencodeLoop runs the loop `ralph init --agent opencode` writes, as
// written, with the real opencode: the scripted model reads calc.go, edits
// it, runs the tests; the run ends done and its chain verifies. The limit
// case (a 429 whose retry-after-ms is 2 s: OpenCode waits it out itself)
// and the transient retries (429, 429, 503 overloaded) end done too, the
// retries recorded.
func TestOpencodeLoop(t *testing.T) {
	for _, name := range []string{"fix", "limit", "retry"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, e, _ := opencodeProject(t, mockmodel.OpenCodeScript(name, 2*time.Second, 0), false)
			r := ralph(t, dir, e, 4*time.Minute, "run", "--no-tui")
			if r.code != 0 {
				t.Fatalf("ralph run: %s", r)
			}
			calc, _ := os.ReadFile(filepath.Join(dir, "calc.go"))
			if !bytes.Contains(calc, []byte("return a + b")) {
				t.Errorf("calc.go was not fixed:\n%s", calc)
			}
			if name == "retry" && !strings.Contains(r.stdout+r.stderr, "Too Many Requests") {
				t.Errorf("the retries were not shown:\n%s", r)
			}
			verifyChain(t, dir, e)
		})
	}
}

// TestOpencodeRetryThenFail: a 429 the CLI retried, then a 400: the call
// failed with the 400, which is not a limit: ralph does not wait.
func TestOpencodeRetryThenFail(t *testing.T) {
	t.Parallel()
	dir, e, _ := opencodeProject(t, mockmodel.OpenCodeScript("retry-fail", 0, 0), false)
	start := time.Now()
	r := ralph(t, dir, e, 4*time.Minute, "run", "--no-tui", "--max-iterations", "1")
	if r.code == 0 || strings.Contains(r.stdout+r.stderr, "waiting until") {
		t.Errorf("ralph run after a 400: %s", r)
	}
	if !strings.Contains(r.stdout+r.stderr, "the request is malformed") {
		t.Errorf("the 400 is not the call's error:\n%s", r)
	}
	t.Logf("ran %s", time.Since(start).Round(time.Second))
}

// TestOpencodeDenied: without init's OPENCODE_PERMISSION, and with a
// user's permission config that asks before editing (opencode run cannot
// ask, so it rejects), the edit is refused: the run stops after the first
// iteration, a failure by permission denied, exit 1.
func TestOpencodeDenied(t *testing.T) {
	t.Parallel()
	dir, e, _ := opencodeProject(t, mockmodel.OpenCodeScript("denied", 0, 0), false, `OPENCODE_PERMISSION={"edit":"ask"}`)
	b, err := os.ReadFile(filepath.Join(dir, "ralph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("OPENCODE_PERMISSION = "))
	if i < 0 {
		t.Fatalf("init wrote no OPENCODE_PERMISSION:\n%s", b)
	}
	j := bytes.IndexByte(b[i:], '\n')
	editToml(t, dir, regexp.QuoteMeta(string(b[i:i+j+1])), "")
	r := ralph(t, dir, e, 4*time.Minute, "run", "--no-tui")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "permission denied") || !strings.Contains(r.stdout+r.stderr, "calc.go") ||
		!strings.Contains(r.stdout+r.stderr, "[agent.env] OPENCODE_PERMISSION") {
		t.Fatalf("ralph run with the edit refused (the reason must name [agent.env] OPENCODE_PERMISSION): %s", r)
	}
	t.Logf("ralph run with the edit refused: %s", r)
	verifyChain(t, dir, e)
}

// TestOpencodeIdleTimeout: the model's stream starts and goes silent;
// the idle timeout kills the call, recorded as idle-timeout.
func TestOpencodeIdleTimeout(t *testing.T) {
	t.Parallel()
	dir, e, mock := opencodeProject(t, mockmodel.OpenCodeScript("hang", 0, 0), false)
	// Long enough for OpenCode to start on a busy machine: with two cores
	// kept busy it first asks the model 25-35 s after it starts, in
	// ralph's sandbox or not, and prints nothing before.
	editToml(t, dir, regexp.QuoteMeta(`idle_timeout = "5m"`), `idle_timeout = "40s"`)
	r := ralph(t, dir, e, 4*time.Minute, "run", "--no-tui", "--max-iterations", "1")
	if !strings.Contains(r.stdout, "opencode printed nothing for 40s") {
		t.Errorf("no idle timeout reported: %s", r)
	}
	if !slices.Contains(mock.Requests(), "turn 0 attempt 1") {
		t.Errorf("the idle timeout came before OpenCode asked the model (it asked %q): not the hang case", mock.Requests())
	}
	stopped := ""
	for _, a := range chainActions(t, dir, e) {
		if md, ok := a["metadata"].(map[string]any); ok && a["action_type"] == "CapabilityCall" && md["stopped"] != nil {
			stopped = fmt.Sprint(md["stopped"])
		}
	}
	if stopped != "idle-timeout" {
		t.Errorf("the agent.run call was recorded stopped %q, want idle-timeout", stopped)
	}
	verifyChain(t, dir, e)
}

// chainActions is the run's chain (`ralph chain show --json`), one map
// per action.
func chainActions(t *testing.T, dir string, e []string) []map[string]any {
	t.Helper()
	r := ralph(t, dir, e, time.Minute, "chain", "show", "--json")
	if r.code != 0 {
		t.Fatalf("ralph chain show: %s", r)
	}
	var acts []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var a map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("chain line %q: %v", line, err)
		}
		acts = append(acts, a)
	}
	return acts
}

// TestOpencodeContainment: ralph is killed with SIGKILL while OpenCode's
// shell tool runs `sleep 300`; afterwards no process of the call remains.
// The call's processes are found by a marker in their environment, which
// every descendant inherits, in a new session or not.
func TestOpencodeContainment(t *testing.T) {
	t.Parallel()
	mark := fmt.Sprintf("RALPH_CONFORMANCE_MARK=%d", time.Now().UnixNano())
	dir, e, _ := opencodeProject(t, mockmodel.OpenCodeScript("sleep", 0, 0), true, mark)
	cmd := exec.Command(ralphBin, "run", "--no-tui")
	cmd.Dir, cmd.Env = dir, e
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	var sleeper int
	for sleeper == 0 && time.Now().Before(deadline) {
		for pid, argv := range markedProcs(mark) {
			if argv == "sleep 300" {
				sleeper = pid
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if sleeper == 0 {
		t.Fatalf("the shell tool's sleep 300 never started:\n%s", out.String())
	}
	before := markedProcs(mark)
	t.Logf("the call's processes: %v", before)
	_ = cmd.Process.Signal(os.Kill)
	_ = cmd.Wait()
	if left := survivors(pidsOf(markedProcs(mark))); len(left) > 0 {
		t.Errorf("after kill -9 of ralph these processes of the call remain: %v (ralph said:\n%s)", left, out.String())
	}
}

// marked returns the processes whose environment holds mark: pid → argv.
func markedProcs(mark string) map[int]string {
	found := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte(mark+"\x00")) {
			continue
		}
		argv, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		found[pid] = strings.TrimSpace(strings.ReplaceAll(string(argv), "\x00", " "))
	}
	return found
}

// TestOpencodeLargePrompt: a 1 MB prompt reaches the real opencode on
// stdin through agent.Run, and the call ends with a readable result.
func TestOpencodeLargePrompt(t *testing.T) {
	t.Parallel()
	needCLI(t, "opencode")
	dir := goProject(t)
	_, mockEnv := opencodeMock(t, mockmodel.OpenCodeScript("fix", 0, 0))
	e := env(t, append(mockEnv, opencodePerms(false).Env...)...)
	prompt := opencodePrompt + strings.Repeat("Context line that the agent may ignore.\n", (1<<20)/40)
	r, err := agent.Run(context.Background(), agent.Options{CLI: "opencode", Prompt: prompt, Dir: dir, Env: e,
		Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Exit != 0 || r.IsError || r.Turns != 4 || r.ToolUses != 3 || !strings.Contains(r.Text, "<promise>COMPLETE</promise>") {
		t.Errorf("result %+v", r)
	}
	if r.Tokens.CacheRead == 0 || r.Tokens.Reasoning != 12 {
		t.Errorf("tokens %+v", r.Tokens)
	}
}

// TestOpencodeIdleTimeoutInTool: OpenCode's shell tool runs `sleep 300`
// (with --full-access: init's narrow permissions refuse it) and prints
// nothing meanwhile; the idle timeout ends the call. The tool that never
// returned is not recorded as ok, and no process of the call remains.
func TestOpencodeIdleTimeoutInTool(t *testing.T) {
	t.Parallel()
	mark := fmt.Sprintf("RALPH_CONFORMANCE_MARK=%d", time.Now().UnixNano())
	dir, e, _ := opencodeProject(t, mockmodel.OpenCodeScript("sleep", 0, 0), true, mark)
	// Long enough for OpenCode to start on a busy machine: the first event
	// comes only once the model answers.
	editToml(t, dir, regexp.QuoteMeta(`idle_timeout = "5m"`), `idle_timeout = "40s"`)
	sleeper := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				sleeper <- 0
				return
			case <-time.After(200 * time.Millisecond):
			}
			for pid, argv := range markedProcs(mark) {
				if argv == "sleep 300" {
					sleeper <- pid
					return
				}
			}
		}
	}()
	r := ralph(t, dir, e, 4*time.Minute, "run", "--no-tui", "--max-iterations", "1")
	close(stop)
	if pid := <-sleeper; pid == 0 {
		t.Fatalf("the shell tool's sleep 300 never started before the call ended: %s", r)
	}
	if !strings.Contains(r.stdout, "opencode printed nothing for 40s") {
		t.Errorf("no idle timeout reported: %s", r)
	}
	calls := 0
	for _, a := range chainActions(t, dir, e) {
		b, _ := json.Marshal(a)
		if a["action_type"] == "CapabilityCall" && strings.Contains(string(b), "agent.run") {
			calls++
		}
		if a["action_type"] == "AgentToolUse" && strings.Contains(string(b), "sleep 300") && !strings.Contains(string(b), "cancel") {
			t.Errorf("the unfinished shell tool was recorded: %s", b)
		}
	}
	if calls != 1 {
		t.Errorf("%d agent.run calls on the chain, want 1", calls)
	}
	if left := survivors(pidsOf(markedProcs(mark))); len(left) > 0 {
		t.Errorf("after the idle timeout these processes of the call remain: %v", left)
	}
}

// pidsOf lists the pids of procs.
func pidsOf(procs map[int]string) []int {
	pids := make([]int, 0, len(procs))
	for pid := range procs {
		pids = append(pids, pid)
	}
	return pids
}
