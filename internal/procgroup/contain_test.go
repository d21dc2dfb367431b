//go:build linux

package procgroup

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/proctest"
	"github.com/ralphloop/ralph/internal/testenv"
)

// helperEnv makes the test binary, started again, a parent that starts a
// contained command and waits to be killed (see TestMain).
const helperEnv = "PROCGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if script := os.Getenv(helperEnv); script != "" {
		helper(script)
		return
	}
	os.Exit(m.Run())
}

// helper starts script contained (with the parent-death signal, as agent
// calls are), prints its containment, its leader's pid, the cgroup's path
// and the script's first line, then sleeps until it is killed.
func helper(script string) {
	r, w, _ := os.Pipe()
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout = w
	p, err := Start(cmd, StartOptions{ParentDeath: true, NoCgroup: os.Getenv(NoCgroupEnv) == "1"})
	w.Close()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	cg := "-"
	if p.cont.cg != nil {
		cg = p.cont.cg.path
	}
	fmt.Println(p.Containment(), p.Pid(), cg, strings.TrimSpace(line))
	time.Sleep(time.Hour)
}

// mechanisms are the two ways a command is contained on Linux: noCgroup
// false gets a cgroup where this host lets ralph make one.
func mechanisms(t *testing.T) []struct {
	noCgroup bool
	want     string
} {
	want := ContainSweep
	if _, ok := cgroupUsable(); ok {
		want = ContainCgroup
	} else {
		t.Logf("no cgroup here (%s): both cases use the sweep", cgroupReason)
	}
	return []struct {
		noCgroup bool
		want     string
	}{{false, want}, {true, ContainSweep}}
}

// inCgroup reports whether pid is in the cgroup at path.
func inCgroup(t *testing.T, pid int, path string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	own, _ := ownCgroup2(b)
	return strings.HasSuffix(path, filepath.FromSlash(own))
}

// sessionScript makes a shell script of s: CHILD is a command that,
// once it runs in its new session, writes its pid to a file and becomes
// sleep 300 (with no PATH needed); READY waits for that file and prints
// the pid.
func sessionScript(dir, s string) string {
	f := filepath.Join(dir, "pid")
	child := fmt.Sprintf(`/bin/sh -c 'echo $$ > %[1]s.tmp && /bin/mv %[1]s.tmp %[1]s && exec /bin/sleep 300'`, f)
	ready := fmt.Sprintf(`while [ ! -s %[1]s ]; do sleep 0.01; done; cat %[1]s`, f)
	return strings.NewReplacer("CHILD", child, "READY", ready).Replace(s)
}

func pidOf(t *testing.T, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("pid line %q", s)
	}
	return pid
}

// A child that calls setsid leaves the process group; Kill and the
// leader's own exit still end it, with either mechanism, and the cgroup
// is removed.
func TestContainmentReachesANewSession(t *testing.T) {
	t.Parallel()
	for _, m := range mechanisms(t) {
		for _, tc := range []struct{ name, script string }{
			{"kill", "setsid CHILD & READY; wait"},
			{"kill-env-cleared", "env -i /usr/bin/setsid CHILD & READY; wait"},
			{"kill-orphan", "( setsid CHILD & ); READY; sleep 300"},
			{"leader-exit", "setsid CHILD & READY"},
			{"leader-exit-orphan", "( setsid CHILD & ); READY"},
		} {
			t.Run(fmt.Sprintf("%s/%s", m.want, tc.name), func(t *testing.T) {
				p, line := startPrinting(t, sessionScript(t.TempDir(), tc.script), StartOptions{ParentDeath: true, NoCgroup: m.noCgroup})
				pid := pidOf(t, line)
				if got := p.Containment(); got != m.want {
					t.Errorf("Containment() = %q, want %q", got, m.want)
				}
				cg := ""
				if p.cont.cg != nil {
					cg = p.cont.cg.path
					// (Checked while the call runs: after a leader's exit it is already killed.)
					if strings.HasPrefix(tc.name, "kill") && !inCgroup(t, pid, cg) {
						t.Errorf("the setsid child %d is not in the call's cgroup %s", pid, cg)
					}
				}
				if pgid, err := syscall.Getpgid(pid); err == nil && pgid == p.Pid() {
					t.Fatalf("the child %d did not leave the group", pid)
				}
				if strings.HasPrefix(tc.name, "kill") {
					p.Kill()
				}
				_ = p.Wait()
				proctest.WaitGone(t, pid)
				if cg != "" {
					if _, err := os.Stat(cg); !os.IsNotExist(err) {
						t.Errorf("the cgroup %s was not removed: %v", cg, err)
					}
				}
			})
		}
	}
}

