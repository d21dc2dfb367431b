package agent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/proctest"
	"github.com/ralphloop/ralph/internal/testenv"
	"github.com/ralphloop/ralph/sandbox"
)

// fakeEnv is an environment with the fake agent CLIs of testdata/bin first
// on PATH, a private counter directory, and extra (KEY=value) settings.
func fakeEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	bin, err := filepath.Abs("testdata/bin")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"FAKE_AGENT_STATE=" + t.TempDir(),
	}
	return append(env, extra...)
}

func fakeOptions(t *testing.T, cli string, extra ...string) Options {
	env := fakeEnv(t, extra...)
	// No LookPath: Run finds the fake CLIs on the PATH of env.
	return Options{CLI: cli, Prompt: "Make the tests pass.", Dir: t.TempDir(), Env: env,
		Timeout: time.Minute, IdleTimeout: 30 * time.Second}
}

func kinds(evs []Event) []EventKind {
	var ks []EventKind
	for _, e := range evs {
		ks = append(ks, e.Kind)
	}
	return ks
}

func TestRunClaudeHonestAgent(t *testing.T) {
	t.Parallel()
	o := fakeOptions(t, "claude", "FAKE_AGENT_DONE_AFTER=2")
	var evs []Event
	o.OnEvent = func(e Event) { evs = append(evs, e) }
	for call := 1; call <= 2; call++ {
		evs = nil
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Exit != 0 || res.Stopped != "" || res.IsError || res.CLI != "claude" {
			t.Fatalf("call %d: exit %d stopped %q error %t cli %q; stderr %s", call, res.Exit, res.Stopped, res.IsError, res.CLI, res.Stderr)
		}
		if res.CostUSD != 0.01 || res.CostSource != "reported" {
			t.Errorf("call %d: cost %v (%s), want 0.01 reported", call, res.CostUSD, res.CostSource)
		}
		if want := (Usage{Input: 36, Output: 120, CacheRead: 12000, CacheWrite: 2400}); res.Tokens != want {
			t.Errorf("call %d: tokens %+v, want %+v", call, res.Tokens, want)
		}
		if res.Turns != 3 || res.ToolUses != 1 || !strings.HasPrefix(res.SessionID, "fake-session-") {
			t.Errorf("call %d: turns %d tool uses %d session %q", call, res.Turns, res.ToolUses, res.SessionID)
		}
		wantKinds := []EventKind{EventSession, EventText, EventUsage, EventToolUse, EventUsage, EventToolResult,
			EventText, EventUsage, EventUsage, EventCost, EventFinal}
		if got := kinds(evs); !slices.Equal(got, wantKinds) {
			t.Errorf("call %d: events %v, want %v", call, got, wantKinds)
		}
	}
	res, _ := Run(context.Background(), o)
	if !strings.Contains(res.Text, "<promise>COMPLETE</promise>") {
		t.Errorf("third call text %q lacks the promise", res.Text)
	}
	b, err := os.ReadFile(filepath.Join(o.Dir, "progress.txt"))
	if err != nil || string(b) != "step 1\nstep 2\nstep 3\n" {
		t.Errorf("progress.txt = %q, %v", b, err)
	}
}

func TestRunClaudeUsageLimitOnce(t *testing.T) {
	t.Parallel()
	o := fakeOptions(t, "claude", "FAKE_AGENT_SCENARIO=usage-limit-once", "FAKE_AGENT_RESET_SECONDS=2")
	before := time.Now()
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != StoppedUsageLimit || res.Limit == nil || res.Limit.Kind != LimitUsage || res.Exit != 1 {
		t.Fatalf("first call: stopped %q limit %+v exit %d", res.Stopped, res.Limit, res.Exit)
	}
	if d := res.Limit.Reset.Sub(before); d < time.Second || d > 4*time.Second {
		t.Errorf("reset %v is %v after the call began, want about 2s", res.Limit.Reset, d)
	}
	res, err = Run(context.Background(), o)
	if err != nil || res.Stopped != "" || res.Limit != nil || res.Exit != 0 {
		t.Fatalf("second call: err %v stopped %q limit %+v exit %d", err, res.Stopped, res.Limit, res.Exit)
	}
}

