package cli_test

// Helpers the end-to-end tests share: a terminal driven through tmux, and
// waiting for a file, a condition or a background ralph. Every wait is
// bounded and polls; none is a timing assertion.

import (
	"bytes"
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

// sendUntil sends key until the screen shows want: a key that reaches the
// program before its UI reads input (on a loaded machine) is sent again,
// at most 10 times, each after 3 s without want (bounded polling, not a
// timing assertion).
func (tm *tmux) sendUntil(key, want string) string {
	tm.t.Helper()
	for try := 0; try < 10; try++ {
		tm.send(key)
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s := tm.screen(); strings.Contains(s, want) {
				return s
			}
		}
	}
	return tm.waitFor(want)
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

// waitFile waits for path to hold a line and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was never written", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startRalph starts the binary in the background with output to files and
// returns it; the test ends it if it is still running.
func startRalph(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(ralphBin, args...)
	cmd.Dir = dir
	out, err := os.Create(filepath.Join(dir, "ralph.out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// waitUntil polls cond until it holds: the one wait of the end-to-end
// tests. Its bound only guards against a hang (two minutes, for a loaded
// machine); no test measures time.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("%s never happened", what)
	}
}

// poll is waitUntil's loop: whether cond held within the bound.
func poll(cond func() bool) bool {
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// waitCommitted waits (up to a minute) until the Badger memtables glob
// names hold more than 4 MiB: an import's first chunks are committed.
func waitCommitted(t *testing.T, glob string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		mems, _ := filepath.Glob(glob)
		var size int64
		for _, m := range mems {
			if b, err := os.ReadFile(m); err == nil {
				size += int64(len(bytes.TrimRight(b, "\x00")))
			}
		}
		if size > 4<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the import committed nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
