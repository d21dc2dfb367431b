package procgroup

import (
	"os"
	"strconv"
	"testing"
)

// TestDescendantFollowsEscapes starts a command that leaves its process
// group and session (setsid and a double fork, its parent gone) under
// each containment: the orphan is still ralph's descendant. ralph, its
// parent and init are not.
func TestDescendantFollowsEscapes(t *testing.T) {
	for _, noCgroup := range []bool{false, true} {
		t.Run("nocgroup="+strconv.FormatBool(noCgroup), func(t *testing.T) {
			p, line := startPrinting(t, `setsid sh -c 'sleep 60 >/dev/null 2>&1 & echo $!'; sleep 60`, StartOptions{NoCgroup: noCgroup})
			defer p.Kill()
			pid, err := strconv.Atoi(line)
			if err != nil {
				t.Fatalf("the command printed %q, not a pid", line)
			}
			if !Descendant(pid) {
				st, _ := readStat(pid)
				t.Fatalf("the orphan %d (parent %d) under %s is not found ralph's descendant", pid, st.ppid, p.Containment())
			}
			if p.Containment() == ContainCgroup && !inCallCgroup(pid, os.Getpid()) {
				t.Fatalf("the orphan %d is not found in the call's cgroup", pid)
			}
			if !Descendant(p.Pid()) {
				t.Fatalf("the command %d itself is not ralph's descendant", p.Pid())
			}
		})
	}
	for _, pid := range []int{os.Getpid(), os.Getppid(), 1, 0, -1} {
		if Descendant(pid) {
			t.Errorf("Descendant(%d) = true", pid)
		}
	}
}
