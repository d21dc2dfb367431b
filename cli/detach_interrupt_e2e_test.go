package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// After q then d in a foreground UI, Ctrl-C in that terminal no longer
// reaches the run: it says how to get the prompt back, and the run goes
// on to its own end. The title the UI gave the terminal ends with it.
func TestE2EDetachThenCtrlC(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 12)
	store, exitFile := filepath.Join(dir, "store"), filepath.Join(dir, "exit")
	tm := newTmux(t, ralphBin+" run "+cfg+" --store "+store+"; echo $? > "+exitFile+"; sleep 60")
	tm.waitFor("Iteration 2")
	tm.waitIdle(1) // the UI's title is the terminal's
	tm.waitFor("d detaches", "q")
	tm.send("d")
	tm.waitFor("ctrl+c no longer stops it")
	// The UI has ended: the terminal's own title is back (popped from its
	// title stack).
	waitUntil(t, "the terminal's own title back once the UI ended", func() bool { return !strings.HasPrefix(tm.title(), "ralph · ") })
	tm.waitFor("is detached and goes on; ctrl+z then `bg` gives the prompt back", "C-c")
	if code := waitFile(t, exitFile); code != "3" {
		t.Errorf("the detached run exited %s after ctrl+c, want 3 (max_iterations: it went on)", code)
	}
	runID := regexp.MustCompile(`run ([0-9a-f-]{36}) goes on`).FindStringSubmatch(tm.screen())
	if runID == nil {
		t.Fatalf("no run id on screen:\n%s", tm.screen())
	}
	if s := runState(t, store, runID[1]); s != "stopped" {
		t.Errorf("run ended %s, want stopped by max_iterations", s)
	}
}
