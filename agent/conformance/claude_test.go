package conformance

// The real Claude Code, every version agents/package.json pins (2.1.197,
// 2.1.332), against the mock Anthropic Messages API (internal/mockmodel),
// run by the real ralph.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/internal/mockmodel"
	"github.com/ralphloop/ralph/loop"
)

// mockAnthropic serves m for the test's length; unknown requests fail the
// test.
func mockAnthropic(t *testing.T, m *mockmodel.Anthropic) string {
	t.Helper()
	m.Logf = func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if strings.Contains(msg, "unknown") {
			t.Errorf("%s", msg)
		} else {
			t.Log(msg)
		}
	}
	return serveMock(t, m).URL
}

// claudeEnv points Claude Code at the mock and keeps it off the network:
// ANTHROPIC_BASE_URL is where its API client sends requests;
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC turns off its update checks,
// telemetry, error reports and feedback surveys at once, and the single
// switches are set too. auth is its credential: "ANTHROPIC_API_KEY=…" (an
// API account) or "CLAUDE_CODE_OAUTH_TOKEN=…" (a subscription, whose
// limits come as rate_limit_event); "" for none. The claude on its PATH is
// version v.
func claudeEnv(t *testing.T, v, url, auth string, extra ...string) []string {
	t.Helper()
	e := []string{
		"ANTHROPIC_BASE_URL=" + url,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}
	if auth != "" {
		e = append(e, auth)
	}
	return env(t, append(append(e, extra...), pathWith(t, "claude", v))...)
}

const (
	apiKey     = "ANTHROPIC_API_KEY=sk-ant-mock"
	oauthToken = "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-mock"
)

var testCmd = []string{"go", "test", "./..."}

// claudeArgv is the command line ralph gives claude (agent/claude.go),
// with the permissions `ralph init` writes when perms is true.
func claudeArgv(path string, perms bool) []string {
	argv := []string{path, "-p", "--output-format", "stream-json", "--verbose"}
	if perms {
		argv = append(argv, agent.PermissionsFor("claude", testCmd, false).Args...)
	}
	return argv
}

// runClaude runs claude version v as ralph does (prompt on stdin) in dir,
// killing it after limit; it returns stdout and stderr.
func runClaude(t *testing.T, v, dir string, env []string, limit time.Duration, perms bool, args ...string) (string, string) {
	t.Helper()
	argv := append(claudeArgv(cliAt(t, "claude", v), perms), args...)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// Claude Code's Bash tool starts commands in a session of their own,
	// which killing claude's group misses: kill whatever carries the mark.
	mark := "RALPH_CONFORMANCE_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36) + "r"
	defer func() {
		for _, p := range marked(mark) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}()
	cmd.Dir, cmd.Env = dir, append(env[:len(env):len(env)], mark)
	cmd.Stdin = strings.NewReader("Make the tests pass: Add must return the sum of a and b.\n")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("claude %v: %v", argv[5:], err)
	return out.String(), errOut.String()
}

