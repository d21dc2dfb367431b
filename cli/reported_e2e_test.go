package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// A command that exits 1 under :check false does not fail its step, and
// every listing says what happened: the call is marked "! exit 1" (never
// "ok"), the step stays ok.
var _ = suite.Add(e2e.Test{Name: "ReportedFailureIsShown", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[plan]
rtfs = '''
(do (step "Test" (call :shell.exec {:cmd "sh" :args ["-c" "echo FAIL; exit 1"] :check false}))
    (step "Build" (call :shell.exec {:cmd "sh" :args ["-c" "echo built"]})))
'''
[[stop]]
kind = "max_iterations"
max = 1
[governance]
shell_allow = ["sh"]
`)
	store := filepath.Join(dir, ".ralph")
	out, errOut, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).Run()
	if code != 3 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	shown, errOut, code := e.Ralph("chain", "show", "--store", store).Run()
	if code != 0 {
		t.Fatalf("chain show: exit %d: %s", code, errOut)
	}
	tree, errOut, code := e.Ralph("chain", "show", "--tree", "--store", store).Run()
	if code != 0 {
		t.Fatalf("chain show --tree: exit %d: %s", code, errOut)
	}
	for name, text := range map[string]string{"run": out, "chain show": shown, "chain show --tree": tree} {
		for _, re := range []string{
			`#\d+ CapabilityCall shell\.exec ! exit 1( \d+ms)?\n`, // the failing test call
			`#\d+ PlanStepCompleted Test ok`,                      // its step still succeeded
			`#\d+ CapabilityCall shell\.exec ok( \d+ms)?\n`,       // the build exited 0
		} {
			if !regexp.MustCompile(re).MatchString(text) {
				t.Errorf("%s lacks %s:\n%s", name, re, text)
			}
		}
		if strings.Count(text, "! exit") != 1 {
			t.Errorf("%s marks %d calls as failed, want 1:\n%s", name, strings.Count(text, "! exit"), text)
		}
	}
	if !strings.Contains(tree, "└─ #") || !regexp.MustCompile(`[├└]─ #\d+ CapabilityCall shell\.exec ! exit 1`).MatchString(tree) {
		t.Errorf("the tree does not place the marked call under its step:\n%s", tree)
	}
}})
