package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

// suiteOf is a suite whose binary is sh, for the driver's own tests.
func suiteOf(t *testing.T) *Suite {
	s := &Suite{bin: "/bin/sh", tmux: fmt.Sprintf("ralph-e2e-self-%d-%s", os.Getpid(), t.Name())}
	t.Cleanup(func() { _ = s.tmuxCmd("kill-server").Run() })
	return s
}

func TestCmdRun(t *testing.T) {
	t.Parallel()
	e := suiteOf(t).start(t, nil, nil)
	out, errOut, code := e.Ralph("-c", "echo out; cat; echo err >&2; exit 3").Stdin("in\n").Run()
	if out != "out\nin\n" || errOut != "err\n" || code != 3 {
		t.Errorf("Run: %q %q %d", out, errOut, code)
	}
	out, _, _ = e.Command("sh", "-c", `echo "$PWD $A $B"`).In(e.Dir).With("A=1", "B=2", "A=3").Run()
	if want := e.Dir + " 3 2\n"; out != want {
		t.Errorf("In and With: %q, want %q", out, want)
	}
}

// The test's environment: its own XDG directories, none of the
// developer's ralph variables.
func TestEnv(t *testing.T) {
	t.Setenv("RALPH_NATS", "nats://elsewhere:4222")
	t.Setenv("XDG_STATE_HOME", "/home/someone/.local/state")
	e := suiteOf(t).start(t, nil, nil)
	env := e.Env()
	for _, kv := range env {
		if strings.HasPrefix(kv, "RALPH_NATS=") || kv == "XDG_STATE_HOME=/home/someone/.local/state" {
			t.Errorf("the test's environment holds %s", kv)
		}
	}
	if !slices.Contains(env, "XDG_STATE_HOME="+filepath.Join(e.Home, "state")) || !slices.Contains(env, "XDG_RUNTIME_DIR="+filepath.Join(e.Home, "run")) {
		t.Errorf("the test's XDG directories are not under its Home %s:\n%q", e.Home, env)
	}
	if clean := e.CleanEnv("K=v"); len(clean) != 6 || clean[5] != "K=v" {
		t.Errorf("CleanEnv: %q", clean)
	}
}

func TestProcLines(t *testing.T) {
	t.Parallel()
	e := suiteOf(t).start(t, nil, nil)
	p := e.Ralph("-c", `echo one; echo two; read x; echo "$x" >&2; printf 'three\r\nfour'`).StdinPipe().Start()
	if got := p.WaitLine("tw"); got != "one\ntwo\n" {
		t.Errorf("WaitLine: %q", got)
	}
	if _, err := p.Stdin.Write([]byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	if got := p.Rest(); got != "three\nfour\n" {
		t.Errorf("Rest: %q", got)
	}
	if err := p.Wait(); err != nil || p.Stderr() != "typed\n" {
		t.Errorf("Wait: %v, stderr %q", err, p.Stderr())
	}
}

func TestProcSignal(t *testing.T) {
	t.Parallel()
	e := suiteOf(t).start(t, nil, nil)
	p := e.Command("sleep", "600").Start()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("Wait after SIGTERM: %v", err)
	}
}

// A probe is tried once per process, and what it could not do is a need.
func TestProbe(t *testing.T) {
	t.Parallel()
	tries := 0
	n := Probe("an ability", func(dir string) error {
		tries++
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("the probe's directory: %v", err)
		}
		return nil
	})
	n.check(t)
	n.check(t)
	if tries != 1 {
		t.Errorf("tried %d times, want once", tries)
	}
}