// TestClaudeRecord records the real claude's output for each script into
// agent/testdata/real/claude-VERSION-NAME.jsonl (RALPH_RECORD=1), for every
// installed version or only RALPH_RECORD_VERSION; the parser's tests read
// them.
func TestClaudeRecord(t *testing.T) {
	if os.Getenv("RALPH_RECORD") != "1" {
		t.Skip("RALPH_RECORD=1 records the transcripts")
	}
	anthropic := func(script string) func() *mockmodel.Anthropic {
		return func() *mockmodel.Anthropic { return &mockmodel.Anthropic{Script: script} }
	}
	for _, c := range []struct {
		name  string
		m     func() *mockmodel.Anthropic
		auth  string
		extra []string
		perms bool
		limit time.Duration
		args  []string
	}{
		{"fix", anthropic("fix"), apiKey, nil, true, time.Minute, nil},
		{"denied", anthropic("denied"), apiKey, nil, false, time.Minute, nil},
		{"retry", anthropic("retry"), apiKey, nil, true, time.Minute, nil},
		{"retry-fatal", anthropic("retry-fatal"), apiKey, nil, true, time.Minute, nil},
		{"overloaded", anthropic("overloaded"), apiKey, nil, true, time.Minute, nil},
		{"limit", func() *mockmodel.Anthropic {
			return &mockmodel.Anthropic{Script: "limit", Reset: time.Now().Add(time.Hour)}
		}, oauthToken, nil, true, time.Minute, nil},
		{"hang", anthropic("hang"), apiKey, nil, true, 8 * time.Second, nil},
		{"flood", func() *mockmodel.Anthropic { return &mockmodel.Anthropic{Script: "flood", Flood: 64 << 10} },
			apiKey, nil, true, time.Minute, nil},
		{"not-logged-in", anthropic("fix"), "", nil, true, time.Minute, nil},
		{"invalid-key", anthropic("fix"), "ANTHROPIC_API_KEY=" + mockmodel.InvalidKey,
			[]string{"CLAUDE_CODE_MAX_RETRIES=1"}, true, time.Minute, nil},
		// Bash runs timeout 301 sleep 300 and claude is killed after 40 s: a tool use
		// that never returned, and the progress notices of a tool still
		// running (2.1.332 prints one every 30 s).
		{"sleep", anthropic("sleep"), apiKey, nil, false, 40 * time.Second, []string{"--allowedTools", "Bash(timeout *)"}},
	} {
		for _, v := range versions("claude") {
			if only := os.Getenv("RALPH_RECORD_VERSION"); only != "" && only != v {
				continue
			}
			t.Run(v+"/"+c.name, func(t *testing.T) {
				url := mockAnthropic(t, c.m())
				out, errOut := runClaude(t, v, goProject(t), claudeEnv(t, v, url, c.auth, c.extra...), c.limit, c.perms, c.args...)
				writeTranscript(t, "claude-"+v+"-"+c.name, ".jsonl", out, errOut)
			})
		}
	}
}

// TestClaudePermissions: with the permissions init writes, the real claude
// edits calc.go and runs the tests; without them both are refused, and
// the stream says so.
func TestClaudePermissions(t *testing.T) {
	t.Parallel()
	eachVersion(t, "claude", func(t *testing.T, v string) {
		for _, perms := range []bool{true, false} {
			dir := goProject(t)
			url := mockAnthropic(t, &mockmodel.Anthropic{Script: "fix"})
			out, _ := runClaude(t, v, dir, claudeEnv(t, v, url, apiKey), time.Minute, perms)
			calc, err := os.ReadFile(filepath.Join(dir, "calc.go"))
			if err != nil {
				t.Fatal(err)
			}
			fixed := strings.Contains(string(calc), "return a + b")
			denied := strings.Contains(out, `"permission_denials":[{`)
			if fixed != perms || denied == perms {
				t.Errorf("permissions %t: calc.go fixed %t, denials in the result %t:\n%s", perms, fixed, denied, out)
			}
			if perms && !strings.Contains(out, `ok  \tcalc`) {
				t.Errorf("with permissions the test command did not run and pass:\n%s", out)
			}
		}
	})
}

// project is a goProject with `ralph init --agent claude` run in it.
func claudeProject(t *testing.T, env []string) string {
	t.Helper()
	dir := goProject(t)
	if r := ralph(t, dir, env, time.Minute, "init", "--agent", "claude", "--test", "go test ./..."); r.code != 0 {
		t.Fatalf("ralph init: %s", r)
	}
	return dir
}

// verify checks the run's chain.
func verify(t *testing.T, dir string, env []string) {
	t.Helper()
	if r := ralph(t, dir, env, time.Minute, "chain", "verify"); r.code != 0 {
		t.Errorf("ralph chain verify: %s", r)
	}
}

// chainText is the run's chain as JSON lines.
func chainText(t *testing.T, dir string, env []string) string {
	t.Helper()
	r := ralph(t, dir, env, time.Minute, "chain", "show", "--json")
	if r.code != 0 {
		t.Fatalf("ralph chain show: %s", r)
	}
	return r.stdout
}

