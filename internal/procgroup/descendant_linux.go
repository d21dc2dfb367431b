package procgroup

import (
	"os"
	"path"
	"strconv"
	"strings"
)

// Descendant reports whether pid is a process this ralph started, or one
// of theirs, wherever it went: in one of the cgroups ralph makes for the
// commands it starts (ralph-<its pid>-<n> under its own cgroup, which no
// process can leave by itself: setsid and double forks stay in it), or
// below ralph in the process tree (where, without cgroups, orphans of its
// commands are reparented to ralph, their subreaper). ralph itself is not
// its own descendant. A pid whose process is gone, or that cannot be
// read, is not.
func Descendant(pid int) bool {
	self := os.Getpid()
	if pid <= 0 || pid == self {
		return false
	}
	if inCallCgroup(pid, self) {
		return true
	}
	child := 0 // the process whose parent p is; 0 while p is pid itself
	for p, hops := pid, 0; p > 1 && hops < 4096; hops++ {
		st, ok := readStat(p)
		if !ok && child != 0 {
			// p exited while the walk read it: its children have been
			// given to the subreaper (ralph) or init; read child's
			// parent again.
			p, child = child, 0
			continue
		}
		if !ok {
			return false
		}
		if st.ppid == self {
			return true
		}
		p, child = st.ppid, p
	}
	return false
}

// inCallCgroup reports whether pid's cgroup is one self made for a
// command, or below one.
func inCallCgroup(pid, self int) bool {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	ownPath, ok := ownCgroup2(own)
	if !ok {
		return false
	}
	theirs, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	theirPath, ok := ownCgroup2(theirs)
	if !ok {
		return false
	}
	prefix := path.Join(ownPath, "ralph-"+strconv.Itoa(self)+"-")
	rest, ok := strings.CutPrefix(theirPath, prefix)
	if !ok {
		return false
	}
	n, _, _ := strings.Cut(rest, "/")
	_, err = strconv.Atoi(n)
	return err == nil
}
