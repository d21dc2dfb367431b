package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// trustEnv is the test's environment with its keys and witnesses under
// home: another machine's.
func trustEnv(e *e2e.E, home string, extra ...string) []string {
	return append(e.Env(), append([]string{"XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_STATE_HOME=" + filepath.Join(home, "state")}, extra...)...)
}

// execStore writes a store of 9 actions with one plan run.
func execStore(t *testing.T, e *e2e.E, env []string, dir, store string) {
	t.Helper()
	plan := filepath.Join(dir, "p.rtfs")
	writeFile(t, plan, `(do (step "A" (call :ccos.echo {:message ":x"})) (step "B" (call :ccos.math.mul 6 7)))`)
	if _, errOut, code := e.Ralph("exec", plan, "--store", store).Env(env).Run(); code != 0 {
		t.Fatalf("exec: %d %s", code, errOut)
	}
}

// fileDigests maps every file under dir to its SHA-256 and mode.
func fileDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		sum := sha256.Sum256(b)
		out[p] = hex.EncodeToString(sum[:]) + " " + fi.Mode().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if b, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, b)
	}
}

// ChainKeysStayOutOfTheStore: the private key is written outside
// the store (0600) on the first write; reading a copy without it (what an
// auditor gets) verifies, changes no file and creates no key.
var _ = suite.Add(e2e.Test{Name: "ChainKeysStayOutOfTheStore", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	env := trustEnv(e, home)
	store := filepath.Join(dir, "store")
	execStore(t, e, env, dir, store)
	if _, err := os.Stat(filepath.Join(store, "keys")); !os.IsNotExist(err) {
		t.Fatalf("the store holds a keys directory: %v", err)
	}
	keys, _ := filepath.Glob(filepath.Join(home, "config", "ralph", "keys", "*.ed25519"))
	if len(keys) != 1 {
		t.Fatalf("private keys %v", keys)
	}
	if fi, _ := os.Stat(keys[0]); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", fi.Mode())
	}
	vkey, _, code := e.Ralph("chain", "key", "--store", store).Env(env).Run()
	vkey = strings.TrimSpace(vkey)
	if code != 0 || !strings.HasPrefix(vkey, "ralph/") {
		t.Fatalf("chain key: %d %q", code, vkey)
	}

	// The auditor's machine: another home, no private key anywhere.
	auditor := trustEnv(e, filepath.Join(dir, "auditor"))
	before := fileDigests(t, store)
	out, errOut, code := e.Ralph("chain", "verify", "--store", store, "--key", vkey).Env(auditor).Run()
	if code != 0 || !strings.Contains(out, "verified 9 actions, 9 checkpoints") || !strings.Contains(out, "trusted key "+vkey+" (pinned with --key)") {
		t.Fatalf("verify without the private key: %d %q %q", code, out, errOut)
	}
	for _, args := range [][]string{{"chain", "export"}, {"chain", "show"}, {"chain", "checkpoint"}, {"chain", "prove", "4"}, {"chain", "key"}} {
		if _, errOut, code := e.Ralph(append(args, "--store", store)...).Env(auditor).Run(); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut)
		}
	}
	if after := fileDigests(t, store); !maps2Equal(before, after) {
		t.Fatalf("reading commands changed the store:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(dir, "auditor", "config")); !os.IsNotExist(err) {
		t.Fatalf("a reading command created a key directory: %v", err)
	}
}})

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// ChainResignedWithAnotherKey: an attacker who can write the store
// edits an action, recomputes every hash and re-signs with a key of their
// own (here: export, edit, import under another key). The store verifies
// on its own; against the pinned key it fails, naming both keys.
var _ = suite.Add(e2e.Test{Name: "ChainResignedWithAnotherKey", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	env := trustEnv(e, filepath.Join(dir, "home"))
	store := filepath.Join(dir, "store")
	execStore(t, e, env, dir, store)
	vkey, _, _ := e.Ralph("chain", "key", "--store", store).Env(env).Run()
	vkey = strings.TrimSpace(vkey)
	jsonl, _, _ := e.Ralph("chain", "export", "--store", store).Env(env).Run()
	edited := strings.Replace(jsonl, `42`, `43`, 1)
	forged := filepath.Join(dir, "forged")
	attacker := trustEnv(e, filepath.Join(dir, "attacker"))
	if _, errOut, code := e.Ralph("chain", "import", "--store", forged).Stdin(edited).Env(attacker).Run(); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	if out, _, code := e.Ralph("chain", "verify", "--store", forged).Env(attacker).Run(); code != 0 {
		t.Fatalf("the forged store does not verify on its own: %q", out)
	}
	forgedKey, _, _ := e.Ralph("chain", "key", "--store", forged).Env(attacker).Run()
	_, errOut, code := e.Ralph("chain", "verify", "--store", forged, "--key", vkey).Env(attacker).Run()
	want := "ledger verification failed at seq 0: the store's checkpoints are signed by key " + strings.TrimSpace(forgedKey) + ", not by the pinned key " + vkey
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("verify --key: %d\n%s\nwant %s", code, errOut, want)
	}
	if !strings.Contains(errOut, `also: seq 9: checkpoint 9 is for log "ralph/`) {
		t.Errorf("the checkpoints are not named:\n%s", errOut)
	}
}})

