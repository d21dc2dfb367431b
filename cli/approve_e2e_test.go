package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmux drives ralph in a real terminal, as a user would.
type tmux struct {
	t       *testing.T
	session string
}

func newTmux(t *testing.T, command string) *tmux {
	t.Helper()
	return newTmuxNamed(t, "", command)
}

// newTmuxNamed is newTmux for a test that needs more than one terminal:
// name tells its sessions apart.
func newTmuxNamed(t *testing.T, name, command string) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	tm := &tmux{t: t, session: fmt.Sprintf("ralph-e2e-%d-%s%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"), name)}
	// A test that closes a terminal (tmux kill-session) can stop the tmux
	// server as this starts one: start again then.
	var out []byte
	var err error
	for try := 0; try < 5; try++ {
		out, err = exec.Command("tmux", "new-session", "-d", "-s", tm.session, "-x", "120", "-y", "40", command).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "server exited unexpectedly") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("tmux new-session: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", tm.session).Run() })
	return tm
}

func (tm *tmux) send(keys ...string) {
	args := append([]string{"send-keys", "-t", tm.session}, keys...)
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		tm.t.Fatalf("tmux send-keys: %v %s", err, out)
	}
}

func (tm *tmux) screen() string {
	out, _ := exec.Command("tmux", "capture-pane", "-p", "-t", tm.session).Output()
	return string(out)
}

// waitFor polls the screen until it shows want (bounded; not a timing assertion).
func (tm *tmux) waitFor(want string) string {
	tm.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := tm.screen()
		if strings.Contains(s, want) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("screen never showed %q:\n%s", want, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestE2EApproveHeadlessInTerminal(t *testing.T) {
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message (str "it " (:iteration ctx))}))'
[[stop]]
kind = "max_iterations"
max = 2
`)
	exitFile := filepath.Join(dir, "exit")
	tm := newTmux(t, "cd "+dir+" && "+ralphBin+" run --approve --no-tui; echo $? > "+exitFile+"; sleep 30")
	tm.waitFor("iteration 1 plan:")
	tm.waitFor("run it? [y/n]")
	tm.send("y", "Enter")
	tm.waitFor("iteration 2 plan:")
	tm.send("n", "Enter") // declined: the iteration is skipped, not run
	screen := tm.waitFor("stopped after 2 iteration(s)")
	if !strings.Contains(screen, "CapabilityCall ccos.echo ok") {
		t.Errorf("the approved plan did not run:\n%s", screen)
	}
	if code := waitFile(t, exitFile); code != "3" {
		t.Errorf("exit %s, want 3", code)
	}
	// Without a terminal, --approve is refused at start.
	_, errOut, code := runBinary(t, ralphBin, "", "run", filepath.Join(dir, "ralph.toml"), "--approve")
	if code != 2 || !strings.Contains(errOut, "not a terminal") {
		t.Errorf("--approve without a terminal: %d %q", code, errOut)
	}
}
