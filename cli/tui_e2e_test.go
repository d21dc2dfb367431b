package cli_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ralph run in a real 120×40 terminal opens the UI: the chain, the
// conditions with their progress and the final state with its reason;
// q exits 0 and the terminal is restored.
func TestE2ERunTUIInTerminal(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg, err := filepath.Abs("../examples/quickstart/ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	exitFile, sttyFile := filepath.Join(dir, "exit"), filepath.Join(dir, "stty")
	tm := newTmux(t, "cd "+dir+" && "+ralphBin+" run "+cfg+" --store "+filepath.Join(dir, "store")+
		"; echo $? > "+exitFile+"; stty -a > "+sttyFile+"; sleep 60")
	screen := tm.waitIdle(untilEnd)
	for _, want := range []string{"Done by counted-to-three (success)", "Causal chain", "Iteration 3", "Stop conditions", "100%", "3/5", "Plan (RTFS",
		"the completion predicate held"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	tm.send("q")
	if code := waitFile(t, exitFile); code != "0" {
		t.Errorf("ralph run exited %s, want 0", code)
	}
	if stty := waitFile(t, sttyFile); strings.Contains(stty, "-icanon") || strings.Contains(stty, "-echo ") {
		t.Errorf("the terminal was left in raw mode: %s", stty)
	}
}

// A signal (SIGTERM, or Ctrl-C from another terminal) while the UI shows a
// run ends it as the headless runner does: the run is aborted and
// recorded, ralph waits for it and exits 4 (aborted), not 1.
func TestE2ERunTUISignal(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	if err := os.WriteFile(cfg, []byte(`[intent]
goal = "Loop slowly"
[model]
provider = "static"
[plan]
rtfs = '(do (step "Greet" (call :ccos.echo {:message "hi"})))'
[loop]
delay = "1s"
[[stop]]
name = "enough"
kind = "max_iterations"
max = 500
[governance]
allow = ["ccos.*"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	exitFile, pidFile, store := filepath.Join(dir, "exit"), filepath.Join(dir, "pid"), filepath.Join(dir, "store")
	tm := newTmux(t, "cd "+dir+" && sh -c 'echo $$ > "+pidFile+"; exec "+ralphBin+" run "+cfg+" --store "+store+
		"'; echo $? > "+exitFile+"; sleep 60")
	tm.waitFor("Iteration 2")
	pid, err := strconv.Atoi(waitFile(t, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitFile(t, exitFile); code != "4" {
		t.Errorf("ralph run exited %s after SIGTERM, want 4 (aborted):\n%s", code, tm.screen())
	}
	out, _, _ := runBinary(t, ralphBin, "", "runs", "--store", store)
	if !strings.Contains(out, "aborted") || !strings.Contains(out, "user_signal") {
		t.Errorf("the run is not recorded as aborted by the signal:\n%s", out)
	}
}
