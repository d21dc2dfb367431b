package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// quickstartRun runs the quickstart headless into store and returns the
// run's id.
func quickstartRun(t *testing.T, e *e2e.E, store string) string {
	t.Helper()
	_, errOut, code := e.Ralph("run", "../examples/quickstart/ralph.toml", "--no-tui", "--store", store).Run()
	if code != 0 {
		t.Fatalf("quickstart: exit %d: %s", code, errOut)
	}
	out, _, _ := e.Ralph("runs", "--json", "--store", store).Run()
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &r); err != nil || r.ID == "" {
		t.Fatalf("runs --json: %q %v", out, err)
	}
	return r.ID
}

// ralph view in a real terminal: the recorded quickstart with its chain,
// conditions and final state; history and detail views; q exits 0 and
// leaves the terminal in cooked mode.
var _ = suite.Add(e2e.Test{Name: "ViewInTerminal", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	id := quickstartRun(t, e, store)
	tm := e.Ralph("view", id[:13], "--store", store).Term()
	screen := tm.WaitIdle(e2e.UntilEnd)
	for _, want := range []string{"Done by counted-to-three (success)", "Causal chain", "Iteration 3", "✓ ccos.echo", "Stop conditions", "counted-to-three",
		"100%", "3/5", "Plan (RTFS · static)", "(step \"Greet\"", "read-only", "the completion predicate held"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	tm.Send("v")
	tm.WaitFor("History · stop-condition evaluations")
	tm.WaitFor("fired: counted-to-three")
	tm.Send("Escape")
	tm.WaitFor("Plan (RTFS")
	tm.Send("Up", "Up", "Enter")
	screen = tm.WaitFor("Ed25519 signature verified")
	for _, want := range []string{"action_hash", "✓ recomputed from the canonical encoding", "checkpoint"} {
		if !strings.Contains(screen, want) {
			t.Errorf("detail lacks %q:\n%s", want, screen)
		}
	}
	tm.Send("q")
	if code := tm.Exit(); code != 0 {
		t.Errorf("ralph view exited %d, want 0", code)
	}
	stty := tm.Stty()
	if strings.Contains(stty, "-icanon") || strings.Contains(stty, "-echo ") {
		t.Errorf("the terminal was left in raw mode: %s", stty)
	}
	// Without a terminal it refuses with a pointer to the text commands.
	_, errOut, code := e.Ralph("view", id, "--store", store).Run()
	if code != 2 || !strings.Contains(errOut, "needs a terminal") {
		t.Errorf("view without a terminal: exit %d %q", code, errOut)
	}
	_, errOut, code = e.Ralph("view", "no-such-run", "--store", store).Run()
	if code != 2 {
		t.Errorf("view of an unknown run: exit %d %q", code, errOut)
	}
}})
