package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The mechanisms that contain a command, as Proc.Containment names them.
const (
	// ContainCgroup: the command starts inside a cgroup v2 of its own
	// (CLONE_INTO_CGROUP, so before it can fork); a kill writes
	// cgroup.kill, which reaches every process in it, whatever session or
	// group it moved to, and the cgroup is removed once empty.
	ContainCgroup = "cgroup"
	// ContainSweep: this process is a child subreaper, and a kill sweeps
	// /proc for the command's processes: its group, every process whose
	// environment carries the command's marker, and their descendants.
	ContainSweep = "subreaper+sweep"
	// ContainGroup: only the process group is killed (not Linux).
	ContainGroup = "process-group"
)

// NoCgroupEnv, set to 1 in ralph's environment, makes every command use
// the subreaper and sweep instead of a cgroup.
const NoCgroupEnv = "RALPH_NO_CGROUP"

// markerEnv is the variable that marks every process a command starts
// (children inherit their parent's environment): the sweep and the
// watcher find with it a process that left the group and whose parent is
// gone.
const markerEnv = "RALPH_CONTAIN"

var containSeq atomic.Int64

// container holds one command's processes.
type container struct {
	kind string
	cg   *cgroup // ContainCgroup
	t    target  // every kind: the group, the marker and the leader
	id   int64   // its registration with the watcher

	mu     sync.Mutex // guards t's leader and pgid, set once the command runs, killed and closed
	killed []procInfo // what kill's sweeps killed, for release to reap
	closed bool
}

// newContainer makes a container for one command: a cgroup where one can
// be made, else the sweep.
func newContainer(o StartOptions) *container {
	id := containSeq.Add(1)
	c := &container{id: id, kind: ContainSweep,
		t: target{marker: fmt.Sprintf("%s=%d.%d.%d", markerEnv, os.Getpid(), startNanos, id)}}
	if !o.NoCgroup && os.Getenv(NoCgroupEnv) != "1" {
		if parent, ok := cgroupUsable(); ok {
			if g, err := newCgroup(parent); err == nil {
				c.kind, c.cg = ContainCgroup, g
			}
		}
	}
	if c.kind == ContainSweep {
		c.kind = sweepKind()
		becomeSubreaper()
	}
	return c
}

var startNanos = time.Now().UnixNano()

// prepare sets cmd up to start inside c (the marker in its environment,
// the cgroup to clone into) and registers c with the watcher, all before
// the command starts.
func (c *container) prepare(cmd *exec.Cmd, attr *syscall.SysProcAttr) {
	env := cmd.Env
	if env == nil {
		env = cmd.Environ() // this process's, with PWD set to cmd.Dir as os/exec would
	}
	cmd.Env = append(env[:len(env):len(env)], c.t.marker)
	if c.cg != nil {
		setCgroupFD(attr, c.cg.fd())
	}
	watch(c)
}

// started notes the leader (and group) once the command runs.
func (c *container) started(pid int) {
	since := startTime(pid)
	c.mu.Lock()
	c.t.leader, c.t.pgid, c.t.since = pid, pid, since
	c.mu.Unlock()
	watch(c)
}

func (c *container) target() target {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// kill kills every process of the command, the leader too.
func (c *container) kill() {
	if c.cg != nil {
		if c.cg.kill() == nil {
			return
		}
	}
	// The sweep reads the tree before it kills: killing the group first
	// would reparent the children of its processes and lose their ancestry.
	killed := c.target().sweep(os.Getpid())
	c.mu.Lock()
	c.killed = append(c.killed, killed...)
	c.mu.Unlock()
}

// release runs once the leader has been reaped: it kills whatever the
// command left running, reaps the orphans this process inherited, removes
// the cgroup and ends the watcher's registration.
func (c *container) release() {
	c.mu.Lock()
	closed := c.closed
	c.closed = true
	t, killed := c.t, c.killed
	c.mu.Unlock()
	if closed {
		return
	}
	if c.cg == nil || !c.cg.release() {
		reap(append(killed, t.sweep(os.Getpid())...), t.leader)
		reapGroupZombies(t.pgid, t.leader, t.since)
	}
	unwatch(c)
}

// line is c's registration line for the watcher.
func (c *container) line() string {
	path := ""
	if c.cg != nil {
		path = c.cg.path
	}
	t := c.target()
	return fmt.Sprintf("+ %d %d %d %d %s %s", c.id, t.leader, t.pgid, t.since,
		strconv.Quote(t.marker), strconv.Quote(path))
}

// target names the processes of one call for a sweep: the leader, its
// process group, every process whose environment carries the call's
// marker, and every descendant of those (by parent pid), whatever session
// or group they moved to.
type target struct {
	leader, pgid int
	marker       string
	// since is the leader's start time (clock ticks since boot): every
	// process of the call started then or later, so the sweep reads the
	// environment of no older process. 0 before the leader runs.
	since uint64
}

// DefaultContainment names the mechanism a command started now with o
// gets on this host: ContainCgroup where ralph can make a cgroup v2 and
// start a process in it (and NoCgroup and RALPH_NO_CGROUP=1 do not ask
// otherwise), else ContainSweep (Linux) or ContainGroup.
func DefaultContainment(o StartOptions) string {
	if !o.NoCgroup && os.Getenv(NoCgroupEnv) != "1" {
		if _, ok := cgroupUsable(); ok {
			return ContainCgroup
		}
	}
	return sweepKind()
}
