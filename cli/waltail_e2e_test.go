//go:build linux

package cli_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/internal/eventually"
)

// execPutsPlan records one kv.put action after another, far more than a
// test waits for: it is killed on the way.
const execPutsPlan = `(map (fn [i] (call :kv.put {:key "n" :value i})) (range 1000000))`

// killedExecAt runs execPutsPlan on store until action seq upto is in its
// memtable log, then kills it (SIGKILL: no close, no witness), and returns
// that log.
func killedExecAt(t *testing.T, e *e2e.E, store string, upto uint64) string {
	t.Helper()
	plan := filepath.Join(t.TempDir(), "puts.rtfs")
	writeFile(t, plan, execPutsPlan)
	p := e.Ralph("exec", plan, "--store", store).Start()
	key := append([]byte("a/"), binary.BigEndian.AppendUint64(nil, upto)...)
	var mem string
	eventually.Poll(func() bool {
		mems, _ := filepath.Glob(filepath.Join(store, "data", "*.mem"))
		for _, m := range mems {
			if b, err := os.ReadFile(m); err == nil && bytes.Contains(b, key) {
				mem = m
				return true
			}
		}
		return false
	})
	_ = p.Kill()
	_ = p.Wait()
	return mem
}

// damageAction flips a byte inside the stored action seq in the memtable
// log mem (its key is a/ ‖ be64(seq), and its value follows the key's 8
// bytes of version), and returns the damaged log's bytes.
func damageAction(t *testing.T, mem string, seq uint64) []byte {
	t.Helper()
	b, err := os.ReadFile(mem)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, append([]byte("a/"), binary.BigEndian.AppendUint64(nil, seq)...))
	if i < 0 {
		t.Fatalf("action %d is not in %s", seq, mem)
	}
	b[i+2+8+8+16] ^= 0x01
	if err := os.WriteFile(mem, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// verifiedActions is the count chain verify prints for a store it passes.
func verifiedActions(t *testing.T, e *e2e.E, store string) uint64 {
	t.Helper()
	out, errOut, code := e.Ralph("chain", "verify", "--store", store).Run()
	m := regexp.MustCompile(`verified (\d+) actions`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("chain verify: exit %d\n%s\n%s", code, out, errOut)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// DamagedLogTailIsNamedWitnessedOrNot damages the memtable log of a
// killed ralph exec in the middle of its actions, on a store witnessed up
// to a finished run before it (the damage after the witnessed checkpoint)
// and on a new store (no witness at all). Each time: chain verify exits 1
// naming the log and the seqs a writer's open would discard; exec (and on
// the witnessed store run) refuse to write, naming them too; none of them changed the
// log; and the way out the message gives (export the bundle, import it into
// a new store) gives a store that verifies and takes writes.
var _ = suite.Add(e2e.Test{Name: "DamagedLogTailIsNamedWitnessedOrNot", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, counterConfig)
	witnessed := filepath.Join(dir, "witnessed")
	if out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--max-iterations", "2", "--store", witnessed).Run(); code != 3 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	w := verifiedActions(t, e, witnessed) // the run's end is witnessed
	for _, tc := range []struct {
		name, store string
		first       uint64 // the first action of the killed exec
	}{
		{"after the witnessed checkpoint", witnessed, w + 1},
		{"no witness", filepath.Join(dir, "new"), 1},
	} {
		bad := tc.first + 40
		mem := killedExecAt(t, e, tc.store, bad+40)
		damaged := damageAction(t, mem, bad)
		want := fmt.Sprintf("(seqs %d–", bad)
		out, errOut, code := e.Ralph("chain", "verify", "--store", tc.store).Run()
		if code != 1 || !strings.Contains(errOut, fmt.Sprintf("verification failed at seq %d: the store has a damaged log: %s", bad, mem)) ||
			!strings.Contains(errOut, want) || !strings.Contains(errOut, "ralph chain export --bundle") {
			t.Fatalf("%s: chain verify: exit %d, want 1 naming %s and %s\n%s\n%s", tc.name, code, mem, want, out, errOut)
		}
		t.Logf("%s: chain verify: %s", tc.name, errOut)
		plan := filepath.Join(dir, "one.rtfs")
		writeFile(t, plan, `(call :kv.put {:key "m" :value 1})`)
		writers := [][]string{{"exec", plan}}
		if tc.store == witnessed {
			writers = append(writers, []string{"run", cfg, "--no-tui", "--max-iterations", "1"})
		}
		for _, args := range writers {
			out, errOut, code := e.Ralph(append(args, "--store", tc.store)...).Run()
			if code == 0 || !strings.Contains(out+errOut, "refuses to write, because it has a damaged log: "+mem) || !strings.Contains(out+errOut, want) {
				t.Fatalf("%s: %s on the damaged store: exit %d\n%s\n%s", tc.name, args[0], code, out, errOut)
			}
		}
		if after, _ := os.ReadFile(mem); !bytes.Equal(after, damaged) {
			t.Fatalf("%s: the damaged log was changed", tc.name)
		}
	}
	bundle, errOut, code := e.Ralph("chain", "export", "--bundle", "--store", witnessed).Run()
	if code != 0 {
		t.Fatalf("export the part that reads: %s", errOut)
	}
	fresh := filepath.Join(dir, "fresh")
	if out, errOut, code := e.Ralph("chain", "import", "--store", fresh).Stdin(bundle).Run(); code != 0 || !strings.Contains(out, fmt.Sprintf("imported %d actions", w+40)) {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--max-iterations", "1", "--store", fresh).Run(); code != 3 {
		t.Fatalf("run on the imported store: exit %d\n%s\n%s", code, out, errOut)
	}
	verifiedActions(t, e, fresh)
}})

// UnwritableWitnessIsWarnedAndNamed runs with a witness directory that
// cannot be made (a file is in its place): the run's output warns once,
// naming the directory, and the run still ends as it would; chain verify
// then exits 1 naming the checkpoint that was not witnessed, until a run
// with the directory writable witnesses the store again.
var _ = suite.Add(e2e.Test{Name: "UnwritableWitnessIsWarnedAndNamed", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
	writeFile(t, cfg, counterConfig)
	wd := filepath.Join(e.StateHome(), "ralph", "witness")
	if err := os.MkdirAll(filepath.Dir(wd), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, wd, "a file where the witness directory goes\n")
	out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--max-iterations", "3", "--store", store).Run()
	warning := "ralph: warning: the witness of ledger store " + store + " could not be written in " + wd
	if code != 3 || strings.Count(errOut, warning) != 1 || !strings.Contains(errOut, "not a directory") {
		t.Fatalf("run with an unwritable witness: exit %d, want 3 and one warning %q\n%s\n%s", code, warning, out, errOut)
	}
	if err := os.Remove(wd); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.Ralph("chain", "verify", "--store", store).Run()
	if code != 1 || !regexp.MustCompile(`failed at seq \d+: the witness could not be written at seq \d+ \(.*not a directory\)`).MatchString(errOut) ||
		!strings.Contains(errOut, "a cut of any action would go unseen") {
		t.Fatalf("chain verify after the witness failed: exit %d, want 1 naming it\n%s\n%s", code, out, errOut)
	}
	t.Logf("chain verify: %s", errOut)
	if out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--max-iterations", "1", "--store", store).Run(); code != 3 || strings.Contains(errOut, "warning") {
		t.Fatalf("run with the witness writable: exit %d\n%s\n%s", code, out, errOut)
	}
	verifiedActions(t, e, store)
}})

