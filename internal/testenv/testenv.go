// Package testenv is the one way ralph's tests say that something they
// need is missing from the machine (a tool such as tmux or git, a device,
// /proc, a cgroup, the right to mount a tmpfs). On a developer's machine
// the test skips, saying what to install; under CI (RALPH_CI=1, which
// .ci/run sets after installing everything the tests need) it fails, so a
// test that did not run never passes for one that did.
//
// Skips that are not about the machine (-short, a helper process, a
// variable that opts in to recording) call t.Skip themselves.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// CIEnv is the variable that makes a missing need a failure.
const CIEnv = "RALPH_CI"

// CI reports whether the tests run under CI (RALPH_CI=1).
func CI() bool { return os.Getenv(CIEnv) == "1" }

// Need stops the test because what it needs is missing, why saying how
// (an error, the fix): a skip, or under CI a failure.
func Need(t testing.TB, what string, why ...any) {
	t.Helper()
	msg := "needs " + what
	if len(why) > 0 {
		msg += ": " + fmt.Sprint(why...)
	}
	if CI() {
		t.Fatalf("%s (%s=1: CI installs everything the tests need, so this is a broken CI, not a skip)", msg, CIEnv)
	}
	t.Skip(msg)
}

// Tool returns the path of the program name on PATH, or stops the test
// (Need) when there is none.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Need(t, name, err)
	}
	return path
}

// File stops the test (Need) when path does not exist: a device
// (/dev/full), a /proc file, a program by its absolute path.
func File(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Need(t, path, err)
	}
}
