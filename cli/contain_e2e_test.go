package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/internal/proctest"
)

// hangScript is a shell.exec command that starts a sleep in its process
// group and one in a new session (as agents' shell tools do), writes
// their pids to files in dir (named plain-TAG and session-TAG), and waits.
func hangScript(dir, tag string) string {
	plain, sess := filepath.Join(dir, "plain-"+tag), filepath.Join(dir, "session-"+tag)
	return fmt.Sprintf(`sleep 300 & echo $! > %[1]s.tmp && mv %[1]s.tmp %[1]s; `+
		`setsid sh -c 'echo $$ > %[2]s.tmp && mv %[2]s.tmp %[2]s && exec sleep 300' & wait`, plain, sess)
}

// pidIn waits for a pid file and reads it.
func pidIn(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitUntil(t, filepath.Base(path)+" is written", func() bool {
		b, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

// cgroupOf is pid's cgroup v2 path.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return ""
}

// checkMechanism fails t unless pid is in a call's cgroup exactly when
// the cgroup mechanism is the one expected.
func checkMechanism(t *testing.T, pid int, noCgroup bool) {
	t.Helper()
	want := procgroup.DefaultContainment(procgroup.StartOptions{NoCgroup: noCgroup})
	inCall := strings.Contains(filepath.Base(cgroupOf(t, pid)), "ralph-")
	if inCall != (want == procgroup.ContainCgroup) {
		t.Errorf("pid %d is in cgroup %q; the mechanism should be %s", pid, cgroupOf(t, pid), want)
	}
}

// kill -9 of ralph while a shell.exec runs leaves nothing behind: not the
// command's child in its group, not one in a new session; with the cgroup
// and with the sweep (RALPH_NO_CGROUP=1).
var _ = suite.Add(e2e.Test{Name: "Kill9LeavesNoShellExecChild", Run: func(t *testing.T, e *e2e.E) {
	for _, noCgroup := range []bool{false, true} {
		e.Run(fmt.Sprintf("no-cgroup=%t", noCgroup), func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ralph.toml"), fmt.Sprintf(`[plan]
rtfs = '''(step "Hang" (call :shell.exec {:cmd "sh" :args ["-c" %q] :timeout-ms 600000}))'''
[governance]
shell_allow = ["sh"]
[[stop]]
kind = "max_iterations"
max = 1
`, hangScript(dir, "x")))
			cmd := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml"), "--store", filepath.Join(dir, "store")).In(dir)
			if noCgroup {
				cmd.With(procgroup.NoCgroupEnv + "=1")
			}
			ralph := cmd.Start()
			plain, sess := pidIn(t, filepath.Join(dir, "plain-x")), pidIn(t, filepath.Join(dir, "session-x"))
			checkMechanism(t, sess, noCgroup)
			if err := ralph.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = ralph.Wait()
			proctest.WaitGone(t, plain)
			proctest.WaitGone(t, sess)
		})
	}
}})

// A worker stopped by a second SIGTERM leaves none of its runs' children
// running (each run's shell.exec had a child in its group and one in a
// new session).
var _ = suite.Add(e2e.Test{Name: "WorkerSecondSIGTERMLeavesNoChild", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	marks := t.TempDir()
	w := f.worker("w1", 3)
	plan := func(tag string) string {
		return fmt.Sprintf(`[intent]
goal = "hang"
[model]
provider = "static"
[plan]
rtfs = '''(step "Hang" (call :shell.exec {:cmd "sh" :args ["-c" %q] :timeout-ms 600000}))'''
[governance]
shell_allow = ["sh"]
[[stop]]
kind = "max_iterations"
max = 1
`, hangScript(marks, tag))
	}
	var pids []int
	for _, tag := range []string{"a", "b", "c"} {
		f.submit(plan(tag))
	}
	for _, tag := range []string{"a", "b", "c"} {
		pids = append(pids, pidIn(t, filepath.Join(marks, "plain-"+tag)), pidIn(t, filepath.Join(marks, "session-"+tag)))
	}
	// Two signals sent back to back can reach the process as one (a
	// pending signal is not queued twice): signal until it exits, which
	// only the second it receives makes it do while its runs hang.
	exited := w.Done()
	for sent, deadline := 0, time.Now().Add(60*time.Second); ; sent++ {
		if err := w.Signal(syscall.SIGTERM); err != nil && sent == 0 {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(300 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatalf("the worker did not exit after %d SIGTERMs", sent+1)
		}
		break
	}
	for _, pid := range pids {
		proctest.WaitGone(t, pid)
	}
}})

// The case: an agent whose shell tool started a command in a new
// session and then went quiet. At the idle timeout the command dies with
// the agent, and the chain records the tool use as cancelled by the idle
// timeout, not ok.
var _ = suite.Add(e2e.Test{Name: "IdleTimeoutEndsTheAgentsToolAndRecordsItCancelled", Run: func(t *testing.T, e *e2e.E) {
	bin := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	use := `{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"sleep 300"}}],"usage":{"input_tokens":1,"output_tokens":1}},"session_id":"s"}`
	writeFile(t, filepath.Join(bin, "claude"), fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' '%s'\n"+
		"setsid sh -c 'echo $$ > %[2]s.tmp && mv %[2]s.tmp %[2]s && exec sleep 300' &\nexec sleep 300\n", use, pidFile))
	if err := os.Chmod(filepath.Join(bin, "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := newAgentProject(t, e)
	p.env = append(p.env, "PATH="+bin+string(os.PathListSeparator)+fakeAgentBin(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	toml := filepath.Join(p.dir, "ralph.toml")
	b, err := os.ReadFile(toml)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `idle_timeout = "5m"`) {
		t.Fatalf("init wrote no idle_timeout to change:\n%s", b)
	}
	writeFile(t, toml, strings.Replace(string(b), `idle_timeout = "5m"`, `idle_timeout = "1s"`, 1))
	_, errOut, _ := p.ralph("run", "--no-tui", "--max-iterations", "1")
	pid := pidIn(t, pidFile)
	proctest.WaitGone(t, pid)
	var uses []map[string]any
	for _, a := range p.chain(t) {
		if a["action_type"] == "AgentToolUse" {
			uses = append(uses, a)
		}
		if a["action_type"] == "CapabilityCall" && a["function_name"] == "agent.run" {
			md, _ := a["metadata"].(map[string]any)
			if want := procgroup.DefaultContainment(procgroup.StartOptions{}); md["containment"] != want {
				t.Errorf("the agent call's containment is %v, want %s", md["containment"], want)
			}
		}
	}
	if len(uses) != 1 {
		t.Fatalf("AgentToolUse actions: %v (stderr %s)", uses, errOut)
	}
	u := uses[0]
	msg, _ := u["error_message"].(string)
	if u["success"] != false || !strings.Contains(msg, "the call ended before the tool returned") || !strings.Contains(msg, "idle timeout") {
		t.Errorf("the tool use that never returned is on the chain as %v: %q", u["success"], msg)
	}
	if md, _ := u["metadata"].(map[string]any); md == nil || md["result"] != "cancelled" {
		t.Errorf("its metadata: %v", u["metadata"])
	}
}})
