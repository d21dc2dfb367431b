//go:build unix

package ledger

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestStaleLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if pid := StaleLock(dir); pid != 0 {
		t.Errorf("no lock file: StaleLock = %d", pid)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	lock := func(pid int) {
		if err := os.MkdirAll(filepath.Join(dir, dataDir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dataDir, "LOCK"), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock(dead.Process.Pid) // exited and reaped
	if pid := StaleLock(dir); pid != dead.Process.Pid {
		t.Errorf("lock of a dead process: StaleLock = %d, want %d", pid, dead.Process.Pid)
	}
	lock(os.Getpid())
	if pid := StaleLock(dir); pid != 0 {
		t.Errorf("our own lock: StaleLock = %d", pid)
	}
}
