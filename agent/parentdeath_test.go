package agent

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

	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/internal/proctest"
)

// sessionChild is a shell fragment that starts, in a new session (as
// Claude Code's and Gemini CLI's shell tools do), a process that writes
// its pid to f and sleeps 300 s, then waits for the file and prints
// "child PID" and "agent PID".
func sessionChild(f string) string {
	return fmt.Sprintf(`setsid /bin/sh -c 'echo $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s && exec sleep 300' & `+
		`while [ ! -s %[1]s ]; do sleep 0.01; done; echo "child $(cat %[1]s)"; echo "agent $$"`, f)
}

// TestHelperAgentParent is not a test: TestNoAgentSurvivesItsParent runs
// the test binary as a ralph stand-in that starts an agent call and
// prints the pids the agent reports, then kills it with SIGKILL.
func TestHelperAgentParent(t *testing.T) {
	if os.Getenv("AGENT_TEST_HELPER") != "parent" {
		t.Skip("helper process only")
	}
	// The agent reports its own pid and a child's (one in a new session),
	// then works forever.
	script := sessionChild(os.Getenv("AGENT_TEST_PIDFILE")) + `; sleep 300 & echo "plain $!"; wait`
	_, err := Run(context.Background(), Options{CLI: "command", Command: []string{"sh", "-c", script},
		OnEvent: func(e Event) { fmt.Println(e.Text) }})
	fmt.Println("run returned:", err)
	os.Exit(1)
}

// A SIGKILL of ralph leaves no process of the call behind, by pid: not
// the agent, not its child in the group, not its child in a new session;
// with either mechanism (RALPH_NO_CGROUP=1 forces the sweep).
func TestNoAgentSurvivesItsParent(t *testing.T) {
	t.Parallel()
	for _, noCgroup := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-cgroup=%t", noCgroup), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgentParent$", "-test.count=1")
			cmd.Env = append(os.Environ(), "AGENT_TEST_HELPER=parent", "AGENT_TEST_PIDFILE="+filepath.Join(t.TempDir(), "pid"))
			if noCgroup {
				cmd.Env = append(cmd.Env, procgroup.NoCgroupEnv+"=1")
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pids := map[string]int{}
			sc := bufio.NewScanner(out)
			for len(pids) < 3 && sc.Scan() {
				role, pid, ok := strings.Cut(sc.Text(), " ")
				if n, err := strconv.Atoi(pid); ok && err == nil {
					pids[role] = n
				}
			}
			if pids["agent"] == 0 || pids["child"] == 0 || pids["plain"] == 0 {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the helper reported no pids: %v", pids)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait() // killed: the error says so
			for role, pid := range pids {
				if !proctest.Gone(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("the %s (pid %d) survived its parent's SIGKILL", role, pid)
				}
			}
		})
	}
}

// Timeout, idle timeout and cancellation each kill the child the agent
// started in a new session, and the result names the mechanism.
func TestStopsKillANewSession(t *testing.T) {
	t.Parallel()
	want := procgroup.DefaultContainment(procgroup.StartOptions{})
	for _, stop := range []string{StoppedTimeout, StoppedIdleTimeout, StoppedCancelled} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			script := sessionChild(filepath.Join(t.TempDir(), "pid"))
			o := Options{CLI: "command", Dir: t.TempDir(), Timeout: time.Minute, IdleTimeout: time.Minute}
			switch stop {
			case StoppedTimeout: // keeps printing, so only the timeout can end it
				o.Timeout = time.Second
				script += `; while :; do echo tick; sleep 0.05; done`
			case StoppedIdleTimeout:
				o.IdleTimeout = 500 * time.Millisecond
				script += `; sleep 300`
			default:
				script += `; sleep 300`
			}
			o.Command = []string{"sh", "-c", script}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pids := make(chan int, 2)
			o.OnEvent = func(e Event) {
				// A plain-text agent's event holds what one read brought: maybe several lines.
				for _, line := range strings.Split(e.Text, "\n") {
					role, pid, _ := strings.Cut(line, " ")
					if n, err := strconv.Atoi(pid); err == nil && role == "child" {
						pids <- n
						if stop == StoppedCancelled {
							cancel()
						}
					}
				}
			}
			res, err := Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != stop || res.Containment != want {
				t.Errorf("Stopped %q, Containment %q; want %q, %q", res.Stopped, res.Containment, stop, want)
			}
			select {
			case pid := <-pids:
				proctest.WaitGone(t, pid)
			default:
				t.Fatalf("the agent never reported its child: %+v", res)
			}
		})
	}
}

// The same stops under the sweep: the test binary runs
// TestStopsKillANewSession again with RALPH_NO_CGROUP=1, where it expects
// "subreaper+sweep" as the containment.
func TestStopsKillANewSessionUnderTheSweep(t *testing.T) {
	if os.Getenv(procgroup.NoCgroupEnv) == "1" {
		t.Skip("already under the sweep")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStopsKillANewSession$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), procgroup.NoCgroupEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestStopsKillANewSession ") {
		t.Fatalf("under RALPH_NO_CGROUP=1: %v\n%s", err, out)
	}
}
