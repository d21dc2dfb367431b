package cli_test

// Every process ends (DESIGN §18): a UI run whose terminal closes, a run
// that takes SIGTERM during a compensation, a socket under many streams.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// processGone reports whether pid has exited (a zombie waiting for a
// parent that does not reap counts as exited).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// A foreground UI run exits when its run has ended, whether its terminal
// closes before the UI is up, while the run goes on, or after it ended.
func TestE2ETerminalClosedRunExits(t *testing.T) {
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
	t.Parallel()
	for _, when := range []string{"before", "during", "after"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := slowLoop(t, dir, 4)
			store, pidFile := filepath.Join(dir, "store"), filepath.Join(dir, "pid")
			tm := newTmux(t, "echo $$ > "+pidFile+"; exec "+ralphBin+" run "+cfg+" --store "+store)
			pid, err := strconv.Atoi(waitFile(t, pidFile))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if !processGone(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			switch when {
			case "during":
				tm.waitFor("Iteration 2")
			case "after":
				tm.waitFor("Stopped by enough")
			}
			if err := exec.Command("tmux", "kill-session", "-t", tm.session).Run(); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "ralph (pid "+strconv.Itoa(pid)+") exits", func() bool { return processGone(pid) })
			if _, err := os.Stat(filepath.Join(store, "data")); err == nil {
				if runs, _, _ := runBinary(t, ralphBin, "", "runs", "--store", store); strings.Contains(runs, "running") {
					t.Errorf("a run is left running after its process exited:\n%s", runs)
				}
			}
		})
	}
}
