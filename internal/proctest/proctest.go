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

	"github.com/ralphloop/ralph/internal/eventually"
)

// Alive reports whether pid is a live process; a zombie, which has exited
// and waits only to be reaped, is not, nor is one being torn down (X).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z' && s[i+2] != 'X'
}

// Gone polls until pid is no longer alive (eventually.Poll) and reports
// whether that happened before the wait gave up.
func Gone(pid int) bool {
	return eventually.Poll(func() bool { return !Alive(pid) })
}

// WaitGone fails t when pid never stops being alive.
func WaitGone(t testing.TB, pid int) {
	t.Helper()
	eventually.True(t, "process "+strconv.Itoa(pid)+" ending", func() bool { return !Alive(pid) })
}
