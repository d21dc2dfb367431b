//go:build unix

package ledger

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testenv"
)

func TestStaleLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if pid := StaleLock(dir); pid != 0 {
		t.Errorf("no lock file: StaleLock = %d", pid)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		testenv.Need(t, "the program true", err)
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

// A directory lock held for a moment with no other process named — what a
// child being forked leaves behind when this process closes a store — is
// waited out instead of being reported as a store in use.
func TestOpenWaitsOutALockNoProcessHolds(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s := openDir(t, dir, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(filepath.Join(dir, dataDir)) // the descriptor Badger locks
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(100 * time.Millisecond) // the child has not exec'd yet
		d.Close()
	}()
	s, err = Open(Options{Dir: dir})
	<-released
	if err != nil {
		t.Fatalf("open while a lock nobody is named in was briefly held: %v", err)
	}
	s.Close()
}