// Run (shell.exec, command stop conditions) contains its command the
// same way: a cancelled context ends a child in a new session.
func TestRunContainedEndsANewSessionOnCancel(t *testing.T) {
	t.Parallel()
	for _, m := range mechanisms(t) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, "sh", "-c", sessionScript(t.TempDir(), "setsid CHILD & READY; wait"))
		cmd.Stdout = w
		type result struct {
			kind string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			kind, err := RunContained(cmd, time.Second, StartOptions{NoCgroup: m.noCgroup})
			done <- result{kind, err}
		}()
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		pid := pidOf(t, line)
		cancel()
		res := <-done
		w.Close()
		r.Close()
		if res.err == nil || res.kind != m.want {
			t.Errorf("RunContained = %q, %v; want %q and an error", res.kind, res.err, m.want)
		}
		proctest.WaitGone(t, pid)
	}
}

// A SIGKILL of the parent (which runs no code of its own after it) still
// ends every process of the call, the one in a new session too: the
// watcher does it, by cgroup.kill or by a sweep, and removes the cgroup.
func TestKill9OfTheParentEndsANewSession(t *testing.T) {
	t.Parallel()
	for _, m := range mechanisms(t) {
		for _, tc := range []struct{ name, script string }{
			{"setsid", "setsid CHILD & READY; sleep 300"},
			// no marker: found by ancestry, which the watcher reads before anything is killed
			{"setsid-env-cleared", "env -i /usr/bin/setsid CHILD & READY; sleep 300"},
		} {
			t.Run(m.want+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), helperEnv+"="+sessionScript(t.TempDir(), tc.script))
				if m.noCgroup {
					cmd.Env = append(cmd.Env, NoCgroupEnv+"=1")
				}
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer cmd.Process.Kill()
				line, err := bufio.NewReader(out).ReadString('\n')
				if err != nil {
					t.Fatalf("helper: %v", err)
				}
				f := strings.Fields(line)
				if len(f) != 4 {
					t.Fatalf("helper said %q", line)
				}
				if f[0] != m.want {
					t.Errorf("the helper's call was contained by %q, want %q", f[0], m.want)
				}
				leader, child := pidOf(t, f[1]), pidOf(t, f[3])
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
				proctest.WaitGone(t, leader)
				proctest.WaitGone(t, child)
				if f[2] != "-" {
					eventually.True(t, "the watcher removing the cgroup "+f[2], func() bool {
						_, err := os.Stat(f[2])
						return os.IsNotExist(err)
					})
				}
			})
		}
	}
}

