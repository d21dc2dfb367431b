package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// ralph run in a real 120×40 terminal opens the UI: the chain, the
// conditions with their progress and the final state with its reason;
// q exits 0 and the terminal is restored.
var _ = suite.Add(e2e.Test{Name: "RunTUIInTerminal", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, err := filepath.Abs("../examples/quickstart/ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	tm := e.Ralph("run", cfg, "--store", filepath.Join(dir, "store")).In(dir).Term()
	screen := tm.WaitIdle(e2e.UntilEnd)
	for _, want := range []string{"Done by counted-to-three (success)", "Causal chain", "Iteration 3", "Stop conditions", "100%", "3/5", "Plan (RTFS",
		"the completion predicate held"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	tm.Send("q")
	if code := tm.Exit(); code != 0 {
		t.Errorf("ralph run exited %d, want 0", code)
	}
	if stty := tm.Stty(); strings.Contains(stty, "-icanon") || strings.Contains(stty, "-echo ") {
		t.Errorf("the terminal was left in raw mode: %s", stty)
	}
}})

// A signal (SIGTERM, or Ctrl-C from another terminal) while the UI shows a
// run ends it as the headless runner does: the run is aborted and
// recorded, ralph waits for it and exits 4 (aborted), not 1.
var _ = suite.Add(e2e.Test{Name: "RunTUISignal", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
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
	store := filepath.Join(dir, "store")
	tm := e.Ralph("run", cfg, "--store", store).In(dir).Term()
	waitIteration(t, tm, store, 2)
	if err := syscall.Kill(tm.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := tm.Exit(); code != 4 {
		t.Errorf("ralph run exited %d after SIGTERM, want 4 (aborted):\n%s", code, tm.Screen())
	}
	out, _, _ := e.Ralph("runs", "--store", store).Run()
	if !strings.Contains(out, "aborted") || !strings.Contains(out, "user_signal") {
		t.Errorf("the run is not recorded as aborted by the signal:\n%s", out)
	}
}})
