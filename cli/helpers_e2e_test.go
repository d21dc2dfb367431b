package cli_test

// Helpers the end-to-end tests share: a terminal driven through tmux, and
// waiting for a file, a condition or a background ralph. Every wait is
// bounded and polls; none is a timing assertion. A test waits for what the
// UI has drawn of a run with tmux.waitIdle, which reads the terminal title
// the UI sets (seq and state), and for anything else on the screen with
// tmux.waitScreen.

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/testenv"
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
	testenv.Tool(t, "tmux")
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

// title is the pane's title, which ralph's UI sets to what it has shown
// (docs/tui.md): "ralph · RUN_ID · seq N · idle|running|ended".
func (tm *tmux) title() string {
	out, _ := exec.Command("tmux", "display-message", "-p", "-t", tm.session, "#{pane_title}").Output()
	return strings.TrimSpace(string(out))
}

// untilEnd, given to waitIdle, waits for the run's end.
const untilEnd = math.MaxUint64

var titleRE = regexp.MustCompile(`^ralph · (?:\S+ · )?seq (\d+) · (idle|running|ended)$`)

// waitIdle waits until the UI says (in its title) that it has drawn every
// event up to seq and has nothing pending, or that the run has ended and
// it has drawn the end, and returns the screen then.
func (tm *tmux) waitIdle(seq uint64) string {
	tm.t.Helper()
	var title string
	ok := eventually.Poll(func() bool {
		title = tm.title()
		m := titleRE.FindStringSubmatch(title)
		if m == nil {
			return false
		}
		n, _ := strconv.ParseUint(m[1], 10, 64)
		return m[2] == "ended" || (m[2] == "idle" && n >= seq)
	})
	if !ok {
		what := "the run's end"
		if seq != untilEnd {
			what = fmt.Sprintf("idle at seq %d", seq)
		}
		tm.t.Fatalf("the UI never said %s; its title is %q:\n%s", what, title, tm.screen())
	}
	return tm.screen()
}

// waitScreen waits until ok holds for the screen, for what the UI shows
// that no seq names (a prompt, a dialog, a view or a move a key made, a
// running time), and returns the screen then. Keys given as resend are
// sent first, and again after each 3 s without ok (at most 10 times): a
// key the program did not take is sent again. It is the one wait on the
// screen; what a run recorded is waited for with waitIdle.
func (tm *tmux) waitScreen(what string, ok func(screen string) bool, resend ...string) string {
	tm.t.Helper()
	var s string
	sent, tries := time.Time{}, 0
	if !eventually.Poll(func() bool {
		if len(resend) > 0 && tries < 10 && time.Since(sent) > 3*time.Second {
			tm.send(resend...)
			sent, tries = time.Now(), tries+1
		}
		s = tm.screen()
		return ok(s)
	}) {
		tm.t.Fatalf("the screen never showed %s:\n%s", what, s)
	}
	return s
}

// waitFor is waitScreen for a text on the screen.
func (tm *tmux) waitFor(want string, resend ...string) string {
	tm.t.Helper()
	return tm.waitScreen(strconv.Quote(want), func(s string) bool { return strings.Contains(s, want) }, resend...)
}

// waitFile waits for path to hold a line and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	var b []byte
	waitUntil(t, path+" written", func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && strings.Contains(string(b), "\n")
	})
	return strings.TrimSpace(string(b))
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

// waitUntil waits until cond holds (eventually.True, the one wait of the
// tests).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, what, cond)
}

// waitCommitted waits until the Badger memtables glob
// names hold more than 4 MiB: an import's first chunks are committed.
func waitCommitted(t *testing.T, glob string) {
	t.Helper()
	waitUntil(t, "the import's first chunks committed", func() bool {
		mems, _ := filepath.Glob(glob)
		var size int64
		for _, m := range mems {
			if b, err := os.ReadFile(m); err == nil {
				size += int64(len(bytes.TrimRight(b, "\x00")))
			}
		}
		return size > 4<<20
	})
}