func TestRunCommandPlainText(t *testing.T) {
	t.Parallel()
	o := Options{CLI: "command", Command: []string{"sh", "-c", `cat; echo; echo "done $1"`, "sh"}, Args: []string{"now"},
		Prompt: "line one\nline two", Dir: t.TempDir()}
	var texts []string
	o.OnEvent = func(e Event) {
		if e.Kind != EventText {
			t.Errorf("event %v from a command", e.Kind)
		}
		texts = append(texts, e.Text)
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// The lines of one read come in one event.
	if res.Text != "line one\nline two\ndone now" || res.Exit != 0 || strings.Join(texts, "\n") != res.Text {
		t.Errorf("text %q exit %d events %q", res.Text, res.Exit, texts)
	}
	if res.CostSource != "" || res.CostUSD != 0 {
		t.Errorf("cost %v %q for a command that reports none", res.CostUSD, res.CostSource)
	}
}

func TestRunCommandExitAndStderr(t *testing.T) {
	t.Parallel()
	o := Options{CLI: "command", Command: []string{"sh", "-c", "echo oops >&2; exit 4"}, Dir: t.TempDir()}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 4 || res.Stderr != "oops\n" || res.Stopped != "" {
		t.Errorf("exit %d stderr %q stopped %q", res.Exit, res.Stderr, res.Stopped)
	}
}

func TestRunStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		script  string
		timeout time.Duration
		idle    time.Duration
		cancel  time.Duration
		want    string
	}{
		{"idle-timeout", "echo started; sleep 30", time.Minute, 300 * time.Millisecond, 0, StoppedIdleTimeout},
		{"idle-timeout-stderr-quiet", "echo started >&2; sleep 30", time.Minute, 300 * time.Millisecond, 0, StoppedIdleTimeout},
		{"timeout", "while :; do echo tick; sleep 0.05; done", 400 * time.Millisecond, 10 * time.Second, 0, StoppedTimeout},
		// Ticks on stderr keep the idle timer (1 s, twenty ticks) from
		// firing, so the call runs into its timeout; the idle bound leaves
		// room for a loaded machine's gaps between ticks.
		{"timeout-stderr-ticks", "while :; do echo tick >&2; sleep 0.05; done", 3 * time.Second, time.Second, 0, StoppedTimeout},
		{"cancelled", "sleep 30", time.Minute, 10 * time.Second, 200 * time.Millisecond, StoppedCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel > 0 {
				time.AfterFunc(tc.cancel, cancel)
			}
			pidFile := filepath.Join(t.TempDir(), "pid")
			script := "sleep 30 & echo $! > " + pidFile + "; " + tc.script
			res, err := Run(ctx, Options{CLI: "command", Command: []string{"sh", "-c", script}, Dir: t.TempDir(),
				Timeout: tc.timeout, IdleTimeout: tc.idle})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != tc.want || res.Exit != -1 {
				t.Errorf("stopped %q exit %d, want %q -1", res.Stopped, res.Exit, tc.want)
			}
			if res.Duration >= 30*time.Second {
				t.Errorf("took %v: the call waited for the sleep its script left behind", res.Duration)
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			proctest.WaitGone(t, pid)
		})
	}
}

func TestRunRelativeCommandInDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte("#!/bin/sh\necho \"got $(cat)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{CLI: "command", Command: []string{"./agent.sh"}, Dir: dir, Prompt: "p"})
	if err != nil || res.Text != "got p" {
		t.Fatalf("err %v text %q", err, res.Text)
	}
}

func TestRunCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, Options{CLI: "command", Command: []string{"sh", "-c", "echo ran"}})
	if err != nil || res.Stopped != StoppedCancelled || res.Text != "" {
		t.Errorf("err %v stopped %q text %q", err, res.Stopped, res.Text)
	}
}

