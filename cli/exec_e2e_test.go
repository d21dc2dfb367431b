package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

var _ = suite.Add(e2e.Test{Name: "Exec", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, `[plan]
rtfs = "(do)"
[governance]
shell_allow = ["echo"]
[store]
dir = "store"
`)
	writeFile(t, filepath.Join(dir, "ok.rtfs"), `(do
  (step "Greet" (call :ccos.echo {:message "hi"}))
  (step "Shell" (call :shell.exec {:cmd "echo" :args ["from" "shell"]}))
  (step "Remember" (call :kv.put {:key "k" :value [1 2]}))
  (:stdout ctx))`)
	writeFile(t, filepath.Join(dir, "recall.rtfs"), `(step "Recall" (call :kv.get {:key "k"}))`)
	writeFile(t, filepath.Join(dir, "refused.rtfs"), "(do\n  (step \"Rm\" (call :shell.exec {:cmd \"rm\" :args [\"-rf\" \".\"]})))")
	writeFile(t, filepath.Join(dir, "fails.rtfs"), `(step "Div" (call :ccos.math.div 1 0))`)
	writeFile(t, filepath.Join(dir, "broken.rtfs"), `(step "x" (call :ccos.echo`)

	tests := []struct {
		name   string
		plan   string
		code   int
		stdout []string
		stderr string
	}{
		{"success", "ok.rtfs", 0, []string{"PlanStepStarted Greet ok", "CapabilityCall shell.exec ok", "PlanCompleted ok.rtfs ok", `result: "from shell\n"`}, ""},
		{"kv survives the process", "recall.rtfs", 0, []string{"result: [1 2]"}, ""},
		{"refused at admission", "refused.rtfs", 2, []string{"GovernanceDecision admission FAILED"}, `refused.rtfs:2:14: command "rm" is not in [governance].shell_allow [echo]`},
		{"fails at run time", "fails.rtfs", 1, []string{"PlanStepFailed Div FAILED", "PlanAborted fails.rtfs FAILED"}, "fails.rtfs:1:13: ccos.math.div: division by zero"},
		{"unreadable plan", "broken.rtfs", 2, nil, "broken.rtfs:1:11: '(' opened here is never closed"},
	}
	for _, tc := range tests { // sequential: they share one store
		out, errOut, code := e.Ralph("exec", filepath.Join(dir, tc.plan), "--config", cfg).Run()
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.name, code, tc.code, out, errOut)
		}
		for _, want := range tc.stdout {
			if !strings.Contains(out, want) {
				t.Errorf("%s: stdout lacks %q:\n%s", tc.name, want, out)
			}
		}
		if !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%s: stderr %q lacks %q", tc.name, errOut, tc.stderr)
		}
	}
	// --store overrides the config's store.
	other := filepath.Join(dir, "other")
	if _, errOut, code := e.Ralph("exec", filepath.Join(dir, "recall.rtfs"), "--config", cfg, "--store", other).Run(); code != 0 {
		t.Fatalf("exec --store: %d %s", code, errOut)
	}
	if out, _, _ := e.Ralph("exec", filepath.Join(dir, "recall.rtfs"), "--config", cfg, "--store", other).Run(); !strings.Contains(out, "result: nil") {
		t.Errorf("a fresh --store saw the other store's kv: %s", out)
	}
}})

// ExecConfigWithoutPlan: exec runs the plan it is given, so a
// config whose [model] could not plan (provider "static" with no [plan])
// is still good for its governance, workdir and store; run refuses it.
var _ = suite.Add(e2e.Test{Name: "ExecConfigWithoutPlan", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, "[model]\nprovider = \"static\"\n[governance]\nshell_allow = [\"echo\"]\n[store]\ndir = \"store\"\n")
	writeFile(t, filepath.Join(dir, "p.rtfs"), `(step "Shell" (call :shell.exec {:cmd "echo" :args ["governed"]}))`)
	out, errOut, code := e.Ralph("exec", filepath.Join(dir, "p.rtfs"), "--config", cfg).Run()
	if code != 0 || !strings.Contains(out, `:stdout "governed\n"`) {
		t.Fatalf("exec: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	writeFile(t, filepath.Join(dir, "rm.rtfs"), `(step "Rm" (call :shell.exec {:cmd "rm" :args ["x"]}))`)
	if _, errOut, code := e.Ralph("exec", filepath.Join(dir, "rm.rtfs"), "--config", cfg).Run(); code != 2 || !strings.Contains(errOut, "shell_allow") {
		t.Errorf("the config's governance was not applied: exit %d, %s", code, errOut)
	}
	if _, errOut, code := e.Ralph("run", cfg, "--no-tui").Run(); code != 2 || !strings.Contains(errOut, `provider "static" needs [plan].rtfs`) {
		t.Errorf("run accepted a config that cannot plan: exit %d, %s", code, errOut)
	}
	// A config broken outside [model] is still refused by exec.
	writeFile(t, cfg, "[model]\nprovider = \"static\"\n[loop]\nmax_iterations = -1\n")
	if _, errOut, code := e.Ralph("exec", filepath.Join(dir, "p.rtfs"), "--config", cfg).Run(); code != 2 || !strings.Contains(errOut, "max_iterations") {
		t.Errorf("exec accepted a bad [loop]: exit %d, %s", code, errOut)
	}
}})
