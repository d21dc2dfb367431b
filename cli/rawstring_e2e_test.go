package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// Strings that are not UTF-8, or that look like keywords, survive chain
// export → import: every action keeps its hash.
var _ = suite.Add(e2e.Test{Name: "ExportImportKeepsRawStrings", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	plan := filepath.Join(dir, "p.rtfs")
	writeFile(t, plan, `(step "A" (do (call :ccos.echo {:message "\xff\xfe"}) (call :ccos.echo {:message ":kw"}) {"\xc3" "caf\xe9"}))`)
	if _, errOut, code := e.Ralph("exec", plan, "--store", store).Run(); code != 0 {
		t.Fatalf("exec: %d %s", code, errOut)
	}
	jsonl, _, code := e.Ralph("chain", "export", "--store", store).Run()
	if code != 0 || !strings.Contains(jsonl, `{"$base64":"//4="}`) {
		t.Fatalf("export (%d) has no escaped string:\n%s", code, jsonl)
	}
	copyStore := filepath.Join(dir, "copy")
	if out, errOut, code := e.Ralph("chain", "import", "--store", copyStore).Stdin(jsonl).Run(); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errOut)
	}
	again, _, code := e.Ralph("chain", "export", "--store", copyStore).Run()
	if code != 0 {
		t.Fatalf("export of the copy: %d", code)
	}
	hashes := func(s string) []string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			var a struct {
				ActionHash string `json:"action_hash"`
			}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			out = append(out, a.ActionHash)
		}
		return out
	}
	before, after := hashes(jsonl), hashes(again)
	if len(before) < 4 || strings.Join(before, " ") != strings.Join(after, " ") {
		t.Errorf("action hashes changed on import:\nbefore %v\nafter  %v", before, after)
	}
}})
