//go:build unix

package ledger

import (
	"errors"
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