func TestCgroup2Mount(t *testing.T) {
	t.Parallel()
	hybrid := `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 33 0:30 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
`
	unified := "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
	bindOnly := "30 1 0:26 /sub /mnt/x rw shared:4 - cgroup2 cgroup2 rw\n"
	spaced := `30 1 0:26 / /mnt/my\040cgroup rw - cgroup2 none rw` + "\n"
	for in, want := range map[string]string{hybrid: "/sys/fs/cgroup/unified", unified: "/sys/fs/cgroup",
		bindOnly: "", spaced: "/mnt/my cgroup", "": ""} {
		if got := cgroup2Mount([]byte(in)); got != want {
			t.Errorf("cgroup2Mount(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"0::/\n": "/", "12:pids:/x\n0::/user.slice/a.scope\n": "/user.slice/a.scope"} {
		if got, ok := ownCgroup2([]byte(in)); !ok || got != want {
			t.Errorf("ownCgroup2(%q) = %q, %t", in, got, ok)
		}
	}
	if _, ok := ownCgroup2([]byte("1:cpu:/\n")); ok {
		t.Error("ownCgroup2 found a v2 line in a v1-only file")
	}
}

func TestParseWatchLine(t *testing.T) {
	t.Parallel()
	c := &container{id: 7, t: target{leader: 12, pgid: 12, since: 9876, marker: "RALPH_CONTAIN=1.2.7"}, cg: &cgroup{path: "/sys/fs/cgroup/a b/ralph-1-7"}}
	id, w, ok := parseWatchLine(c.line())
	if !ok || id != "7" || w == nil || w.t != c.t || w.cgroup != c.cg.path {
		t.Errorf("parseWatchLine(%q) = %q, %+v, %t", c.line(), id, w, ok)
	}
	if id, w, ok := parseWatchLine("- 7"); !ok || id != "7" || w != nil {
		t.Errorf("removal: %q, %+v, %t", id, w, ok)
	}
	for _, bad := range []string{"", "+ 1", "+ 1 x 2 3 \"m\" \"\"", "+ 1 2 3 4 m \"\"", "+ 1 2 3 \"m\" \"\"", "? 1"} {
		if _, _, ok := parseWatchLine(bad); ok {
			t.Errorf("parseWatchLine(%q) accepted", bad)
		}
	}
}

// zombieChildren lists this process's children that have exited and wait
// to be reaped.
// anyMarked reports whether a live process carries one of markers.
func anyMarked(markers []string) bool {
	for _, q := range scanProcs() {
		for _, m := range markers {
			if !q.zombie && hasMarker(q.pid, m) {
				return true
			}
		}
	}
	return false
}

func zombieChildren() []procInfo {
	var zs []procInfo
	for _, p := range scanProcs() {
		if p.ppid == os.Getpid() && p.zombie {
			zs = append(zs, p)
		}
	}
	return zs
}

// As a subreaper this process inherits the orphans of every call; each
// mechanism reaps those it killed, so none is left a zombie, and the
// leader's exit status still reaches Wait. (Not parallel: other tests'
// children would be counted. Only sh and sleep count: the watcher of a
// helper that another test killed is an orphan of this process too.)
func TestOrphansAreReaped(t *testing.T) {
	becomeSubreaper()
	before := make(map[int]bool)
	for _, z := range zombieChildren() {
		before[z.pid] = true
	}
	for _, m := range mechanisms(t) {
		var markers []string // each call's, which every process of the call carries
		for _, script := range []string{
			"( setsid sleep 300 & ); ( sleep 300 & ); echo started; sleep 300",
			"( setsid sleep 300 & ); ( sleep 300 & ); echo started; exit 3",
			// an orphan that exits by itself, before any sweep can see it
			"( sleep 0.05 & ); sleep 0.3; echo started; sleep 300",
		} {
			p, _ := startPrinting(t, script, StartOptions{NoCgroup: m.noCgroup})
			markers = append(markers, p.cont.t.marker)
			if strings.HasSuffix(script, "sleep 300") {
				p.Kill()
			}
			err := p.Wait()
			if strings.HasSuffix(script, "exit 3") && p.ExitCode() != 3 {
				t.Errorf("%s: %q: Wait = %v, exit %d; want 3", m.want, script, err, p.ExitCode())
			}
		}
		// Once no process of the calls is alive (a zombie's environment is
		// gone), each has ended as a zombie of this process or been reaped.
		eventually.True(t, m.want+": every process of the calls ending", func() bool { return !anyMarked(markers) })
		for _, z := range zombieChildren() {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", z.pid))
			if c := strings.TrimSpace(string(comm)); !before[z.pid] && (c == "sh" || c == "sleep") {
				cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", z.pid))
				t.Errorf("%s: a zombie child is left: %+v in %q", m.want, z, cg[bytesLastLine(cg):])
				before[z.pid] = true
			}
		}
	}
}

func bytesLastLine(b []byte) int {
	s := strings.TrimSpace(string(b))
	return strings.LastIndexByte(s, '\n') + 1
}

// An empty cgroup that a dead ralph left behind is removed; one whose
// ralph lives, or that holds a process, is not.
func TestRemoveStale(t *testing.T) {
	t.Parallel()
	parent, ok := cgroupUsable()
	if !ok {
		testenv.Need(t, "a cgroup of its own", cgroupReason)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, fmt.Sprintf("ralph-%d-1", dead.Process.Pid))
	live := filepath.Join(parent, fmt.Sprintf("ralph-%d-999999", os.Getppid()))
	for _, d := range []string{stale, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Remove(live); _ = os.Remove(stale) })
	removeStale(parent)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale cgroup %s is still there: %v", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the cgroup of a live process was removed: %v", err)
	}
}