func TestRunCannotStart(t *testing.T) {
	t.Parallel()
	none := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, tc := range []struct {
		name string
		o    Options
		want error
		text string
	}{
		{"unknown cli", Options{CLI: "cursor"}, ErrUnknownCLI, "use one of"},
		{"not on PATH", Options{CLI: "claude", LookPath: none}, ErrNotFound, `"claude" is not on PATH`},
		{"auto finds none", Options{CLI: "auto", LookPath: none}, ErrNotFound, "found none of claude, codex, gemini, opencode"},
		{"command without argv", Options{CLI: "command"}, nil, "has no command"},
		{"command not on PATH", Options{CLI: "command", Command: []string{"no-such-agent-cli"}}, ErrNotFound, "no-such-agent-cli"},
		{"not on the PATH of Env", Options{CLI: "claude", Env: []string{"PATH=" + t.TempDir()}}, ErrNotFound, `"claude" is not on PATH`},
		{"relative command missing in Dir", Options{CLI: "command", Command: []string{"./agent.sh"}, Dir: t.TempDir()}, ErrNotFound, "./agent.sh"},
	} {
		_, err := Run(context.Background(), tc.o)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: err %v, want %v containing %q", tc.name, err, tc.want, tc.text)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	on := func(names ...string) func(string) (string, error) {
		return func(n string) (string, error) {
			for _, m := range names {
				if m == n {
					return "/usr/bin/" + n, nil
				}
			}
			return "", exec.ErrNotFound
		}
	}
	for _, tc := range []struct {
		cli, name, path string
		found           []string
	}{
		{"claude", "claude", "/usr/bin/claude", []string{"claude"}},
		{"auto", "claude", "/usr/bin/claude", []string{"opencode", "claude", "codex"}},
		{"auto", "codex", "/usr/bin/codex", []string{"opencode", "codex"}},
		{"auto", "gemini", "/usr/bin/gemini", []string{"opencode", "gemini"}},
		{"auto", "opencode", "/usr/bin/opencode", []string{"opencode"}},
		{"command", "command", "", nil},
	} {
		name, path, err := Resolve(tc.cli, on(tc.found...))
		if err != nil || name != tc.name || path != tc.path {
			t.Errorf("Resolve(%q) with %v = %q, %q, %v; want %q, %q", tc.cli, tc.found, name, path, err, tc.name, tc.path)
		}
	}
	for _, k := range Known() {
		if k != "auto" && k != "command" && backendFor(k).Name != k {
			t.Errorf("Known lists %q but it has no backend", k)
		}
	}
}

