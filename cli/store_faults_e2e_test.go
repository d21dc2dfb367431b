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
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
)

// counterConfig is a run that counts in the kv, one kv.put an iteration,
// until it is stopped.
const counterConfig = `[intent]
goal = "Count"
[model]
provider = "static"
[plan]
rtfs = '''
(step "Count" (call :kv.put {:key "n" :value (+ 1 (or (call :kv.get {:key "n"}) 0))}))
'''
[[stop]]
kind = "max_iterations"
max = 100000
`

// mayMountTmpfs is the need of a test that puts a store on a small tmpfs.
var mayMountTmpfs = []e2e.Need{e2e.Tool("mount"), e2e.Tool("umount"), e2e.Probe("a tmpfs it may mount (root)", func(dir string) error {
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mounting a 2 MiB tmpfs is not permitted here (%v: %s)", err, out)
	}
	return exec.Command("umount", dir).Run()
})}

// FullDiskClosesTheRunNamingTheDisk fills the small tmpfs a run's
// store lives on while the run writes: the run closes as failed (exit 1)
// naming the disk, its store verifies with everything committed, and no
// lock or socket is left.
var _ = suite.Add(e2e.Test{Name: "FullDiskClosesTheRunNamingTheDisk", Needs: mayMountTmpfs, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "small")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a 2 MiB tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(mnt, "store")
	writeFile(t, cfg, counterConfig)
	cmd := e.Ralph("run", cfg, "--no-tui", "--store", store).Start()
	for range 20 {
		cmd.WaitLine("IterationCompleted")
	}
	// Leave about 600 KiB: less than an ordinary commit keeps free, more
	// than the run's closing action needs.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * st.Bsize; free > 600<<10 {
		if err := os.WriteFile(filepath.Join(mnt, "fill"), make([]byte, free-600<<10), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := cmd.Rest()
	err := cmd.Wait()
	// The commit that meets the full disk may be a deferred append's,
	// which Sync reports as such.
	full := regexp.MustCompile(`failure by error — make the run's actions durable: (a deferred append failed to commit: )?the disk holding ledger store ` + regexp.QuoteMeta(store) + ` is full: `)
	if code := exitCode(err); code != 1 || !strings.Contains(out, "RunFailed error FAILED") || !full.MatchString(out) {
		t.Fatalf("exit %d (%v)\nstdout:\n%s\nstderr:\n%s", code, err, out, cmd.Stderr())
	}
	if s := cmd.Stderr(); strings.Contains(s, "SIGBUS") || strings.Contains(s, "goroutine ") {
		t.Fatalf("ralph crashed:\n%s", s)
	}
	for _, left := range []string{filepath.Join(store, "data", "LOCK"), filepath.Join(store, "ralph.sock")} {
		if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left behind (%v)", left, err)
		}
	}
	if out, errOut, code := e.Ralph("chain", "verify", "--store", store).Run(); code != 0 {
		t.Fatalf("chain verify after the disk filled: exit %d\n%s\n%s", code, out, errOut)
	}
	runs := runsClosed(t, e, store)
	if runs[0]["state"] != "failed" {
		t.Errorf("the run is %v, want failed", runs[0]["state"])
	}
}})

// KillNineKeepsKVAndChainAgreed kills a counting run with SIGKILL
// at random moments and resumes it: after each kill the kv counter equals
// the kv.put calls the chain records.
var _ = suite.Add(e2e.Test{Name: "KillNineKeepsKVAndChainAgreed", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
	writeFile(t, cfg, counterConfig)
	writeFile(t, filepath.Join(dir, "read.rtfs"), `(call :kv.get {:key "n"})`)
	for round, wait := range []time.Duration{300 * time.Millisecond, 550 * time.Millisecond, 800 * time.Millisecond} {
		args := []string{"run", cfg, "--no-tui", "--store", store}
		if round > 0 {
			out, _, _ := e.Ralph("runs", "--json", "--store", store).Run()
			id := strings.SplitN(strings.SplitN(out, `"id":"`, 2)[1], `"`, 2)[0]
			args = []string{"resume", id, "--no-tui", "--store", store}
		}
		ralph := e.Ralph(args...).Start()
		ralph.WaitLine("CapabilityCall kv.put")
		time.Sleep(wait) // not a measurement: where in a kv.put the kill lands
		_ = ralph.Kill()
		_ = ralph.Wait()
		export, errOut, code := e.Ralph("chain", "export", "--store", store).Run()
		if code != 0 {
			t.Fatalf("round %d: export: %s", round, errOut)
		}
		puts := 0
		for _, l := range strings.Split(export, "\n") {
			if strings.Contains(l, `"action_type":"CapabilityCall"`) && strings.Contains(l, `"function_name":"kv.put"`) && strings.Contains(l, `"success":true`) {
				puts++
			}
		}
		out, errOut, code := e.Ralph("exec", filepath.Join(dir, "read.rtfs"), "--store", store).Run()
		if code != 0 || !strings.Contains(out, "result: "+strconv.Itoa(puts)+"\n") {
			t.Fatalf("round %d: the chain records %d kv.put calls but the kv says:\n%s\n%s", round, puts, out, errOut)
		}
		t.Logf("round %d: %d kv.put calls, kv agrees", round, puts)
	}
}})

