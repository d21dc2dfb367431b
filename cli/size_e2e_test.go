package cli_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// A 1 MB binary PROMPT.md fails as a text one too large does: one sentence
// naming the file and its size, exit 2, before anything is recorded.
var _ = suite.Add(e2e.Test{Name: "BinaryPromptIsASizeError", Run: func(t *testing.T, e *e2e.E) {
	for name, content := range map[string][]byte{"binary": nil, "text": []byte(strings.Repeat("a", 1_100_000))} {
		e.Run(name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			if name == "binary" {
				content = make([]byte, 1_000_000)
				rand.Read(content)
			}
			prompt := filepath.Join(dir, "PROMPT.md")
			if err := os.WriteFile(prompt, content, 0o644); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "ralph.toml"), `[intent]
goal = "x"
[model]
provider = "agent"
[agent]
cli = "command"
command = ["cat"]
prompt_file = "PROMPT.md"
[[stop]]
kind = "max_iterations"
max = 1
[governance]
allow = ["agent.run"]
`)
			_, errOut, code := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--no-tui", "--store", filepath.Join(dir, "store")).Run()
			want := "the agent's prompt " + prompt + " is " + itoa(len(content)) + " bytes and takes "
			if code != 2 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "a plan's string holds; shorten it") || strings.Contains(errOut, "verification") {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
			}
		})
	}
}})

// A result too large to record fails its step with one sentence naming
// the plan's position, the capability, the part that is too large and its
// size; the run goes on to its closing action.
var _ = suite.Add(e2e.Test{Name: "ResultTooLargeIsNamed", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("x", 6_000_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[plan]
rtfs = '(step "Read" (call :fs.read {:path "big.txt"}))'
[loop]
checkpoints = false
[[stop]]
kind = "max_iterations"
max = 1
`)
	if _, stderr, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).Run(); code != 3 {
		t.Fatalf("run: exit %d, %s", code, stderr)
	}
	out, _, _ := e.Ralph("chain", "show", "--json", "--store", filepath.Join(dir, ".ralph")).Run()
	want := regexp.MustCompile(`iteration-1\.rtfs:1:14: record CapabilityCall: CapabilityCall fs\.read \(action [0-9a-f-]+\) is too large for the ledger: it takes \d+ bytes \(its result alone is 60000\d\d bytes\) and one action holds at most \d+`)
	if !want.MatchString(out) {
		t.Errorf("the step's failure does not name the result and its size:\n%.2000s", out)
	}
}})
