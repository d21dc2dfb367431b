// Package proctest helps tests that watch processes end: whether a pid
// is still alive (a zombie is not) and waiting, by polling, until it is
// gone. It is imported by tests only.
package proctest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Alive reports whether pid is a live process; a zombie, which has exited
// and waits only to be reaped, is not.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// Gone polls until pid is no longer alive and reports whether that
// happened within d.
func Gone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// WaitGone fails t when pid is still alive after 5 s.
func WaitGone(t testing.TB, pid int) {
	t.Helper()
	if !Gone(pid, 5*time.Second) {
		t.Fatalf("process %d is still alive", pid)
	}
}
