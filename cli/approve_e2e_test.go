package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestE2EApproveHeadlessInTerminal(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message (str "it " (:iteration ctx))}))'
[[stop]]
kind = "max_iterations"
max = 2
`)
	exitFile := filepath.Join(dir, "exit")
	tm := newTmux(t, "cd "+dir+" && "+ralphBin+" run --approve --no-tui; echo $? > "+exitFile+"; sleep 30")
	tm.waitFor("iteration 1 plan:")
	tm.waitFor("run it? [y/n]")
	tm.send("y", "Enter")
	tm.waitFor("iteration 2 plan:")
	tm.send("n", "Enter") // declined: the iteration is skipped, not run
	screen := tm.waitFor("stopped after 2 iteration(s)")
	if !strings.Contains(screen, "CapabilityCall ccos.echo ok") {
		t.Errorf("the approved plan did not run:\n%s", screen)
	}
	if code := waitFile(t, exitFile); code != "3" {
		t.Errorf("exit %s, want 3", code)
	}
	// Without a terminal, --approve is refused at start.
	_, errOut, code := runBinary(t, ralphBin, "", "run", filepath.Join(dir, "ralph.toml"), "--approve")
	if code != 2 || !strings.Contains(errOut, "not a terminal") {
		t.Errorf("--approve without a terminal: %d %q", code, errOut)
	}
}