// WitnessOnAFullOrReadOnlyDiskIsWarnedAndNamed puts the witness directory
// on a small tmpfs, filled to the last byte, then mounted read-only: each
// run warns once naming the disk's error and ends as it would, and chain
// verify then names the checkpoint that was not witnessed.
var _ = suite.Add(e2e.Test{Name: "WitnessOnAFullOrReadOnlyDiskIsWarnedAndNamed", Needs: mayMountTmpfs, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, counterConfig)
	wd := filepath.Join(e.StateHome(), "ralph", "witness")
	if err := os.MkdirAll(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, opts, want string }{
		{"full", "size=1m", "no space left on device"},
		{"read-only", "ro,size=1m", "read-only file system"},
	} {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", tc.opts, "tmpfs", wd).CombinedOutput(); err != nil {
			t.Fatalf("mount a tmpfs at %s: %v: %s", wd, err, out)
		}
		mounted := true
		unmount := func() {
			if !mounted {
				return
			}
			mounted = false
			if out, err := exec.Command("umount", wd).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", wd, err, out)
			}
		}
		t.Cleanup(unmount) // when the case fails before it unmounts
		if tc.name == "full" {
			fillDisk(t, filepath.Join(wd, "fill"))
		}
		store := filepath.Join(dir, tc.name)
		out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--max-iterations", "3", "--store", store).Run()
		unmount()
		warning := "ralph: warning: the witness of ledger store " + store + " could not be written in " + wd
		if code != 3 || strings.Count(errOut, warning) != 1 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%s: run: exit %d, want 3 and one warning %q (%s)\n%s\n%s", tc.name, code, warning, tc.want, out, errOut)
		}
		out, errOut, code = e.Ralph("chain", "verify", "--store", store).Run()
		if code != 1 || !strings.Contains(errOut, "the witness could not be written at seq") || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%s: chain verify: exit %d, want 1 naming the witness\n%s\n%s", tc.name, code, out, errOut)
		}
		t.Logf("%s: chain verify: %s", tc.name, errOut)
	}
}})

// fillDisk writes path until its file system has no byte left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			buf = buf[:len(buf)/2]
		}
	}
}