// ChainTruncationAndRollback: cutting the store back to an earlier
// checkpoint, or putting an older copy in its place, leaves a store that
// verifies on its own; the witness written at the end of the last run
// names it.
var _ = suite.Add(e2e.Test{Name: "ChainTruncationAndRollback", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	env := trustEnv(e, filepath.Join(dir, "home"))
	store := filepath.Join(dir, "store")
	execStore(t, e, env, dir, store)
	saved := filepath.Join(dir, "cp9.txt")
	cp9, _, _ := e.Ralph("chain", "checkpoint", "--store", store).Env(env).Run()
	writeFile(t, saved, cp9)
	older := filepath.Join(dir, "older")
	copyDir(t, store, older)
	execStore(t, e, env, dir, store)
	out, errOut, code := e.Ralph("chain", "verify", "--store", store, "--since", saved).Env(env).Run()
	if code != 0 || !strings.Contains(out, "verified 18 actions") || !strings.Contains(out, "consistent with checkpoint "+saved) {
		t.Fatalf("verify --since: %d %q %q", code, out, errOut)
	}

	// Rollback: the older copy in the store's place.
	rolled := filepath.Join(dir, "rolled")
	copyDir(t, older, rolled)
	if err := os.RemoveAll(store); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rolled, store); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = e.Ralph("chain", "verify", "--store", store).Env(env).Run()
	if code != 1 || !strings.Contains(errOut, "ledger verification failed at seq 10: the store holds 9 actions but checkpoint "+filepath.Join(dir, "home", "state", "ralph", "witness")) ||
		!strings.Contains(errOut, "witnessed 18 (signed ") || !strings.Contains(errOut, "the store was truncated or rolled back to an older copy") {
		t.Fatalf("rollback: %d %s", code, errOut)
	}
	// The saved checkpoint of 9 actions still holds for the older copy.
	if out, errOut, code := e.Ralph("chain", "verify", "--store", store, "--since", saved).Env(trustEnv(e, filepath.Join(dir, "fresh"))).Run(); code != 0 || !strings.Contains(out, "consistent with checkpoint "+saved) {
		t.Fatalf("older copy --since its own checkpoint: %d %q %q", code, out, errOut)
	}
}})

// ChainBundleRoundTrip: export --bundle, verify it with no store
// against the pinned key, import it into a new store: every action hash is
// kept (the string ":x" stays a string).
var _ = suite.Add(e2e.Test{Name: "ChainBundleRoundTrip", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	env := trustEnv(e, filepath.Join(dir, "home"))
	store := filepath.Join(dir, "store")
	execStore(t, e, env, dir, store)
	execStore(t, e, env, dir, store)
	vkey, _, _ := e.Ralph("chain", "key", "--store", store).Env(env).Run()
	vkey = strings.TrimSpace(vkey)
	bundle, errOut, code := e.Ralph("chain", "export", "--bundle", "--store", store).Env(env).Run()
	if code != 0 || !strings.HasPrefix(bundle, "ralph-bundle 1\nkey "+vkey+"\n") {
		t.Fatalf("export --bundle: %d %s", code, errOut)
	}
	file := filepath.Join(dir, "x.bundle")
	writeFile(t, file, bundle)
	auditor := trustEnv(e, filepath.Join(dir, "auditor"))
	out, errOut, code := e.Ralph("chain", "verify", "--bundle", file, "--key", vkey).Env(auditor).Run()
	if code != 0 || !strings.Contains(out, "verified bundle "+file+": 18 actions, ") || !strings.Contains(out, "trusted key "+vkey+" (pinned with --key)") {
		t.Fatalf("verify --bundle: %d %q %q", code, out, errOut)
	}
	copyStore := filepath.Join(dir, "copy")
	if out, errOut, code := e.Ralph("chain", "import", "--store", copyStore, "--trust", vkey).Stdin(bundle).Env(auditor).Run(); code != 0 || !strings.Contains(out, "imported 18 actions as seq 1–18") {
		t.Fatalf("import: %d %q %q", code, out, errOut)
	}
	hashesOf := func(store string) []string {
		jsonl, errOut, code := e.Ralph("chain", "export", "--store", store).Env(auditor).Run()
		if code != 0 {
			t.Fatalf("export: %s", errOut)
		}
		var hs []string
		for _, l := range strings.Split(strings.TrimSpace(jsonl), "\n") {
			i := strings.Index(l, `"action_hash":"`)
			hs = append(hs, l[i+15:i+15+64])
		}
		return hs
	}
	if a, b := hashesOf(store), hashesOf(copyStore); !slices.Equal(a, b) || len(a) != 18 {
		t.Fatalf("hashes changed through export → import:\n%v\n%v", a, b)
	}
	if out, _, code := e.Ralph("chain", "verify", "--store", copyStore).Env(auditor).Run(); code != 0 {
		t.Fatalf("the imported store does not verify: %s", out)
	}
	// A bundle with a changed byte fails, naming its line.
	lines := strings.Split(bundle, "\n")
	lines[5] = lines[5][:10] + flipBase64(lines[5][10]) + lines[5][11:]
	writeFile(t, file, strings.Join(lines, "\n"))
	if _, errOut, code := e.Ralph("chain", "verify", "--bundle", file).Env(auditor).Run(); code != 1 || !strings.Contains(errOut, "bundle "+file+" does not verify: bundle line ") {
		t.Fatalf("a tampered bundle: %d %s", code, errOut)
	}
}})

