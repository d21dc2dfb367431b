package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// `provider = "command"` with `claude -p`, the hint ralph init used to
// give: the agent answers in prose and does the work itself. ralph asks it
// twice (the first answer and one repair), never falls back to Mode B, and
// ends the run failed (exit 2) saying to use [agent], even though a success
// condition holds and four more iterations were allowed.
var _ = suite.Add(e2e.Test{Name: "CommandAgentIsToldToUseAgent", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	calls := filepath.Join(dir, "calls")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(bin, "claude"), `#!/bin/sh
cat > /dev/null
echo call >> "`+calls+`"
echo "I read add.go, found that Add returned 0 and fixed it. All tests pass now."
`)
	if err := os.Chmod(filepath.Join(bin, "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[intent]
goal = "Make the tests pass"

[model]
provider = "command"
command = ["claude", "-p"]

[[stop]]
kind = "max_iterations"
max = 5

[[stop]]
name = "tests"
kind = "command"
cmd = ["true"]
`)
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
	out, errOut, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).With(path).Run()
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "call"); n != 2 {
		t.Errorf("claude was called %d times, want 2 (the first answer and one repair)", n)
	}
	const want = `failure by provider — command claude -p is a coding agent, not a planner: its last 2 answers hold no plan at all ` +
		`(no RTFS (do …) form, no JSON IR), only prose; run it with [agent] cli = "claude" instead of [model] provider = "command"`
	if code != 2 || !strings.Contains(out, "failed after 1 iteration(s)") || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want 2 and %q\n%s\n%s", code, want, out, errOut)
	}
	if strings.Contains(out, "RunCompleted") || strings.Contains(out, " done ") {
		t.Errorf("the run claims success:\n%s", out)
	}
}})
