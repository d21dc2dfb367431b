package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// An agent CLI that prints the API key in its error does not get it onto
// the terminal through ralph plan.
var _ = suite.Add(e2e.Test{Name: "PlanRedactsTheKeyFromProviderErrors", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	writeFile(t, agent, "#!/bin/sh\necho \"auth failed for key $OPENAI_API_KEY\" >&2\nexit 1\n")
	if err := os.Chmod(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[intent]
goal = "say hi"
[model]
provider = "command"
command = ["./agent.sh"]
[[stop]]
kind = "max_iterations"
max = 1
`)
	const key = "sk-test-0123456789abcdef"
	out, errOut, code := e.Ralph("plan", filepath.Join(dir, "ralph.toml")).Env(e.CleanEnv("OPENAI_API_KEY=" + key)).Run()
	if code == 0 {
		t.Fatalf("plan succeeded with a failing agent:\n%s", out)
	}
	if strings.Contains(out+errOut, key) {
		t.Errorf("the key reached the terminal:\nstdout %s\nstderr %s", out, errOut)
	}
	if !strings.Contains(out+errOut, "auth failed for key [REDACTED]") {
		t.Errorf("the agent's error is not shown redacted:\nstdout %s\nstderr %s", out, errOut)
	}
}})