// TestRunFakeCLIs runs each backend against its fake CLI: a usage limit
// on the first call, then honest work.
func TestRunFakeCLIs(t *testing.T) {
	t.Parallel()
	price := &Price{Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite: 1.5}
	for _, tc := range []struct {
		cli        string
		argv       []string // after the binary
		limit      string
		maxReset   time.Duration // how far ahead the reset may be (0: none given)
		tokens     Usage
		cost       float64
		costSource string
		turns      int
	}{
		{"claude", []string{"-p", "--output-format", "stream-json", "--verbose"}, LimitUsage, 4 * time.Second,
			Usage{36, 120, 12000, 2400, 0}, 0.01, "reported", 3},
		{"codex", []string{"exec", "--json", "-"}, LimitUsage, 2 * time.Minute,
			Usage{Input: 1740, Output: 96, CacheRead: 3072}, price.Cost(Usage{Input: 1740, Output: 96, CacheRead: 3072}), "price", 1},
		{"gemini", []string{"--output-format", "stream-json"}, LimitUsage, 4 * time.Second,
			Usage{Input: 1904, Output: 210, CacheRead: 4096}, price.Cost(Usage{Input: 1904, Output: 210, CacheRead: 4096}), "price", 2},
		{"opencode", []string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR"}, LimitRate, 0,
			Usage{20, 150, 3000, 500, 10}, 0.01, "reported", 1},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			t.Parallel()
			o := fakeOptions(t, tc.cli, "FAKE_AGENT_SCENARIO=usage-limit-once", "FAKE_AGENT_DONE_AFTER=2")
			o.Price = price
			before := time.Now()
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != StoppedUsageLimit || res.Limit == nil || res.Limit.Kind != tc.limit || res.Exit != 1 {
				t.Fatalf("first call: stopped %q limit %+v exit %d; stderr %s", res.Stopped, res.Limit, res.Exit, res.Stderr)
			}
			if d := res.Limit.Reset.Sub(before); (tc.maxReset == 0) != res.Limit.Reset.IsZero() || (tc.maxReset > 0 && (d < 0 || d > tc.maxReset)) {
				t.Errorf("reset %v is %v after the call began, want within %v", res.Limit.Reset, d, tc.maxReset)
			}
			if want := append([]string{res.Argv[0]}, tc.argv...); !slices.Equal(res.Argv, want) {
				t.Errorf("argv %q, want %q", res.Argv, want)
			}
			for call := 2; call <= 3; call++ {
				res, err = Run(context.Background(), o)
				if err != nil || res.Stopped != "" || res.Exit != 0 || res.IsError || res.ToolUses != 1 || res.Turns != tc.turns {
					t.Fatalf("call %d: err %v stopped %q exit %d error %t tool uses %d turns %d; stderr %s",
						call, err, res.Stopped, res.Exit, res.IsError, res.ToolUses, res.Turns, res.Stderr)
				}
				if res.Tokens != tc.tokens || res.CostSource != tc.costSource || res.CostUSD != tc.cost {
					t.Errorf("call %d: tokens %+v cost %v (%s), want %+v %v (%s)", call, res.Tokens, res.CostUSD, res.CostSource, tc.tokens, tc.cost, tc.costSource)
				}
				if res.SessionID == "" {
					t.Errorf("call %d: no session id", call)
				}
			}
			if !strings.HasSuffix(res.Text, "<promise>COMPLETE</promise>") {
				t.Errorf("last call text %q lacks the promise", res.Text)
			}
			b, err := os.ReadFile(filepath.Join(o.Dir, "progress.txt"))
			if err != nil || string(b) != "step 2\nstep 3\n" {
				t.Errorf("progress.txt = %q, %v", b, err)
			}
		})
	}
}

// TestRunFakeScenarios checks the scenarios other tests rely on.
func TestRunFakeScenarios(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scenario string
		promise  bool
		edits    bool
		cost     float64
	}{
		{"liar", true, false, 0.01},
		{"stuck", false, false, 0.01},
		{"costly", false, true, 0.40},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			t.Parallel()
			o := fakeOptions(t, "claude", "FAKE_AGENT_SCENARIO="+tc.scenario)
			res, err := Run(context.Background(), o)
			if err != nil || res.Exit != 0 || res.Stopped != "" {
				t.Fatalf("err %v exit %d stopped %q", err, res.Exit, res.Stopped)
			}
			_, statErr := os.Stat(filepath.Join(o.Dir, "progress.txt"))
			if strings.Contains(res.Text, "<promise>") != tc.promise || (statErr == nil) != tc.edits || res.CostUSD != tc.cost {
				t.Errorf("text %q, edited %t, cost %v", res.Text, statErr == nil, res.CostUSD)
			}
		})
	}
	t.Run("hanging", func(t *testing.T) {
		t.Parallel()
		o := fakeOptions(t, "claude", "FAKE_AGENT_SCENARIO=hanging")
		// Long enough for the stand-in (a shell script) to start and print
		// its init line on a loaded machine; it then says nothing.
		o.IdleTimeout = 2 * time.Second
		var sawSession bool
		o.OnEvent = func(e Event) { sawSession = sawSession || e.Kind == EventSession }
		res, err := Run(context.Background(), o)
		if err != nil || res.Stopped != StoppedIdleTimeout || !sawSession {
			t.Errorf("err %v stopped %q saw the init line %t", err, res.Stopped, sawSession)
		}
	})
}

func TestRunStartFailureNamesTheFix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), Options{CLI: "command", Command: []string{filepath.Join(dir, "agent")}, Dir: filepath.Join(dir, "gone")})
	if err == nil || !strings.Contains(err.Error(), "working directory") {
		t.Fatalf("err %v", err)
	}
}