// The terminal: keys, the screen, the title WaitIdle reads, what the
// command's exit leaves.
func TestTerm(t *testing.T) {
	testenv.Tool(t, "tmux")
	t.Parallel()
	e := suiteOf(t).start(t, nil, []Need{Tmux})
	tm := e.Ralph("-c", `printf '\033]2;ralph · seq 3 · running\033\\'; read x; printf '\033]2;ralph · r1 · seq 7 · idle\033\\'; echo "got $x in $PWD as $A"; read y; exit 4`).
		In(e.Dir).With("A=b c").Term()
	if pid := tm.Pid(); pid <= 0 {
		t.Errorf("pid %d", pid)
	}
	tm.WaitScreen("nothing yet", func(s string) bool { return !strings.Contains(s, "got") })
	tm.Send("hi", "Enter")
	if s := tm.WaitIdle(5); !strings.Contains(s, "got hi in "+e.Dir+" as b c") {
		t.Errorf("idle at seq 7, the screen:\n%s", s)
	}
	tm.Send("Enter")
	if code := tm.Exit(); code != 4 {
		t.Errorf("exit %d, want 4", code)
	}
	if !strings.Contains(tm.Stty(), "speed") || !strings.Contains(tm.Raw(), "got hi") {
		t.Errorf("stty %q, raw %q", tm.Stty(), tm.Raw())
	}
	sh := e.TermShell("echo shell-line-ran; sleep 600")
	sh.WaitFor("shell-line-ran")
	sh.Close()
}

// A terminal is driven only by a test that says it needs tmux.
func TestTermNeedsTmux(t *testing.T) {
	if os.Getenv("E2E_CHILD") == "1" {
		e := suiteOf(t).start(t, nil, nil)
		e.Ralph().Term()
		return
	}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run", "^TestTermNeedsTmux$")
	cmd.Env = append(os.Environ(), "E2E_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "declare e2e.Tmux in its Needs") {
		t.Errorf("a terminal without e2e.Tmux: %v\n%s", err, out)
	}
}

// The browser: a page of a local server, read, waited on, clicked, with
// and without JavaScript, at a width; two pages share no cookie; a script
// error the page does not catch is kept for the test's end.
func TestPage(t *testing.T) {
	Chromium.check(t)
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "k", Value: "v"})
		}
		fmt.Fprint(w, `<!doctype html><title>t</title><p id=static>served</p><p id=live>wait</p>
<button id=b onclick="document.getElementById('live').textContent='clicked'">b</button>
<script>setTimeout(() => document.getElementById('live').textContent = 'updated', 50)</script>`)
		if r.URL.Path == "/throw" {
			fmt.Fprint(w, `<script>null.x</script>`)
		}
	}))
	defer srv.Close()
	s := suiteOf(t)
	s.root = t.TempDir()
	t.Cleanup(s.browser.close)
	e := s.start(t, nil, []Need{Chromium})

	p := e.Page(375, 600)
	p.Go(srv.URL + "/set")
	if got := p.WaitText("#live", "updated"); got != "updated" {
		t.Errorf("WaitText: %q", got)
	}
	p.Click("#b")
	p.WaitJS("the click changed the text", `document.getElementById('live').textContent == 'clicked'`)
	if w := Eval[int](p, "document.documentElement.clientWidth"); w != 375 {
		t.Errorf("viewport %d wide, want 375", w)
	}
	if c := Eval[string](p, "document.cookie"); c != "k=v" {
		t.Errorf("cookie %q", c)
	}
	if png := p.Screenshot(); !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("screenshot is no PNG: % x", png[:min(8, len(png))])
	}

	q := e.Page(1280, 800)
	q.NoScript(true)
	q.Go(srv.URL)
	if got := q.Text("#live") + " " + q.Text("#static"); got != "wait served" {
		t.Errorf("without JavaScript: %q", got)
	}
	if c := Eval[string](q, "document.cookie"); c != "" {
		t.Errorf("a second page sees the first's cookie %q", c)
	}
	q.NoScript(false)
	q.Go(srv.URL + "/throw")
	q.WaitText("#live", "updated")
	q.mu.Lock()
	if len(q.exceptions) != 1 || !strings.Contains(q.exceptions[0], "/throw:") {
		t.Errorf("uncaught exceptions %q, want the one of /throw", q.exceptions)
	}
	q.exceptions = nil // this test's own: not a failure
	q.mu.Unlock()
}
