package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

func sweepKind() string { return ContainSweep }

var (
	cgroupOnce   sync.Once
	cgroupDir    string
	cgroupWorks  bool
	cgroupReason string
)

// cgroupUsable reports, once per process, whether commands can start in
// cgroups of their own here, and under which directory: the cgroup2
// mount has to be found, this process's own cgroup has to take a child
// (it does when ralph may write there: root, or a delegated subtree) that
// has cgroup.kill, and a probe started with CLONE_INTO_CGROUP has to run
// in it.
func cgroupUsable() (string, bool) {
	cgroupOnce.Do(func() {
		parent, err := cgroupParent()
		if err != nil {
			cgroupReason = err.Error()
			return
		}
		g, err := newCgroup(parent)
		if err != nil {
			cgroupReason = err.Error()
			return
		}
		defer g.release()
		probe, err := probeCmd()
		if err != nil {
			cgroupReason = err.Error()
			return
		}
		probe.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.fd()}
		if err := probe.Run(); err != nil {
			cgroupReason = "CLONE_INTO_CGROUP: " + err.Error()
			return
		}
		cgroupDir, cgroupWorks = parent, true
		removeStale(parent)
	})
	return cgroupDir, cgroupWorks
}

// removeStale removes the empty cgroups that a ralph which is gone left
// under parent (its watcher was killed with it, so nobody removed them).
// A cgroup that still holds a process is not empty and stays.
func removeStale(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		var pid, n int
		if !e.IsDir() {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "ralph-%d-%d", &pid, &n); err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(parent, e.Name())) // EBUSY while populated: left alone
		}
	}
}

// probeCmd is a command that exits 0 at once: true(1) where there is one
// (quick to start), else this program started as the probe (which may
// take a while: every package's init runs first).
func probeCmd() (*exec.Cmd, error) {
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return exec.Command(p), nil
		}
	}
	self, err := selfExe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{roleEnv + "=" + roleProbe} // it needs nothing else, and holds no secret of ours
	return cmd, nil
}

// selfExe is this program, to start again as the watcher or the probe:
// /proc/self/exe works even when the file was replaced since.
func selfExe() (string, error) { return "/proc/self/exe", nil }

func setCgroupFD(attr *syscall.SysProcAttr, fd int) { attr.UseCgroupFD, attr.CgroupFD = true, fd }
