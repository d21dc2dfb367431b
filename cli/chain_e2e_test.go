package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

var _ = suite.Add(e2e.Test{Name: "Chain", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	plan := filepath.Join(dir, "p.rtfs")
	writeFile(t, plan, `(do (step "A" (call :ccos.echo {:message "a"})) (step "B" (call :ccos.math.mul 6 7)))`)
	if _, errOut, code := e.Ralph("exec", plan, "--store", store).Run(); code != 0 {
		t.Fatalf("exec: %d %s", code, errOut)
	}
	out, errOut, code := e.Ralph("chain", "verify", "--store", store).Run()
	if code != 0 || !strings.HasPrefix(out, "verified 9 actions, ") {
		t.Fatalf("verify: %d %q %q", code, out, errOut)
	}
	out, _, code = e.Ralph("chain", "show", "--tree", "--store", store).Run()
	if code != 0 || !strings.Contains(out, "├─ #3 PlanStepStarted A ok") || !strings.Contains(out, "│  ├─ #4 CapabilityCall ccos.echo ok") {
		t.Errorf("show --tree:\n%s", out)
	}
	jsonl, _, code := e.Ralph("chain", "export", "--store", store).Run()
	if code != 0 || strings.Count(jsonl, "\n") != 9 || !strings.Contains(jsonl, `"action_type":"CapabilityCall"`) {
		t.Fatalf("export (%d):\n%s", code, jsonl)
	}
	copyStore := filepath.Join(dir, "copy")
	if out, errOut, code := e.Ralph("chain", "import", "--store", copyStore).Stdin(jsonl).Run(); code != 0 || !strings.Contains(out, "imported 9 actions as seq 1–9") {
		t.Fatalf("import: %d %q %q", code, out, errOut)
	}
	// A malformed line refuses the whole import, naming the line.
	bad := strings.Replace(jsonl, `"action_type":"CapabilityCall"`, `"action_type":"Nonsense"`, 1)
	_, errOut, code = e.Ralph("chain", "import", "--store", copyStore).Stdin(bad).Run()
	if code != 2 || !strings.Contains(errOut, "line 4") {
		t.Errorf("bad import: %d %q", code, errOut)
	}
	if out, _, _ := e.Ralph("chain", "verify", "--store", copyStore).Run(); !strings.HasPrefix(out, "verified 9 actions") {
		t.Errorf("the refused import changed the store: %q", out)
	}
	// A corrupted or foreign directory is one clear sentence.
	foreign := filepath.Join(dir, "foreign")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(foreign, "notes.txt"), "not a ledger")
	_, errOut, code = e.Ralph("chain", "verify", "--store", foreign).Run()
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("foreign store: %d %q", code, errOut)
	}
}})

var _ = suite.Add(e2e.Test{Name: "ChainShowUnknownRun", Run: func(t *testing.T, e *e2e.E) {
	store := filepath.Join(t.TempDir(), "store")
	if _, errOut, code := e.Ralph("run", "../examples/quickstart/ralph.toml", "--store", store).Run(); code != 0 {
		t.Fatalf("quickstart: %d %s", code, errOut)
	}
	out, errOut, code := e.Ralph("chain", "show", "--run", "nope", "--store", store).Run()
	if code != 2 || out != "" || !strings.Contains(errOut, "no run nope in this store; `ralph runs` lists them") {
		t.Errorf("chain show --run nope: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}})

// Reading commands pointed at an empty directory say there is no store and
// leave the directory as it was.
var _ = suite.Add(e2e.Test{Name: "ReadCommandsDoNotCreateAStore", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	for _, args := range [][]string{{"history", "abc"}, {"runs"}, {"chain", "show"}, {"chain", "verify"}} {
		_, errOut, code := e.Ralph(append(args, "--store", dir)...).Run()
		if code != 2 || !strings.Contains(errOut, "no store at "+dir) {
			t.Errorf("%v on an empty directory: exit %d, %q", args, code, errOut)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("reading commands wrote %d files into an empty directory", len(entries))
	}
}})

// A failed import into a new store leaves nothing behind.
var _ = suite.Add(e2e.Test{Name: "FailedImportLeavesNoStore", Run: func(t *testing.T, e *e2e.E) {
	store := filepath.Join(t.TempDir(), "new")
	_, errOut, code := e.Ralph("chain", "import", "--store", store).Stdin("garbage\n").Run()
	if code != 2 || !strings.Contains(errOut, "line 1") {
		t.Errorf("import of garbage: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(store); err == nil {
		t.Errorf("a failed import left a store at %s", store)
	}
}})
