package cli_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
)

// KillBetweenDeferredAppendsAndSync kills a run at a random moment
// while its iterations record deferred: every effect a step had (a line
// appended to a file) is preceded on the chain by that step's
// PlanStepStarted, the store verifies, and resume completes the run.
var _ = suite.Add(e2e.Test{Name: "KillBetweenDeferredAppendsAndSync", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	writeFile(t, filepath.Join(dir, "ralph.toml"), fmt.Sprintf(`[plan]
rtfs = '''
(step "Mark" (call :shell.exec {:cmd "sh" :args ["-c" "echo x >> %s"]}))
'''
[[stop]]
kind = "max_iterations"
max = 40
[governance]
shell_allow = ["sh"]
[store]
sync_writes = true
`, marks))
	cmd := e.Ralph("run", filepath.Join(dir, "ralph.toml")).Start()
	cmd.WaitLine("IterationCompleted")
	time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
	_ = cmd.Kill() // SIGKILL: whatever was recorded but not synced is lost
	_ = cmd.Wait()
	store := filepath.Join(dir, ".ralph")
	if _, errOut, code := e.Ralph("chain", "verify", "--store", store).Run(); code != 0 {
		t.Fatalf("verify after the kill: %s", errOut)
	}
	runs, errOut, code := e.Ralph("runs", "--json", "--store", store).Run()
	if code != 0 {
		t.Fatalf("runs: %d %s", code, errOut)
	}
	var rec struct{ ID, State string }
	if err := json.Unmarshal([]byte(strings.SplitN(runs, "\n", 2)[0]), &rec); err != nil || rec.State != "interrupted" {
		t.Fatalf("run record %q: %v", runs, err)
	}
	started := countSteps(t, e, store, rec.ID)
	effects := countLines(t, marks)
	if effects > started {
		t.Fatalf("the step ran %d times but only %d PlanStepStarted are on the chain: an effect outran its record", effects, started)
	}
	out, errOut, code := e.Ralph("resume", rec.ID, "--store", store).Run()
	if code != 3 || !strings.Contains(out, "stopped after 40 iteration(s)") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := e.Ralph("chain", "verify", "--store", store).Run(); code != 0 {
		t.Errorf("verify after resume: %s", errOut)
	}
	if started, effects := countSteps(t, e, store, rec.ID), countLines(t, marks); effects > started || effects < 40 {
		t.Errorf("after resume: %d effects, %d PlanStepStarted; want at least 40 effects, none without its record", effects, started)
	}
}})

// countSteps counts the run's PlanStepStarted actions on the chain.
func countSteps(t *testing.T, e *e2e.E, store, run string) int {
	t.Helper()
	out, errOut, code := e.Ralph("chain", "export", "--run", run, "--store", store).Run()
	if code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	n := 0
	for l := range strings.Lines(out) {
		var a struct {
			Type string `json:"action_type"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("export line %q: %v", l, err)
		}
		if a.Type == "PlanStepStarted" {
			n++
		}
	}
	return n
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