// TestClaudeInitDone: the loop `ralph init --agent claude` writes, used as
// written, ends done with the real claude, and its chain verifies.
func TestClaudeInitDone(t *testing.T) {
	t.Parallel()
	eachVersion(t, "claude", func(t *testing.T, v string) {
		for _, c := range []struct {
			name string
			m    *mockmodel.Anthropic
		}{
			{"fix", &mockmodel.Anthropic{Script: "fix"}},
			// 429, 503 and 529 before the answer: Claude Code retries them
			// itself (api_retry), and the run goes on.
			{"retry", &mockmodel.Anthropic{Script: "retry"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				e := claudeEnv(t, v, mockAnthropic(t, c.m), apiKey)
				dir := claudeProject(t, e)
				r := ralph(t, dir, e, 90*time.Second, "run", "--no-tui")
				if r.code != 0 {
					t.Fatalf("ralph run: %s", r)
				}
				verify(t, dir, e)
				if c.name != "retry" {
					return
				}
				// Shown live (headless: "agent ~ retrying after 429 (attempt
				// 1/10, next in 1s)") and recorded on the chain.
				if !strings.Contains(r.stdout, "retrying after 429") || !strings.Contains(r.stdout, "retrying after 529") {
					t.Errorf("the retries are not shown live: %s", r)
				}
				if !regexp.MustCompile(`(?i)retr(y|ies)[^"]*429|429[^"]*retr`).MatchString(chainText(t, dir, e)) {
					t.Errorf("the chain does not record the retry after 429")
				}
			})
		}
	})
}

// TestClaudeLimit: a subscription's usage limit whose exact reset is a
// few seconds ahead: ralph waits for it (not for the minute the text
// names, nor for tomorrow) and goes on to done.
func TestClaudeLimit(t *testing.T) {
	t.Parallel()
	eachVersion(t, "claude", func(t *testing.T, v string) {
		m := &mockmodel.Anthropic{Script: "limit", Reset: time.Now().Add(20 * time.Second)}
		e := claudeEnv(t, v, mockAnthropic(t, m), oauthToken)
		dir := claudeProject(t, e)
		start := time.Now()
		r := ralph(t, dir, e, 100*time.Second, "run", "--no-tui")
		if r.code != 0 {
			t.Fatalf("ralph run: %s", r)
		}
		t.Logf("claude %s: %s", v, r)
		if time.Now().Before(m.Reset) {
			t.Errorf("the run ended done before the limit's reset")
		}
		// The wait ends at the exact reset the rate_limit_event gave (the
		// mock names the whole second it has lifted in), never at a
		// guessed back-off (60 s, then 120 s).
		reset := m.Reset.Truncate(time.Second)
		if reset.Before(m.Reset) {
			reset = reset.Add(time.Second)
		}
		if want := "waiting until " + loop.WaitUntilText(reset, time.Now()) + ": agent usage-limit"; !strings.Contains(r.stdout, want) {
			t.Errorf("the run did not wait for the exact reset (%q):\n%s", want, r)
		}
		if d := time.Since(start); d > 80*time.Second {
			t.Errorf("the run took %s: it did not retry at the exact reset", d)
		}
		verify(t, dir, e)
	})
}

// TestClaudeRetryFatal: a 429 Claude Code retried, then a 400: the call's
// failure is the 400, not a rate limit to wait for.
func TestClaudeRetryFatal(t *testing.T) {
	t.Parallel()
	eachVersion(t, "claude", func(t *testing.T, v string) {
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "retry-fatal"}), apiKey)
		dir := claudeProject(t, e)
		editToml(t, dir, `(?m)^max = 20$`, "max = 1")
		start := time.Now()
		r := ralph(t, dir, e, 60*time.Second, "run", "--no-tui")
		if r.code == 0 {
			t.Fatalf("ralph run ended done on a 400: %s", r)
		}
		if d := time.Since(start); d > 40*time.Second {
			t.Errorf("the run took %s: it waited as for a limit", d)
		}
		if out := r.stdout + r.stderr; strings.Contains(out, "waiting until") || !strings.Contains(out, "400") {
			t.Errorf("the run did not report the 400 as its error, or waited for a limit: %s", r)
		}
	})
}

