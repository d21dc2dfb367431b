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

const stuckSaga = `[plan]
rtfs = '''
(do
  (step.with-compensation
    (step "Book" (call :kv.put {:key "booked" :value true}))
    (step "Unbook" (call :shell.exec {:cmd "sleep" :args ["300"]})))
  (step "Long" (call :shell.exec {:cmd "sleep" :args ["60"]})))
'''
[[stop]]
kind = "max_iterations"
max = 1
[governance]
shell_allow = ["sleep"]
`

// SIGTERM aborts a run: a compensation that would sleep for minutes is cut
// off after the signal's grace and recorded as cut off; a second SIGTERM
// during the compensation ends ralph at once.
func TestE2ESigtermCutsACompensationOff(t *testing.T) {
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
	t.Parallel()
	t.Run("grace", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ralph.toml"), stuckSaga)
		cmd, lines, errOut := startRun(t, "run", filepath.Join(dir, "ralph.toml"), "--no-tui")
		waitLine(t, lines, "PlanStepStarted Long")
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		out := rest(lines)
		if code := exitCode(cmd.Wait()); code != 4 || !strings.Contains(out, "RunAborted") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		show, _, _ := runBinary(t, ralphBin, "", "chain", "show", "--json", "--store", filepath.Join(dir, ".ralph"))
		if !strings.Contains(show, `"cut_off":true`) || !strings.Contains(show, "cut off: after a signal, compensations get 5s in all") {
			t.Errorf("the compensation is not recorded as cut off:\n%s", show)
		}
	})
	t.Run("second signal", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ralph.toml"), stuckSaga)
		cmd, lines, _ := startRun(t, "run", filepath.Join(dir, "ralph.toml"), "--no-tui")
		waitLine(t, lines, "PlanStepStarted Long")
		cmd.Process.Signal(syscall.SIGTERM)
		waitLine(t, lines, "CompensationStarted Unbook")
		cmd.Process.Signal(syscall.SIGTERM)
		rest(lines)
		err := cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("after a second SIGTERM: %v, want ended by the signal", err)
		}
	})
}