// TestIdleTimeoutIgnoresProgress: a claude stand-in that prints nothing
// but Claude Code 2.1.332's tool_progress heartbeat, every 50 ms, while
// its tool hangs, is stopped by the idle timeout: a heartbeat is no
// output. The same stand-in printing assistant text instead runs to its
// end. (Before, every heartbeat reset the idle clock: a hung `sleep 300`
// under Claude Code ran into the 30-minute call timeout.)
func TestIdleTimeoutIgnoresProgress(t *testing.T) {
	t.Parallel()
	progress := `{"type":"tool_progress","tool_use_id":"toolu_1-heartbeat-0","tool_name":"Bash","parent_tool_use_id":"toolu_1","elapsed_time_seconds":30,"heartbeat":true,"session_id":"s1","uuid":"u1"}`
	text := `{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"still working"}]},"session_id":"s1"}`
	for _, tc := range []struct {
		name, line string
		want       string
	}{
		{"progress", "echo '" + progress + "'", StoppedIdleTimeout},
		{"keep-alive", `echo '{"type":"keep_alive"}'`, StoppedIdleTimeout},
		{"text", "echo '" + text + "'", ""},
		// Bytes of a line not ended yet (a spinner, a prompt) are output
		// as they come, as OpenCode's first bytes are.
		{"unended line", "printf .", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script := filepath.Join(t.TempDir(), "claude")
			body := "#!/bin/sh\ncat >/dev/null\n" +
				`echo '{"type":"assistant","message":{"id":"m0","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"sleep 300"}}]},"session_id":"s1"}'` + "\n" +
				"i=0\nwhile [ $i -lt 60 ]; do " + tc.line + "; sleep 0.05; i=$((i+1)); done\n"
			if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			var progress int
			res, err := Run(context.Background(), Options{CLI: "claude", Dir: t.TempDir(), Timeout: time.Minute, IdleTimeout: 800 * time.Millisecond,
				LookPath: func(string) (string, error) { return script, nil },
				OnEvent: func(e Event) {
					if e.Kind == EventProgress {
						progress++
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != tc.want {
				t.Errorf("stopped %q after %s, want %q", res.Stopped, res.Duration, tc.want)
			}
			if tc.name == "progress" && progress == 0 {
				t.Errorf("no progress event")
			}
		})
	}
}

// TestRunAddsConfinedArgsUnderASandbox: under a sandbox, Run gives codex
// the args its backend adds (its own sandbox off, its plugins off), and
// says so on the Result; without one, the args are the config's.
func TestRunAddsConfinedArgsUnderASandbox(t *testing.T) {
	home := t.TempDir()
	for _, v := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"} {
		t.Setenv(v, home)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "codex")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ncat >/dev/null\necho \"$@\" > args.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context) (string, Result) {
		t.Helper()
		res, err := Run(ctx, Options{CLI: "codex", Args: []string{"--sandbox", "workspace-write"}, Prompt: "p", Dir: dir,
			LookPath: func(string) (string, error) { return bin, nil }, Timeout: time.Minute})
		if err != nil || res.Exit != 0 {
			t.Fatalf("Run: %v, %+v", err, res)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "args.txt"))
		return strings.TrimSpace(string(b)), res
	}
	if got, res := run(context.Background()); got != "exec --json --sandbox workspace-write -" || res.SandboxArgs != nil {
		t.Errorf("without a sandbox codex ran with %q (added %q)", got, res.SandboxArgs)
	}
	s, err := sandbox.New(sandbox.Spec{Mode: sandbox.Auto}, sandbox.Bounds{Workdir: dir}, nil)
	if err != nil {
		testenv.Need(t, "a sandbox", err)
	}
	defer s.Close()
	want := "exec --json --sandbox workspace-write " + codexBypass + " --disable plugins -"
	if got, res := run(sandbox.With(context.Background(), s)); got != want || strings.Join(res.SandboxArgs, " ") != codexBypass+" --disable plugins" {
		t.Errorf("under %s codex ran with %q (added %q), want %q", s.Mechanism(), got, res.SandboxArgs, want)
	}
}