// Reaping a call's orphans never takes the exit status of another child
// of this process that os/exec is waiting for.
func TestReapTakesNoOtherExitStatus(t *testing.T) {
	t.Parallel()
	becomeSubreaper()
	for _, m := range mechanisms(t) {
		errs := make(chan error, 20)
		for range 10 {
			go func() {
				cmd := exec.Command("sh", "-c", "sleep 0.05; exit 7")
				err := cmd.Run()
				if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
					errs <- fmt.Errorf("a plain child's status was taken: %v", err)
					return
				}
				errs <- nil
			}()
			go func() {
				p, err := Start(exec.Command("sh", "-c", "( setsid sleep 300 & ); ( sleep 300 & ); sleep 0.05; exit 5"), StartOptions{NoCgroup: m.noCgroup})
				if err != nil {
					errs <- err
					return
				}
				_ = p.Wait()
				if p.ExitCode() != 5 {
					errs <- fmt.Errorf("%s: the leader's status was taken: exit %d", m.want, p.ExitCode())
					return
				}
				errs <- nil
			}()
		}
		for range 20 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
}

// BenchmarkRun is the cost of running a command that does nothing,
// contained each way, against os/exec alone.
func BenchmarkRun(b *testing.B) {
	b.Run("os-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, m := range []struct {
		name     string
		noCgroup bool
	}{{"cgroup", false}, {"subreaper+sweep", true}} {
		b.Run(m.name, func(b *testing.B) {
			if got := DefaultContainment(StartOptions{NoCgroup: m.noCgroup}); got != m.name {
				b.Skipf("this host contains by %s", got)
			}
			for b.Loop() {
				if _, err := RunContained(exec.CommandContext(context.Background(), "true"), time.Second, StartOptions{NoCgroup: m.noCgroup}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A cgroup that holds the empty cgroup of a nested ralph that died is
// still removed after its command ends.
func TestNestedCgroupIsRemoved(t *testing.T) {
	t.Parallel()
	if _, ok := cgroupUsable(); !ok {
		testenv.Need(t, "a cgroup of its own", cgroupReason)
	}
	p, _ := startPrinting(t, "echo started; sleep 300", StartOptions{})
	nested := filepath.Join(p.cont.cg.path, "ralph-1-1", "ralph-2-1")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	_ = p.Wait()
	if _, err := os.Stat(p.cont.cg.path); !os.IsNotExist(err) {
		_ = removeTree(p.cont.cg.path)
		t.Fatalf("the call's cgroup with a nested one is still there: %v", err)
	}
}
