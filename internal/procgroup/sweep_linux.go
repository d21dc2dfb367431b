package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// procInfo is what a sweep reads from /proc/<pid>/stat.
type procInfo struct {
	pid, ppid, pgid int
	start           uint64 // start time in clock ticks since boot: tells a pid from its reuse
	zombie          bool
}

// readStat reads /proc/<pid>/stat; ok is false when the process is gone.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+2:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return procInfo{}, false
	}
	p := procInfo{pid: pid, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}
	p.ppid, _ = strconv.Atoi(string(f[1]))
	p.pgid, _ = strconv.Atoi(string(f[2]))
	p.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return p, true
}

// scanProcs lists every process in /proc.
func scanProcs() []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]procInfo, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// hasMarker reports whether pid's environment (as it was at its exec)
// holds the line marker.
func hasMarker(pid int, marker string) bool {
	if marker == "" {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(b) == 0 {
		return false
	}
	m := []byte(marker)
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if bytes.Equal(line, m) {
			return true
		}
	}
	return false
}

// members lists the live processes of t, never self. A zombie is not
// listed but still links its children to it (they have not been
// reparented yet).
func (t target) members(all []procInfo, self int) []procInfo {
	in := make(map[int]bool)
	for _, p := range all {
		if p.pid == self {
			continue
		}
		if p.start < t.since {
			continue // older than the call: not one of its processes, whatever its pid or group
		}
		if (p.pid == t.leader && (t.since == 0 || p.start == t.since)) || (t.pgid > 0 && p.pgid == t.pgid) || (!p.zombie && hasMarker(p.pid, t.marker)) {
			in[p.pid] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, p := range all {
			if !in[p.pid] && p.pid != self && in[p.ppid] {
				in[p.pid], grew = true, true
			}
		}
	}
	out := make([]procInfo, 0, len(in))
	for _, p := range all {
		if in[p.pid] && !p.zombie {
			out = append(out, p)
		}
	}
	return out
}

// sweep kills every live process of t, scanning again until a scan finds
// none (a process may fork between a scan and its kill), and returns
// every process it killed. It gives up after about five seconds.
func (t target) sweep(self int) []procInfo {
	var killed []procInfo
	deadline := time.Now().Add(5 * time.Second)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		live := t.members(scanProcs(), self)
		if len(live) == 0 || time.Now().After(deadline) {
			return killed
		}
		for _, p := range live {
			if q, ok := readStat(p.pid); ok && q.start == p.start { // not a reused pid
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		killed = append(killed, live...)
		time.Sleep(pause)
	}
}

// reap waits for the processes in killed that became this process's
// children (orphans reparented to it as subreaper), never leader, whose
// exit status os/exec's Wait collects. A pid is reaped only while its
// start time is the one seen when it was killed, so no other child's exit
// status is taken. It gives up after about five seconds.
func reap(killed []procInfo, leader int) {
	self := os.Getpid()
	pending := make(map[int]uint64)
	dying := make(map[int]uint64) // every process killed: a child whose parent is one of them is reparented here soon
	for _, p := range killed {
		dying[p.pid] = p.start
		if p.pid != leader {
			pending[p.pid] = p.start
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for pause := time.Millisecond; len(pending) > 0 && time.Now().Before(deadline); pause = min(2*pause, 50*time.Millisecond) {
		for pid, start := range pending {
			q, ok := readStat(pid)
			switch {
			case !ok || q.start != start:
				delete(pending, pid) // gone, or the pid was reused
			case q.ppid != self:
				if ps, killedParent := dying[q.ppid]; killedParent {
					if pq, ok := readStat(q.ppid); ok && pq.start == ps {
						continue // its parent is dying: it comes to this process next
					}
				}
				delete(pending, pid) // someone else's child to reap
			case q.zombie:
				var ws syscall.WaitStatus
				if got, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got == pid {
					delete(pending, pid)
				}
			}
		}
		if len(pending) > 0 {
			time.Sleep(pause)
		}
	}
}

var (
	subreaperOnce sync.Once
	subreaper     atomic.Bool // this process is a child subreaper
)

// becomeSubreaper makes this process the child subreaper of its
// descendants, so an orphan of a call (one whose parent exited) is
// reparented here instead of to init, and stays in reach of the sweep.
func becomeSubreaper() {
	subreaperOnce.Do(func() {
		const prSetChildSubreaper = 36
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e == 0 {
			subreaper.Store(true)
		}
	})
}

// reapGroupZombies reaps the zombie children of this process left in the
// process group pgid (never its leader, which os/exec waits for) that
// started no earlier than since: orphans of a call that exited by
// themselves before any sweep saw them.
func reapGroupZombies(pgid, leader int, since uint64) {
	if !subreaper.Load() || pgid <= 0 {
		return
	}
	self := os.Getpid()
	for _, p := range scanProcs() {
		if p.ppid == self && p.zombie && p.pgid == pgid && p.pid != leader && p.start >= since {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// startTime is pid's start time, 0 when it is gone.
func startTime(pid int) uint64 {
	p, _ := readStat(pid)
	return p.start
}

// reapCgroupOrphans reaps the zombie children of this process that were
// in the cgroup rel (as /proc/<pid>/cgroup names it): once this process is
// a subreaper, a call in a cgroup leaves its killed orphans here. It looks
// a few times over some 80 ms, as a killed process is reparented just
// after it leaves the cgroup.
func reapCgroupOrphans(rel string) {
	if !subreaper.Load() {
		return // init reaps them
	}
	self := os.Getpid()
	for _, pause := range []time.Duration{0, 5 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond} {
		time.Sleep(pause)
		for _, p := range scanProcs() {
			if p.ppid != self || !p.zombie {
				continue
			}
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cgroup")
			if err != nil {
				continue
			}
			own, _ := ownCgroup2(b)
			if strings.TrimSuffix(own, " (deleted)") != rel {
				continue
			}
			if q, ok := readStat(p.pid); ok && q.start == p.start && q.zombie {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
			}
		}
	}
}
