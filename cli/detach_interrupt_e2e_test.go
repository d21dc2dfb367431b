package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// After q then d in a foreground UI, Ctrl-C in that terminal no longer
// reaches the run: it says how to get the prompt back, and the run goes
// on to its own end. The title the UI gave the terminal ends with it.
var _ = suite.Add(e2e.Test{Name: "DetachThenCtrlC", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 12)
	store := filepath.Join(dir, "store")
	tm := e.Ralph("run", cfg, "--store", store).Term()
	waitIteration(t, tm, store, 2) // the UI's title is the terminal's
	tm.WaitFor("d detaches", "q")
	tm.Send("d")
	tm.WaitFor("ctrl+c no longer stops it")
	// The UI has ended: the terminal's own title is back (popped from its
	// title stack).
	waitUntil(t, "the terminal's own title back once the UI ended", func() bool { return !strings.HasPrefix(tm.Title(), "ralph · ") })
	tm.WaitFor("is detached and goes on; ctrl+z then `bg` gives the prompt back", "C-c")
	if code := tm.Exit(); code != 3 {
		t.Errorf("the detached run exited %d after ctrl+c, want 3 (max_iterations: it went on)", code)
	}
	runID := regexp.MustCompile(`run ([0-9a-f-]{36}) goes on`).FindStringSubmatch(tm.Screen())
	if runID == nil {
		t.Fatalf("no run id on screen:\n%s", tm.Screen())
	}
	if s := runState(t, e, store, runID[1]); s != "stopped" {
		t.Errorf("run ended %s, want stopped by max_iterations", s)
	}
}})
