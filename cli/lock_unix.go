//go:build unix

package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// staleLockPID returns the pid in the store's lock file when that process
// is gone (it crashed or was killed), and 0 otherwise. The lock itself is
// an flock the kernel released with the process; the file stays behind.
func staleLockPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "data", "LOCK"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return 0
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return pid
	}
	return 0
}
