package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// quickstartRun runs the quickstart headless into store and returns the
// run's id.
func quickstartRun(t *testing.T, store string) string {
	t.Helper()
	_, errOut, code := runBinary(t, ralphBin, "", "run", "../examples/quickstart/ralph.toml", "--no-tui", "--store", store)
	if code != 0 {
		t.Fatalf("quickstart: exit %d: %s", code, errOut)
	}
	out, _, _ := runBinary(t, ralphBin, "", "runs", "--json", "--store", store)
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &r); err != nil || r.ID == "" {
		t.Fatalf("runs --json: %q %v", out, err)
	}
	return r.ID
}

// ralph view in a real terminal: the recorded quickstart with its chain,
// conditions and final state; history and detail views; q exits 0 and
// leaves the terminal in cooked mode.
func TestE2EViewInTerminal(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	id := quickstartRun(t, store)
	exitFile, sttyFile := filepath.Join(dir, "exit"), filepath.Join(dir, "stty")
	tm := newTmux(t, ralphBin+" view "+id[:13]+" --store "+store+"; echo $? > "+exitFile+"; stty -a > "+sttyFile+"; sleep 60")
	screen := tm.waitIdle(untilEnd)
	for _, want := range []string{"Done by counted-to-three (success)", "Causal chain", "Iteration 3", "✓ ccos.echo", "Stop conditions", "counted-to-three",
		"100%", "3/5", "Plan (RTFS · static)", "(step \"Greet\"", "read-only", "the completion predicate held"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	tm.send("v")
	tm.waitFor("History · stop-condition evaluations")
	tm.waitFor("fired: counted-to-three")
	tm.send("Escape")
	tm.waitFor("Plan (RTFS")
	tm.send("Up", "Up", "Enter")
	screen = tm.waitFor("Ed25519 signature verified")
	for _, want := range []string{"action_hash", "✓ recomputed from the canonical encoding", "checkpoint"} {
		if !strings.Contains(screen, want) {
			t.Errorf("detail lacks %q:\n%s", want, screen)
		}
	}
	tm.send("q")
	if code := waitFile(t, exitFile); code != "0" {
		t.Errorf("ralph view exited %s, want 0", code)
	}
	stty := waitFile(t, sttyFile)
	if strings.Contains(stty, "-icanon") || strings.Contains(stty, "-echo ") {
		t.Errorf("the terminal was left in raw mode: %s", stty)
	}
	// Without a terminal it refuses with a pointer to the text commands.
	_, errOut, code := runBinary(t, ralphBin, "", "view", id, "--store", store)
	if code != 2 || !strings.Contains(errOut, "needs a terminal") {
		t.Errorf("view without a terminal: exit %d %q", code, errOut)
	}
	_, errOut, code = runBinary(t, ralphBin, "", "view", "no-such-run", "--store", store)
	if code != 2 {
		t.Errorf("view of an unknown run: exit %d %q", code, errOut)
	}
}