// TestClaudeDenied: init's permission arguments removed, the real claude
// cannot edit: the run stops after the first iteration, reason
// "permission denied", exit 1, naming the flag to add.
func TestClaudeDenied(t *testing.T) {
	t.Parallel()
	eachVersion(t, "claude", func(t *testing.T, v string) {
		m := &mockmodel.Anthropic{Script: "denied"}
		e := claudeEnv(t, v, mockAnthropic(t, m), apiKey)
		dir := claudeProject(t, e)
		editToml(t, dir, `(?m)^#? ?args = .*$`, "# args = []")
		r := ralph(t, dir, e, 90*time.Second, "run", "--no-tui")
		if r.code != 1 {
			t.Errorf("ralph run: want exit 1: %s", r)
		}
		out := r.stdout + r.stderr
		if !strings.Contains(out, "permission denied") || !strings.Contains(out, "--permission-mode") {
			t.Errorf("the run does not stop as permission denied with the flag to add: %s", r)
		}
		if n := m.Requests(); n > 5 {
			t.Errorf("the model was asked %d times: the run went on past the first iteration", n)
		}
		chain := chainText(t, dir, e)
		if !strings.Contains(chain, "calc.go") || !strings.Contains(chain, "Edit") {
			t.Errorf("the chain does not name the denied tool and path")
		}
		verify(t, dir, e)
	})
}

// TestClaudeHang: the model's stream starts and goes silent; the idle
// timeout kills claude and the call is recorded as idle-timeout.
func TestClaudeHang(t *testing.T) {
	t.Parallel()
	newestOnly(t, "claude", func(t *testing.T, v string) {
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "hang"}), apiKey)
		dir := claudeProject(t, e)
		editToml(t, dir, `(?m)^idle_timeout = .*$`, `idle_timeout = "4s"`)
		editToml(t, dir, `(?m)^max = 20$`, "max = 1")
		r := ralph(t, dir, e, 60*time.Second, "run", "--no-tui")
		if r.code == 0 {
			t.Errorf("ralph run ended done on a hung agent: %s", r)
		}
		if chain := chainText(t, dir, e); !strings.Contains(chain, "idle-timeout") {
			t.Errorf("the chain does not record the idle timeout:\n%s", chain)
		}
		verify(t, dir, e)
	})
}

// TestClaudeContainment: ralph is killed with SIGKILL while the real
// claude's Bash tool runs `sleep 300`; then no process of the call
// remains, found by pid through an environment mark every process of the
// call inherits (also those in new sessions).
func TestClaudeContainment(t *testing.T) {
	t.Parallel()
	newestOnly(t, "claude", func(t *testing.T, v string) {
		if ralphBin == "" {
			t.Skip("ralph was not built")
		}
		mark := "RALPH_CONFORMANCE_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36)
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "sleep"}), apiKey, mark)
		dir := claudeProject(t, e)
		// The script's Bash call is `timeout 301 sleep 300`: allow it.
		editToml(t, dir, `(?m)^#? ?args = .*$`, `args = ["--allowedTools", "Bash(timeout *)"]`)
		cmd := exec.Command(ralphBin, "run", "--no-tui")
		cmd.Dir, cmd.Env = dir, e
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		var sleeping []int
		for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			for _, p := range marked(mark) {
				if processCmdline(p) == "sleep 300" {
					sleeping = append(sleeping, p)
				}
			}
			if len(sleeping) > 0 {
				break
			}
		}
		if len(sleeping) == 0 {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("claude's Bash tool never ran sleep 300:\n%s", out.String())
		}
		procs := marked(mark)
		t.Logf("processes of the call: %v (sleep %v)", procs, sleeping)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		for pid, cmd := range survivors(procs) {
			t.Errorf("process %d (%s) outlived ralph's SIGKILL", pid, cmd)
		}
	})
}

