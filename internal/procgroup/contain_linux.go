package procgroup

import (
	"os"
	"os/exec"
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
		self, err := selfExe()
		if err != nil {
			cgroupReason = err.Error()
			return
		}
		probe := exec.Command(self)
		probe.Env = append(os.Environ(), roleEnv+"="+roleProbe)
		probe.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.fd()}
		if err := probe.Run(); err != nil {
			cgroupReason = "CLONE_INTO_CGROUP: " + err.Error()
			return
		}
		cgroupDir, cgroupWorks = parent, true
	})
	return cgroupDir, cgroupWorks
}

// selfExe is this program, to start again as the watcher or the probe:
// /proc/self/exe works even when the file was replaced since.
func selfExe() (string, error) { return "/proc/self/exe", nil }

func setCgroupFD(attr *syscall.SysProcAttr, fd int) { attr.UseCgroupFD, attr.CgroupFD = true, fd }
