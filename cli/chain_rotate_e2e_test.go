package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// ChainBundleKeyRotation: the chain of a run that moved to another
// store (store A's bundle imported into store B, which then goes on) is one
// bundle with two key lines. chain verify --bundle pins both with --key
// given twice, names the key line when only one is pinned, and chain
// import --trust takes both.
var _ = suite.Add(e2e.Test{Name: "ChainBundleKeyRotation", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	env := trustEnv(e, filepath.Join(dir, "home"))
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	execStore(t, e, env, dir, a)
	keyOf := func(store string) string {
		out, errOut, code := e.Ralph("chain", "key", "--store", store).Env(env).Run()
		if code != 0 {
			t.Fatalf("chain key: %s", errOut)
		}
		return strings.TrimSpace(out)
	}
	export := func(store string) []string {
		out, errOut, code := e.Ralph("chain", "export", "--bundle", "--store", store).Env(env).Run()
		if code != 0 {
			t.Fatalf("export --bundle: %s", errOut)
		}
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	bundleA := export(a)
	if out, errOut, code := e.Ralph("chain", "import", "--store", b).Stdin(strings.Join(bundleA, "\n") + "\n").Env(env).Run(); code != 0 {
		t.Fatalf("import: %q %q", out, errOut)
	}
	execStore(t, e, env, dir, b)
	ka, kb := keyOf(a), keyOf(b)
	// A's lines, then B's key and B's lines after A's actions (B's own
	// checkpoints of the imported actions left out), then B's end line.
	n := strings.Count(strings.Join(bundleA, "\n"), "\na ")
	lines := append([]string(nil), bundleA[:len(bundleA)-1]...)
	lines = append(lines, "key "+kb)
	seen := 0
	for _, l := range export(b)[2:] {
		if strings.HasPrefix(l, "a ") {
			seen++
		}
		if seen > n || strings.HasPrefix(l, "end ") {
			lines = append(lines, l)
		}
	}
	file := filepath.Join(dir, "rotated.bundle")
	writeFile(t, file, strings.Join(lines, "\n")+"\n")
	out, errOut, code := e.Ralph("chain", "verify", "--bundle", file, "--key", ka, "--key", kb).Env(env).Run()
	if code != 0 || !strings.Contains(out, "trusted keys "+ka+", "+kb+" (pinned with --key)") {
		t.Fatalf("verify with both keys: %d %q %q", code, out, errOut)
	}
	if out, errOut, code := e.Ralph("chain", "verify", "--bundle", file).Env(env).Run(); code != 0 || !strings.Contains(out, "trusted keys "+ka+", "+kb+" (named by the bundle; pass --key for each to pin them)") {
		t.Fatalf("verify with no key pinned: %d %q %q", code, out, errOut)
	}
	keyLine := len(bundleA)
	_, errOut, code = e.Ralph("chain", "verify", "--bundle", file, "--key", ka).Env(env).Run()
	if want := "bundle line " + itoa(keyLine) + ": the checkpoints after this line are signed by key " + kb + ", not by the pinned key " + ka; code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("verify with A's key only: %d %q, want %q", code, errOut, want)
	}
	if _, errOut, code := e.Ralph("chain", "verify", "--store", a, "--key", ka, "--key", kb).Env(env).Run(); code != 2 || !strings.Contains(errOut, "a store is signed by one key") {
		t.Fatalf("two keys for a store: %d %q", code, errOut)
	}
	if out, errOut, code := e.Ralph("chain", "import", "--store", filepath.Join(dir, "c"), "--trust", ka, "--trust", kb).Stdin(strings.Join(lines, "\n") + "\n").Env(env).Run(); code != 0 || !strings.Contains(out, "imported") {
		t.Fatalf("import --trust twice: %d %q %q", code, out, errOut)
	}
}})