// marked lists the processes whose environment holds mark.
func marked(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, b...), []byte("\x00"+mark+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestClaudeRunBigPrompt: agent.Run (what ralph's agent.run calls) gives
// the real claude a 1 MB prompt on stdin; the call ends with its answer.
func TestClaudeRunBigPrompt(t *testing.T) {
	t.Parallel()
	newestOnly(t, "claude", func(t *testing.T, v string) {
		needCLI(t, "claude")
		m := &mockmodel.Anthropic{Script: "fix"}
		e := claudeEnv(t, v, mockAnthropic(t, m), apiKey)
		prompt := strings.Repeat("Make the tests pass: Add must return the sum of a and b. ", 1<<20/58+1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := agent.Run(ctx, agent.Options{CLI: "claude", Prompt: prompt, Dir: goProject(t), Env: e,
			Args: agent.PermissionsFor("claude", testCmd, false).Args})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || res.Exit != 0 || res.Text != "Add now returns a + b; go test passes." || res.ToolUses != 3 || res.CostSource != "reported" {
			t.Errorf("result: %+v", res)
		}
	})
}

// TestClaudeIdleTimeoutTool: claude's Bash tool runs `sleep 300` and
// prints nothing; the idle timeout ends the call, every process of it is
// gone (also those in new sessions), and the tool use that never returned
// is recorded as cancelled, not ok.
func TestClaudeIdleTimeoutTool(t *testing.T) {
	t.Parallel()
	eachVersion(t, "claude", func(t *testing.T, v string) {
		mark := "RALPH_CONFORMANCE_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36) + "i"
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "sleep"}), apiKey, mark)
		dir := claudeProject(t, e)
		editToml(t, dir, `(?m)^#? ?args = .*$`, `args = ["--allowedTools", "Bash(timeout *)"]`)
		editToml(t, dir, `(?m)^idle_timeout = .*$`, `idle_timeout = "10s"`)
		editToml(t, dir, `(?m)^max = 20$`, "max = 1")
		r := ralph(t, dir, e, 90*time.Second, "run", "--no-tui")
		if r.code == 0 {
			t.Errorf("ralph run ended done: %s", r)
		}
		for pid, cmd := range survivors(marked(mark)) {
			t.Errorf("process %d (%s) outlived the idle timeout", pid, cmd)
		}
		var bash string
		for _, l := range strings.Split(chainText(t, dir, e), "\n") {
			if strings.Contains(l, "AgentToolUse") && strings.Contains(l, "Bash") {
				bash = l
			}
		}
		if bash == "" || !strings.Contains(bash, "cancelled") || strings.Contains(bash, `"success":true`) {
			t.Errorf("the Bash tool use that never returned is not recorded as cancelled: %s", bash)
		}
		verify(t, dir, e)
	})
}

// TestClaudeIdleTimeoutProgress: the newest claude prints a tool_progress
// line every 30 s while its Bash tool runs a silent command; with
// idle_timeout = "40s" the call still ends at the idle timeout (a progress
// notice is no output), and the notice is shown as a progress line, not
// as raw JSON. Before, each notice reset the idle clock and only the
// 30-minute call timeout would have ended it.
func TestClaudeIdleTimeoutProgress(t *testing.T) {
	t.Parallel()
	v := newest("claude")
	needCLI(t, "claude")
	e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "sleep"}), apiKey)
	dir := claudeProject(t, e)
	editToml(t, dir, `(?m)^#? ?args = .*$`, `args = ["--allowedTools", "Bash(timeout *)"]`)
	editToml(t, dir, `(?m)^idle_timeout = .*$`, `idle_timeout = "40s"`)
	editToml(t, dir, `(?m)^max = 20$`, "max = 1")
	start := time.Now()
	r := ralph(t, dir, e, 3*time.Minute, "run", "--no-tui")
	took := time.Since(start)
	t.Logf("claude %s, %s: %s", v, took, r)
	if !strings.Contains(r.stdout, "agent … Bash running for 30s") || strings.Contains(r.stdout, `"tool_progress"`) {
		t.Errorf("the progress notice is not shown as a progress line:\n%s", r)
	}
	if chain := chainText(t, dir, e); !strings.Contains(chain, "idle-timeout") || took > 100*time.Second {
		t.Errorf("the call was not ended by the 40 s idle timeout (the run took %s)", took)
	}
}

// TestClaudeNotLoggedIn: a claude with no credentials: the run fails with
// one sentence that says how to log in, and is no limit to wait for.
func TestClaudeNotLoggedIn(t *testing.T) {
	t.Parallel()
	newestOnly(t, "claude", func(t *testing.T, v string) {
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "fix"}), "")
		dir := claudeProject(t, e)
		editToml(t, dir, `(?m)^max = 20$`, "max = 1")
		r := ralph(t, dir, e, 90*time.Second, "run", "--no-tui")
		out := r.stdout + r.stderr
		if r.code == 0 || !strings.Contains(out, "Claude Code is not authenticated (Not logged in · Please run /login)") ||
			strings.Contains(out, "waiting until") {
			t.Errorf("ralph run with claude not logged in: %s", r)
		}
		verify(t, dir, e)
	})
}