func flipBase64(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

// ChainImportKilled: kill -9 in the middle of an import, after
// some of it was committed, leaves no store; the import run again works.
var _ = suite.Add(e2e.Test{Name: "ChainImportKilled", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	env := trustEnv(e, filepath.Join(dir, "home"))
	var jsonl strings.Builder
	for i := range 12000 {
		a := ledger.Action{ActionID: fmt.Sprintf("act-%06d", i), RunID: "run-1", Type: ledger.CapabilityCall, FunctionName: "shell.exec",
			Arguments: []rtfs.Value{rtfs.String(strings.Repeat("x", 200))}, Success: true, Timestamp: time.Unix(int64(i), 0).UTC()}
		jsonl.Write(ledger.AppendJSON(nil, &a))
		jsonl.WriteByte('\n')
	}
	lines := strings.SplitAfter(jsonl.String(), "\n")
	store := filepath.Join(dir, "store")
	imp := e.Ralph("chain", "import", "--store", store).Env(env).StdinPipe().Start()
	// Two chunks of 4096 are committed (fsynced) while the import waits
	// for the rest of its input.
	if _, err := io.WriteString(imp.Stdin, strings.Join(lines[:9000], "")); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, filepath.Join(dir, ".store.import-*", "data", "*.mem"))
	if err := imp.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	imp.Wait()
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Fatalf("a killed import left a store: %v", err)
	}
	if _, errOut, code := e.Ralph("chain", "verify", "--store", store).Env(env).Run(); code != 2 || !strings.Contains(errOut, "no store at "+store) {
		t.Fatalf("verify after the kill: %d %s", code, errOut)
	}
	out, errOut, code := e.Ralph("chain", "import", "--store", store).Stdin(jsonl.String()).Env(env).Run()
	if code != 0 || !strings.Contains(out, "imported 12000 actions as seq 1–12000") {
		t.Fatalf("import again: %d %q %q", code, out, errOut)
	}
	if out, _, code := e.Ralph("chain", "verify", "--store", store).Env(env).Run(); code != 0 || !strings.HasPrefix(out, "verified 12000 actions") {
		t.Fatalf("verify: %q", out)
	}
}})