// killedCounterRun runs counterConfig headless in a new directory until
// iterations iterations have completed, then kills it (SIGKILL), and
// returns the directory, the config and the store it left.
func killedCounterRun(t *testing.T, e *e2e.E, iterations int) (dir, cfg, store string) {
	t.Helper()
	dir = t.TempDir()
	cfg, store = filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
	writeFile(t, cfg, counterConfig)
	cmd := e.Ralph("run", cfg, "--no-tui", "--store", store).Start()
	for range iterations {
		cmd.WaitLine("IterationCompleted")
	}
	_ = cmd.Kill()
	_ = cmd.Wait()
	return dir, cfg, store
}

// DamagedLogIsNamedNotLost kills a run, flips a byte in the middle
// of its memtable log, and checks that chain verify fails naming the loss
// against the witness, that a new run on the store is refused with one
// sentence, and that neither changed the log.
var _ = suite.Add(e2e.Test{Name: "DamagedLogIsNamedNotLost", Run: func(t *testing.T, e *e2e.E) {
	_, cfg, store := killedCounterRun(t, e, 40)
	mems, _ := filepath.Glob(filepath.Join(store, "data", "*.mem"))
	if len(mems) == 0 {
		t.Fatal("the killed run left no memtable log")
	}
	mem := mems[len(mems)-1]
	b, err := os.ReadFile(mem)
	if err != nil {
		t.Fatal(err)
	}
	used := len(strings.TrimRight(string(b), "\x00"))
	b[used/3] ^= 0x01
	if err := os.WriteFile(mem, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.Ralph("chain", "verify", "--store", store).Run()
	if code != 1 || !strings.Contains(errOut, "witnessed") || !strings.Contains(errOut, "Badger discarded its log after damage ("+mem) || !strings.Contains(errOut, "restore a copy") {
		t.Fatalf("chain verify: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("chain verify: %s", errOut)
	out, errOut, code = e.Ralph("run", cfg, "--no-tui", "--store", store).Run()
	if code == 0 || !strings.Contains(out+errOut, "is open read-only and refuses to write, because the store holds") {
		t.Fatalf("run on a store behind its witness: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("run: exit %d: %s%s", code, out, errOut)
	if after, _ := os.ReadFile(mem); string(after) != string(b) {
		t.Fatal("the damaged log was changed")
	}
}})

// WitnessSlotsSurviveAKill kills a run after its witness has
// advanced in place several times, then checks what chain verify reads
// from the witness file: the newest slot; the one before it when the
// newest was cut short (a kill mid-write); and, when both slots are
// damaged, an error naming the file, never a silent pass.
var _ = suite.Add(e2e.Test{Name: "WitnessSlotsSurviveAKill", Run: func(t *testing.T, e *e2e.E) {
	_, _, store := killedCounterRun(t, e, 6)
	ws, _ := filepath.Glob(filepath.Join(e.StateHome(), "ralph", "witness", "*"))
	if len(ws) != 1 {
		t.Fatalf("witness files: %v", ws)
	}
	b, err := os.ReadFile(ws[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "ralph-witness 2 4096") || len(b) != 64+2*4096 {
		t.Fatalf("the witness file is not two 4 KiB slots: %d bytes, %q", len(b), b[:min(len(b), 64)])
	}
	verify := func(want string, wantCode int) {
		t.Helper()
		out, errOut, code := e.Ralph("chain", "verify", "--store", store).Run()
		if code != wantCode || !strings.Contains(out+errOut, want) {
			t.Fatalf("chain verify: exit %d, want %d and %q\n%s\n%s", code, wantCode, want, out, errOut)
		}
	}
	verify("verified", 0)
	// The newest slot is the one with the higher seq (big-endian, first 8 bytes).
	seq := func(slot int) uint64 { return binary.BigEndian.Uint64(b[64+slot*4096:]) }
	newest := 0
	if seq(1) > seq(0) {
		newest = 1
	}
	torn := bytes.Clone(b)
	torn[64+newest*4096+16+5] ^= 0x01
	writeFile(t, ws[0], string(torn))
	verify("verified", 0)
	torn[64+(1-newest)*4096+16+5] ^= 0x01
	writeFile(t, ws[0], string(torn))
	verify("read the witnessed checkpoint: witness file "+ws[0]+" is damaged (neither of its slots holds a whole checkpoint)", 1)
}})
