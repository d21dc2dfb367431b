//go:build !linux

package procgroup

import (
	"errors"
	"os"
	"syscall"
)

func sweepKind() string { return ContainGroup }

func cgroupUsable() (string, bool) { return "", false }

func selfExe() (string, error) { return os.Executable() }

// cgroup does not exist outside Linux.
type cgroup struct{ path string }

func newCgroup(string) (*cgroup, error) { return nil, errors.New("cgroups are Linux only") }
func (g *cgroup) fd() int               { return -1 }
func (g *cgroup) kill() error           { return errors.New("cgroups are Linux only") }
func (g *cgroup) release() bool         { return false }
func killAndRemove(string) bool         { return false }

type procInfo struct{ pid int }

// sweep kills the group: without /proc there is no finding a process
// that left it.
func (t target) sweep(int) []procInfo {
	if t.pgid > 0 {
		_ = syscall.Kill(-t.pgid, syscall.SIGKILL)
	}
	return nil
}

func reap([]procInfo, int) {}

func becomeSubreaper() {}

func setCgroupFD(*syscall.SysProcAttr, int) {}

func killCgroup(string) error { return errors.New("cgroups are Linux only") }

func reapGroupZombies(int, int, uint64) {}

func startTime(int) uint64 { return 0 }
