//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// StaleLock returns the pid named in dir's lock file when that process is
// gone (it crashed or was killed), and 0 otherwise. The lock itself is an
// flock the kernel released with the process; only the file stays behind,
// and opening the store takes it over.
func StaleLock(dir string) int {
	pid := lockPID(filepath.Join(dir, dataDir, "LOCK"))
	if pid <= 0 || pid == os.Getpid() {
		return 0
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return pid
	}
	return 0
}

// lockShared takes a shared lock on the data directory dataPath, as
// Badger's read-only mode does, so no writer opens the store while a view
// of it is read. A writer holding it is a LockedError.
func lockShared(dataPath string) (*os.File, error) {
	f, err := os.Open(dataPath)
	if err != nil {
		return nil, fmt.Errorf("open ledger store %s: %w", filepath.Dir(dataPath), err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Dir: filepath.Dir(dataPath), PID: lockPID(filepath.Join(dataPath, "LOCK"))}
		}
		return nil, fmt.Errorf("lock ledger store %s: %w", filepath.Dir(dataPath), err)
	}
	return f, nil
}

// processAlive reports whether process pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