// TestClaudeFlood: the real claude answers with 8 MiB of text (printed
// twice: the assistant message and the result): the call is recorded on
// the chain all the same, and its output is in the call's log file.
func TestClaudeFlood(t *testing.T) {
	t.Parallel()
	newestOnly(t, "claude", func(t *testing.T, v string) {
		const size = 8 << 20
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "flood", Flood: size}), apiKey)
		dir := claudeProject(t, e)
		editToml(t, dir, `(?m)^max = 20$`, "max = 1")
		r := ralph(t, dir, e, 90*time.Second, "run", "--no-tui")
		if strings.Contains(r.stderr, "panic") {
			t.Fatalf("ralph run: %s", r)
		}
		var call string
		for _, l := range strings.Split(chainText(t, dir, e), "\n") {
			if strings.Contains(l, `"action_type":"CapabilityCall"`) && strings.Contains(l, "agent.run") {
				call = l
			}
		}
		if call == "" {
			t.Fatalf("the flooding call is not on the chain")
		}
		logs, _ := filepath.Glob(filepath.Join(storeOf(t, dir, r), "logs", "*", "*.out"))
		var biggest int64
		for _, l := range logs {
			if fi, err := os.Stat(l); err == nil && fi.Size() > biggest {
				biggest = fi.Size()
			}
		}
		if biggest < 2*size {
			t.Errorf("no call log holds the whole output (largest %d bytes of %v)", biggest, logs)
		}
		verify(t, dir, e)
	})
}

// TestClaudeFullAccess: `ralph init --agent claude --full-access` writes
// --dangerously-skip-permissions, with a warning, and the loop ends done.
// Claude Code refuses that flag as root unless IS_SANDBOX=1, which ralph's
// sandbox (the one init writes) sets: the user need not.
func TestClaudeFullAccess(t *testing.T) {
	t.Parallel()
	newestOnly(t, "claude", func(t *testing.T, v string) {
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "fix"}), apiKey)
		dir := goProject(t)
		if r := ralph(t, dir, e, time.Minute, "init", "--agent", "claude", "--test", "go test ./...", "--full-access"); r.code != 0 {
			t.Fatalf("ralph init: %s", r)
		}
		toml, err := os.ReadFile(filepath.Join(dir, "ralph.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(toml), `"--dangerously-skip-permissions"`) || !strings.Contains(string(toml), "WARNING") {
			t.Errorf("ralph.toml has no bypass flag with a warning:\n%s", toml)
		}
		if r := ralph(t, dir, e, 90*time.Second, "run", "--no-tui"); r.code != 0 {
			t.Errorf("ralph run: %s", r)
		}
		verify(t, dir, e)
	})
}

// TestClaudeFullAccessAsRoot: as root without IS_SANDBOX and without
// ralph's sandbox (which would set it), Claude Code refuses the bypass
// flag; the run fails with the fix, not a bare exit 1.
func TestClaudeFullAccessAsRoot(t *testing.T) {
	t.Parallel()
	newestOnly(t, "claude", func(t *testing.T, v string) {
		if os.Getuid() != 0 {
			t.Skip("Claude Code refuses the bypass flag only as root")
		}
		e := claudeEnv(t, v, mockAnthropic(t, &mockmodel.Anthropic{Script: "fix"}), apiKey)
		dir := goProject(t)
		if r := ralph(t, dir, e, time.Minute, "init", "--agent", "claude", "--test", "go test ./...", "--full-access"); r.code != 0 {
			t.Fatalf("ralph init: %s", r)
		}
		editToml(t, dir, `(?m)^max = 20$`, "max = 1")
		unsandbox(t, dir)
		r := ralph(t, dir, e, time.Minute, "run", "--no-tui")
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "set IS_SANDBOX=1 in [agent.env]") {
			t.Errorf("ralph run: %s", r)
		}
	})
}