// ChainFlippedTableByte: one flipped byte in a table file is named
// by verify (exit 1), with no panic and no lock left behind.
var _ = suite.Add(e2e.Test{Name: "ChainFlippedTableByte", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	env := trustEnv(e, filepath.Join(dir, "home"))
	store := filepath.Join(dir, "store")
	execStore(t, e, env, dir, store)
	tables, _ := filepath.Glob(filepath.Join(store, "data", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("the store has no table")
	}
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0x5a
	if err := os.WriteFile(tables[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := e.Ralph("chain", "verify", "--store", store).Env(env).Run()
	want := "ralph: ledger store " + store + " is corrupted: table " + tables[0] + " fails its checksum ("
	if code != 1 || !strings.HasPrefix(errOut, want) || !strings.HasSuffix(strings.TrimSpace(errOut), "); restore it from a backup or a bundle") {
		t.Fatalf("verify: %d %q\nwant %q…", code, errOut, want)
	}
	// No stale lock: the store opens again at once.
	if _, errOut, code := e.Ralph("chain", "verify", "--store", store).Env(env).Run(); code != 1 || strings.Contains(errOut, "in use") {
		t.Fatalf("verify again: %d %s", code, errOut)
	}
}})

// ChainImportIntoStoreKilled: kill -9 in the middle of an import
// into an existing store, after some of it was committed. Readers refuse
// the store until a writer rolls the import back; then it holds exactly
// the actions it held before, verifies, and takes the import again.
var _ = suite.Add(e2e.Test{Name: "ChainImportIntoStoreKilled", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	env := trustEnv(e, filepath.Join(dir, "home"))
	lineOf := func(i int) string {
		a := ledger.Action{ActionID: fmt.Sprintf("act-%06d", i), RunID: "run-1", Type: ledger.CapabilityCall, FunctionName: "shell.exec",
			Arguments: []rtfs.Value{rtfs.String(strings.Repeat("x", 200))}, Success: true, Timestamp: time.Unix(int64(i), 0).UTC()}
		return string(ledger.AppendJSON(nil, &a)) + "\n"
	}
	store := filepath.Join(dir, "store")
	var first strings.Builder
	for i := range 50 {
		first.WriteString(lineOf(i))
	}
	if out, errOut, code := e.Ralph("chain", "import", "--store", store).Stdin(first.String()).Env(env).Run(); code != 0 || !strings.Contains(out, "imported 50 actions") {
		t.Fatalf("first import: %d %q %q", code, out, errOut)
	}
	exported, errOut, code := e.Ralph("chain", "export", "--store", store).Env(env).Run()
	if code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	var rest strings.Builder
	for i := 50; i < 12050; i++ {
		rest.WriteString(lineOf(i))
	}
	lines := strings.SplitAfter(rest.String(), "\n")
	imp := e.Ralph("chain", "import", "--store", store).Env(env).StdinPipe().Start()
	// Two chunks of 4096 are committed (fsynced) while the import waits
	// for the rest of its input.
	if _, err := io.WriteString(imp.Stdin, strings.Join(lines[:9000], "")); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, filepath.Join(store, "data", "*.mem"))
	if err := imp.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	imp.Wait()
	_, errOut, code = e.Ralph("chain", "verify", "--store", store).Env(env).Run()
	if code != 1 || !strings.Contains(errOut, "holds an import that did not finish (after seq 50); open it for writing to roll it back") {
		t.Fatalf("verify of a store with a killed import: %d %s", code, errOut)
	}
	out, errOut, code := e.Ralph("chain", "import", "--store", store).Env(env).Run()
	if code != 0 || !strings.Contains(errOut, "ralph: rolled back an interrupted import of ") || !strings.Contains(out, "imported 0 actions") {
		t.Fatalf("roll back: %d %q %q", code, out, errOut)
	}
	if again, _, _ := e.Ralph("chain", "export", "--store", store).Env(env).Run(); again != exported {
		t.Fatal("the store after the rollback differs from before the import")
	}
	if out, _, code := e.Ralph("chain", "verify", "--store", store).Env(env).Run(); code != 0 || !strings.HasPrefix(out, "verified 50 actions") {
		t.Fatalf("verify after the rollback: %d %q", code, out)
	}
	out, errOut, code = e.Ralph("chain", "import", "--store", store).Stdin(rest.String()).Env(env).Run()
	if code != 0 || !strings.Contains(out, "imported 12000 actions as seq 51–12050") || strings.Contains(errOut, "rolled back") {
		t.Fatalf("import again: %d %q %q", code, out, errOut)
	}
	if out, _, code := e.Ralph("chain", "verify", "--store", store).Env(env).Run(); code != 0 || !strings.HasPrefix(out, "verified 12050 actions") {
		t.Fatalf("verify: %q", out)
	}
	// A bad line after committed chunks: nothing imported, at once.
	var bad strings.Builder
	for i := 20000; i < 25000; i++ {
		bad.WriteString(lineOf(i))
	}
	bad.WriteString("{oops\n")
	_, errOut, code = e.Ralph("chain", "import", "--store", store).Stdin(bad.String()).Env(env).Run()
	if code != 2 || !strings.Contains(errOut, "line 5001:") || !strings.Contains(errOut, "nothing was imported") {
		t.Fatalf("import with a bad line: %d %q", code, errOut)
	}
	if out, _, code := e.Ralph("chain", "verify", "--store", store).Env(env).Run(); code != 0 || !strings.HasPrefix(out, "verified 12050 actions") {
		t.Fatalf("verify after the bad import: %q", out)
	}
}})
