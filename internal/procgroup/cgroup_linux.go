package procgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted, from
// mountinfo (on a hybrid host it is not /sys/fs/cgroup but, say,
// /sys/fs/cgroup/unified).
func cgroup2Mount(mountinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		if f := strings.Fields(post); len(f) == 0 || f[0] != "cgroup2" {
			continue
		}
		if f := strings.Fields(pre); len(f) >= 5 && f[3] == "/" {
			return unescapeMount(f[4])
		}
	}
	return ""
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var n int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &n); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup2 is this process's cgroup in the v2 hierarchy: the path of
// the "0::" line of /proc/self/cgroup.
func ownCgroup2(procCgroup []byte) (string, bool) {
	for _, line := range strings.Split(string(procCgroup), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// cgroupParent is the directory under which calls get their cgroups (and
// its path in the hierarchy), or an error saying why there is none.
func cgroupParent() (string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	mount := cgroup2Mount(mi)
	if mount == "" {
		return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
	}
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	own, ok := ownCgroup2(pc)
	if !ok {
		return "", errors.New(`no "0::" line in /proc/self/cgroup`)
	}
	if strings.HasSuffix(own, " (deleted)") {
		return "", errors.New("this process's cgroup was deleted")
	}
	cgroupMount = mount
	return filepath.Join(mount, filepath.FromSlash(own)), nil
}

// cgroupMount is where cgroupParent found the cgroup2 hierarchy.
var cgroupMount string

var cgroupSeq atomic.Int64

// cgroup is one call's cgroup v2 directory, opened for CLONE_INTO_CGROUP.
type cgroup struct {
	path string
	rel  string // its path in the hierarchy, as /proc/<pid>/cgroup says it
	dir  *os.File
}

// newCgroup creates an empty cgroup under parent that has cgroup.kill.
func newCgroup(parent string) (*cgroup, error) {
	path := filepath.Join(parent, fmt.Sprintf("ralph-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(path, "cgroup.kill")); err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("cgroup.kill: %w (Linux 5.14 or later has it)", err)
	}
	dir, err := os.Open(path)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	rel, err := filepath.Rel(cgroupMount, path)
	if err != nil {
		rel = ""
	}
	return &cgroup{path: path, rel: "/" + filepath.ToSlash(rel), dir: dir}, nil
}

// fd is the descriptor for SysProcAttr.CgroupFD.
func (g *cgroup) fd() int { return int(g.dir.Fd()) }

// kill sends SIGKILL to every process in the cgroup, whatever session or
// group it is in.
func (g *cgroup) kill() error { return killCgroup(g.path) }

func killCgroup(path string) error {
	return os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0)
}

// populated reports whether a process is still in the cgroup (a zombie is
// not: it left at its exit).
func populated(path string) bool {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	if err != nil {
		return false // gone
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// killAndRemove kills the cgroup, waits (up to about five seconds) for it
// to empty and removes it; it reports whether it is gone.
func killAndRemove(path string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if err := killCgroup(path); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if !populated(path) {
			err := removeTree(path)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return true
			}
			if !errors.Is(err, syscall.EBUSY) {
				return false
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
}

// removeTree removes an empty cgroup and the cgroups under it (a ralph
// run inside the command, say, that died before removing its own), the
// deepest first: a cgroup with a child cgroup cannot be removed.
func removeTree(path string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(path, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return os.Remove(path)
}

// release kills what is left in the cgroup, removes it, and reaps the
// orphans it left this process as subreaper.
func (g *cgroup) release() bool {
	_ = g.dir.Close()
	ok := killAndRemove(g.path)
	reapCgroupOrphans(g.rel)
	return ok
}
