package cli_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A 1 MB binary PROMPT.md fails as a text one too large does: one sentence
// naming the file and its size, exit 2, before anything is recorded.
func TestE2EBinaryPromptIsASizeError(t *testing.T) {
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
	t.Parallel()
	for name, content := range map[string][]byte{"binary": nil, "text": []byte(strings.Repeat("a", 1_100_000))} {
		t.Run(name, func(t *testing.T) {
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
			_, errOut, code := runBinary(t, ralphBin, "", "run", filepath.Join(dir, "ralph.toml"), "--no-tui", "--store", filepath.Join(dir, "store"))
			want := "the agent's prompt " + prompt + " is " + itoa(len(content)) + " bytes and takes "
			if code != 2 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "a plan's string holds; shorten it") || strings.Contains(errOut, "verification") {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
			}
		})
	}
}
