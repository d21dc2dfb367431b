package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

const approveLoop = `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message (str "it " (:iteration ctx))}))'
[[stop]]
kind = "max_iterations"
max = 2
`

// --approve headless asks in the terminal before each iteration's plan
// runs: y runs it, n skips the iteration; without a terminal it is refused.
var _ = suite.Add(e2e.Test{Name: "ApproveHeadlessInTerminal", Needs: []e2e.Need{e2e.Tmux}, Files: map[string]string{"ralph.toml": approveLoop}, Run: func(t *testing.T, e *e2e.E) {
	dir := e.Dir
	tm := e.Ralph("run", "--approve", "--no-tui").In(dir).Term()
	tm.WaitFor("iteration 1 plan:")
	tm.WaitFor("run it? [y/n]")
	tm.Send("y", "Enter")
	tm.WaitFor("iteration 2 plan:")
	tm.Send("n", "Enter") // declined: the iteration is skipped, not run
	code := tm.Exit()
	screen := tm.Screen()
	if !strings.Contains(screen, "stopped after 2 iteration(s)") {
		t.Fatalf("the run's end is not on the screen:\n%s", screen)
	}
	if !strings.Contains(screen, "CapabilityCall ccos.echo ok") {
		t.Errorf("the approved plan did not run:\n%s", screen)
	}
	if code != 3 {
		t.Errorf("exit %d, want 3", code)
	}
	// Without a terminal, --approve is refused at start.
	_, errOut, code := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--approve").Run()
	if code != 2 || !strings.Contains(errOut, "not a terminal") {
		t.Errorf("--approve without a terminal: %d %q", code, errOut)
	}
}})
