package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/internal/mockmodel"
	"github.com/ralphloop/ralph/internal/testenv"
)

// codexModel is a model whose tools codex 0.169 offers as exec_command and
// apply_patch (its default model composes tools in JavaScript instead).
const codexModel = "gpt-5.5"

const codexKey = "sk-mock-codex"

// codexMock starts the mock Responses API with script as its default and
// returns the environment that points codex at it: a CODEX_HOME with a
// config.toml naming the mock as the model provider (the API key in
// MOCK_OPENAI_KEY), with analytics, feedback and update checks off.
func codexMock(t *testing.T, v, script string, extra ...string) (*mockmodel.OpenAI, []string) {
	t.Helper()
	return codexMockModel(t, v, script, codexModel, extra...)
}

// codexMockModel is codexMock with model in the config ("": codex's
// default model). The codex on its PATH is version v.
func codexMockModel(t *testing.T, v, script, model string, extra ...string) (*mockmodel.OpenAI, []string) {
	t.Helper()
	m := &mockmodel.OpenAI{Script: script, Logf: t.Logf, APIKey: codexKey}
	srv := serveMock(t, m)
	// TMPDIR of its own, as a user's /tmp is: codex links its
	// codex-linux-sandbox helper under CODEX_HOME only when CODEX_HOME
	// does not lie in the temporary directory, and its own sandbox
	// (bubblewrap) cannot start a command without it.
	e := env(t, append([]string{"TMPDIR=" + t.TempDir()}, append(slices.Clone(extra), pathWith(t, "codex", v))...)...)
	home := ""
	for _, kv := range e {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	codexHome := mkdir(t, filepath.Join(home, ".codex"))
	modelLine := ""
	if model != "" {
		modelLine = fmt.Sprintf("model = %q\n", model)
	}
	config := fmt.Sprintf(`%smodel_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "%s/v1"
wire_api = "responses"
env_key = "MOCK_OPENAI_KEY"
request_max_retries = 2
stream_max_retries = 2

[analytics]
enabled = false

[feedback]
enabled = false
`, modelLine, srv.URL)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e = append(e, "CODEX_HOME="+codexHome)
	if !hasEnv(extra, "MOCK_OPENAI_KEY") {
		e = append(e, "MOCK_OPENAI_KEY="+codexKey)
	}
	return m, e
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// codexArgv is the command line ralph runs for codex with args.
func codexArgv(path string, args []string) []string {
	argv := append([]string{path, "exec", "--json"}, args...)
	return append(argv, "-")
}

// codexCase is one recorded scenario: the script, whether the loop's
// permissions are given, and how long it may run.
type codexCase struct {
	name, prompt string
	perms        bool
	limit        time.Duration
	kill         time.Duration // the call is killed after this long (a hang); 0: runs to its end
	env          []string
	// defaultModel: codex's own default model (code mode) instead of codexModel.
	defaultModel bool
}

var codexCases = []codexCase{
	{name: "fix", prompt: "Make the tests pass.", perms: true, limit: 2 * time.Minute},
	{name: "denied", prompt: "Make the tests pass. mock:denied", limit: time.Minute},
	{name: "limit", prompt: "Make the tests pass. mock:limit reset=600", perms: true, limit: time.Minute},
	{name: "retry-429", prompt: "Make the tests pass. mock:retry status=429 n=1", perms: true, limit: 2 * time.Minute},
	{name: "retry-503", prompt: "Make the tests pass. mock:retry status=503 n=1", perms: true, limit: 2 * time.Minute},
	{name: "retry-429-400", prompt: "Make the tests pass. mock:retry status=429 n=1 then=400", perms: true, limit: time.Minute},
	{name: "overloaded", prompt: "Make the tests pass. mock:retry status=503 n=9", perms: true, limit: 2 * time.Minute},
	{name: "hang", prompt: "Make the tests pass. mock:hang", perms: true, limit: time.Minute, kill: 5 * time.Second},
	{name: "flood", prompt: "Say a lot. mock:flood bytes=262144", perms: true, limit: time.Minute},
	{name: "codemode", prompt: "Read calc.go. mock:codemode", perms: true, limit: time.Minute, defaultModel: true},
	{name: "binary", prompt: "Print some bytes. mock:binary", perms: true, limit: time.Minute},
	// A prompt past codex's 1 MiB input limit.
	{name: "prompt-1mb", prompt: "Make the tests pass. " + strings.Repeat("x", 1<<20), perms: true, limit: time.Minute},
	{name: "unauthenticated", prompt: "Make the tests pass.", perms: true, limit: time.Minute,
		env: []string{"MOCK_OPENAI_KEY=sk-wrong"}},
}

// TestCodexRecord runs the real codex on each case as ralph does and
// writes what it printed to agent/testdata/real/codex-<version>-<case>.jsonl
// (and .stderr): the parsers' fixtures, for every installed version or
// only RALPH_RECORD_VERSION. Only with RALPH_RECORD=1.
func TestCodexRecord(t *testing.T) {
	if os.Getenv("RALPH_RECORD") != "1" {
		t.Skip("set RALPH_RECORD=1 to re-record the codex transcripts")
	}
	for _, v := range versions("codex") {
		if only := os.Getenv("RALPH_RECORD_VERSION"); only != "" && only != v {
			continue
		}
		codex := cliAt(t, "codex", v)
		checkCodexVersion(t, codex, v)
		for _, c := range codexCases {
			t.Run(v+"/"+c.name, func(t *testing.T) {
				if only := os.Getenv("RALPH_RECORD_CASE"); only != "" && only != c.name {
					t.Skip("not", only)
				}
				model := codexModel
				if c.defaultModel {
					model = ""
				}
				_, e := codexMockModel(t, v, "fix", model, c.env...)
				var args []string
				if c.perms {
					args = agent.PermissionsFor("codex", []string{"go", "test", "./..."}, false).Args
				}
				stdout, stderr := runCodex(t, codexArgv(codex, args), goProject(t), e, c.prompt, c.limit, c.kill)
				name := "codex-" + v + "-" + c.name
				writeTranscript(t, name, ".jsonl", string(stdout), string(stderr))
				if len(stderr) == 0 { // every codex transcript has its .stderr, empty or not
					_ = os.WriteFile(filepath.Join("..", "testdata", "real", name+".stderr"), nil, 0o644)
				}
			})
		}
	}
}

// checkCodexVersion fails unless codex says it is version v.
func checkCodexVersion(t *testing.T, codex, v string) {
	t.Helper()
	out, err := exec.Command(codex, "--version").Output()
	if err != nil {
		t.Fatalf("codex --version: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "codex-cli "+v {
		t.Fatalf("codex --version says %q; the transcripts are of %s (agents/package.json)", got, v)
	}
}

// runCodex runs argv in dir with the prompt on stdin, killing its group
// after kill (when set) or failing past limit.
func runCodex(t *testing.T, argv []string, dir string, env []string, prompt string, limit, kill time.Duration) (stdout, stderr []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(prompt)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if kill > 0 {
		timer := time.AfterFunc(kill, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%v ran past %s:\n%s\n%s", argv, limit, out.Bytes(), errOut.Bytes())
	}
	t.Logf("%v: %v", argv[1:], err)
	return out.Bytes(), errOut.Bytes()
}

// codexLoop writes `ralph init --agent codex` in a fresh Go project, with
// the prompt's first line naming the mock's script (empty: fix).
func codexLoop(t *testing.T, e []string, script string) string {
	t.Helper()
	dir := goProject(t)
	if r := ralph(t, dir, e, 30*time.Second, "init", "--agent", "codex"); r.code != 0 {
		t.Fatalf("ralph init --agent codex: %s", r)
	}
	if script != "" {
		p := filepath.Join(dir, "PROMPT.md")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(b, []byte("\n"+script+"\n")...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editToml applies the replacements to dir's ralph.toml, failing when
// one's old text is not there.
func editToml(t *testing.T, dir string, oldNew ...string) {
	t.Helper()
	p := filepath.Join(dir, "ralph.toml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(oldNew); i += 2 {
		re := regexp.MustCompile(oldNew[i])
		if !re.MatchString(s) {
			t.Fatalf("ralph.toml has no %q:\n%s", oldNew[i], s)
		}
		s = re.ReplaceAllString(s, oldNew[i+1])
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCodexInitRunDone: the loop `ralph init --agent codex` writes, used as
// written, fixes the project with the real codex and ends done.
func TestCodexInitRunDone(t *testing.T) {
	eachVersion(t, "codex", func(t *testing.T, v string) {
		m, e := codexMock(t, v, "fix")
		dir := codexLoop(t, e, "")
		toml, _ := os.ReadFile(filepath.Join(dir, "ralph.toml"))
		if !strings.Contains(string(toml), `"--sandbox", "workspace-write"`) {
			t.Errorf("ralph.toml does not give codex --sandbox workspace-write in [agent] args:\n%s", toml)
		}
		r := ralph(t, dir, e, 3*time.Minute, "run", "--no-tui")
		// Inside ralph's sandbox codex's own is off, and the call says so.
		if chain := ralph(t, dir, e, time.Minute, "chain", "show", "--json"); !strings.Contains(chain.stdout,
			`"sandbox_args":"--dangerously-bypass-approvals-and-sandbox --disable plugins"`) {
			t.Errorf("the agent call does not record the args ralph added under its sandbox:\n%s", chain.stdout)
		}
		if r.code != 0 {
			t.Fatalf("ralph run: %s", r)
		}
		calc, _ := os.ReadFile(filepath.Join(dir, "calc.go"))
		if !strings.Contains(string(calc), "return a + b") {
			t.Errorf("calc.go was not fixed:\n%s\n%s", calc, r)
		}
		if m.Requests() < 4 {
			t.Errorf("the mock served %d requests; the fix script takes 4", m.Requests())
		}
		verifyChain(t, dir, e)
	})
}

// TestCodexDenied: without init's permission args, codex's read-only
// sandbox rejects the patch; the run stops after that first iteration,
// with reason "permission denied", exit 1.
func TestCodexDenied(t *testing.T) {
	eachVersion(t, "codex", func(t *testing.T, v string) {
		_, e := codexMock(t, v, "denied")
		dir := codexLoop(t, e, "")
		// init's permission args removed (a loop written before init knew them).
		p := filepath.Join(dir, "ralph.toml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Only the permission flags go: the --model init names stays, so that
		// the run's max_cost can still fire.
		b = regexp.MustCompile(`"--sandbox", "workspace-write", `).ReplaceAll(b, nil)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := ralph(t, dir, e, 3*time.Minute, "run", "--no-tui")
		t.Logf("ralph run without permissions: %s", r)
		if r.code != 1 {
			t.Errorf("ralph run without permissions: want exit 1, got %s", r)
		}
		if !strings.Contains(r.stdout+r.stderr, "permission denied") {
			t.Errorf("ralph run without permissions does not say \"permission denied\":\n%s", r)
		}
		if n := strings.Count(r.stdout+r.stderr, "iteration 2"); n > 0 {
			t.Errorf("the run went on past the first iteration:\n%s", r)
		}
		verifyChain(t, dir, e)
	})
}

// TestCodexLimit: a usage limit whose exact reset is 3 s ahead: ralph
// waits for it, then goes on and ends done.
func TestCodexLimit(t *testing.T) {
	eachVersion(t, "codex", func(t *testing.T, v string) {
		_, e := codexMock(t, v, "fix")
		dir := codexLoop(t, e, "mock:limit reset=3")
		start := time.Now()
		r := ralph(t, dir, e, 3*time.Minute, "run", "--no-tui")
		if r.code != 0 {
			t.Fatalf("ralph run after a usage limit: %s", r)
		}
		if !strings.Contains(r.stdout+r.stderr, "limit") {
			t.Errorf("the run does not mention the limit:\n%s", r)
		}
		if d := time.Since(start); d < 3*time.Second {
			t.Errorf("the run took %s: it did not wait for the reset", d)
		}
		verifyChain(t, dir, e)
	})
}

// TestCodexRetry: transient errors (429, 503 overloaded) that codex
// retries past end done; a 429 followed by a 400 is that 400, not a limit.
func TestCodexRetry(t *testing.T) {
	newestOnly(t, "codex", func(t *testing.T, v string) {
		for _, status := range []int{429, 503} {
			t.Run(strconv.Itoa(status), func(t *testing.T) {
				_, e := codexMock(t, v, "fix")
				dir := codexLoop(t, e, fmt.Sprintf("mock:retry status=%d n=1", status))
				r := ralph(t, dir, e, 3*time.Minute, "run", "--no-tui")
				if r.code != 0 {
					t.Fatalf("ralph run with one transient %d: %s", status, r)
				}
				// codex announces a 429 retry ("Reconnecting... 1/2 (… 429 …)");
				// a 503 server_is_overloaded it retries without a word.
				if status == 429 && !strings.Contains(r.stdout+r.stderr, "retrying after 429") {
					t.Errorf("the retry was not shown:\n%s", r)
				}
				verifyChain(t, dir, e)
			})
		}
		t.Run("429-then-400", func(t *testing.T) {
			_, e := codexMock(t, v, "fix")
			dir := codexLoop(t, e, "mock:retry status=429 n=1 then=400")
			editToml(t, dir, `(?m)^count = 3 `, `count = 1 `)
			start := time.Now()
			r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
			if r.code == 0 {
				t.Fatalf("ralph run whose agent fails with a 400 ended done: %s", r)
			}
			if strings.Contains(r.stdout+r.stderr, "waiting until") || time.Since(start) > 50*time.Second {
				t.Errorf("a 429 notice followed by a 400 was taken for a limit:\n%s", r)
			}
			verifyChain(t, dir, e)
		})
	})
}

// TestCodexHang: a stream that goes silent is killed by the idle timeout
// and recorded as idle-timeout.
func TestCodexHang(t *testing.T) {
	newestOnly(t, "codex", func(t *testing.T, v string) {
		_, e := codexMock(t, v, "fix")
		dir := codexLoop(t, e, "mock:hang")
		editToml(t, dir, `(?m)^idle_timeout = "5m"`, `idle_timeout = "4s"`, `(?m)^max = 20$`, `max = 1`)
		r := ralph(t, dir, e, 2*time.Minute, "run", "--no-tui")
		if !strings.Contains(r.stdout, "codex printed nothing for 4s") {
			t.Errorf("the hung call was not killed by the idle timeout:\n%s", r)
		}
		chain := ralph(t, dir, e, time.Minute, "chain", "show", "--json")
		if chain.code != 0 || !strings.Contains(chain.stdout, `idle-timeout`) {
			t.Errorf("the chain does not record the call as idle-timeout:\n%s", chain)
		}
		verifyChain(t, dir, e)
	})
}

// TestCodexContainment: kill -9 of ralph while codex's shell tool runs
// `sleep 300 & setsid sleep 300 & sleep 300`; afterwards no process of
// the call remains, including the one in a session of its own. In the
// sandbox init writes, ralph's bubblewrap (a pid namespace, die with
// parent) holds them; without it, codex's own bubblewrap does (init's
// --sandbox workspace-write); with --full-access and no sandbox only
// ralph's containment does.
func TestCodexContainment(t *testing.T) {
	newestOnly(t, "codex", func(t *testing.T, v string) {
		for _, tc := range []struct {
			name string
			init []string
			off  bool // ralph's sandbox turned off
		}{
			{"ralph-sandbox", nil, false},
			{"codex-sandbox", nil, true},
			{"full-access", []string{"--full-access"}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.name == "codex-sandbox" {
					skipOwnSandboxAsRoot(t)
				}
				_, e := codexMock(t, v, "fix")
				dir := goProject(t)
				if r := ralph(t, dir, e, 30*time.Second, append([]string{"init", "--agent", "codex"}, tc.init...)...); r.code != 0 {
					t.Fatalf("ralph init: %s", r)
				}
				if tc.off {
					unsandbox(t, dir)
				}
				p := filepath.Join(dir, "PROMPT.md")
				b, _ := os.ReadFile(p)
				if err := os.WriteFile(p, append(b, "\nmock:sleep\n"...), 0o644); err != nil {
					t.Fatal(err)
				}
				killRalphDuringSleep(t, dir, e)
			})
		}
	})
}

func killRalphDuringSleep(t *testing.T, dir string, e []string) {
	t.Helper()
	cmd := exec.Command(ralphBin, "run", "--no-tui")
	cmd.Dir, cmd.Env = dir, e
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the three sleeps the agent's shell started.
	var sleeps []int
	deadline := time.Now().Add(90 * time.Second)
	for len(sleeps) < 3 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		sleeps = descendants(cmd.Process.Pid, "sleep")
	}
	all := descendants(cmd.Process.Pid, "")
	if len(sleeps) < 3 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("codex's shell started %d of its 3 sleeps:\n%s", len(sleeps), out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for pid, cmd := range survivors(all) {
		t.Errorf("process %d (%s) of the call outlived ralph's kill -9", pid, cmd)
	}
}

// descendants lists the processes below pid (by /proc's PPid links),
// those whose command name is comm when it is set.
func descendants(pid int, comm string) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	name := map[int]string{}
	for _, en := range entries {
		p, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p], name[p] = pp, s[i+1:j]
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				if comm == "" || name[p] == comm {
					out = append(out, p)
				}
				break
			}
		}
	}
	return out
}

// TestCodexOwnSandbox: without ralph's sandbox, codex's own (init's
// --sandbox workspace-write, bubblewrap) runs the loop to done; when it
// cannot start a command (here: CODEX_HOME inside the temporary
// directory, where codex will not link its codex-linux-sandbox helper),
// the run stops after the first iteration with the flag that turns it
// off.
func TestCodexOwnSandbox(t *testing.T) {
	testenv.Tool(t, "bwrap")
	newestOnly(t, "codex", func(t *testing.T, v string) {
		t.Run("works", func(t *testing.T) {
			skipOwnSandboxAsRoot(t)
			_, e := codexMock(t, v, "fix")
			dir := codexLoop(t, e, "")
			unsandbox(t, dir)
			if r := ralph(t, dir, e, 3*time.Minute, "run", "--no-tui"); r.code != 0 {
				t.Fatalf("ralph run with codex's own sandbox: %s", r)
			}
			verifyChain(t, dir, e)
		})
		t.Run("fails", func(t *testing.T) {
			_, e := codexMock(t, v, "fix")
			for _, kv := range e {
				if h, ok := strings.CutPrefix(kv, "CODEX_HOME="); ok {
					e = append(e, "TMPDIR="+filepath.Dir(h)) // CODEX_HOME lies in it
				}
			}
			dir := codexLoop(t, e, "")
			unsandbox(t, dir)
			r := ralph(t, dir, e, 3*time.Minute, "run", "--no-tui")
			out := r.stdout + r.stderr
			if r.code != 1 || !strings.Contains(out, "codex-linux-sandbox") || !strings.Contains(out, "--dangerously-bypass-approvals-and-sandbox in [agent] args") {
				t.Errorf("a run whose codex could not start its own sandbox does not end naming the flag that turns it off: %s", r)
			}
			if strings.Contains(out, "iteration 2") {
				t.Errorf("the run went on past the first iteration: %s", r)
			}
			verifyChain(t, dir, e)
		})
	})
}

// skipOwnSandboxAsRoot skips a test of codex's own sandbox working under
// a ralph that runs as root: such a ralph empties every thread's
// capability bounding set before it starts a process (issue 37), so
// codex's bubblewrap can make no namespaces and every command and patch
// fails; the "fails" case checks that the call then names the flag that
// turns codex's own sandbox off, and ralph's [sandbox] confines instead.
func skipOwnSandboxAsRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("as root ralph drops every capability before a child starts, so codex's own bubblewrap cannot work (use ralph's [sandbox])")
	}
}
