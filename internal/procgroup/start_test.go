package procgroup

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"

	"github.com/ralphloop/ralph/internal/proctest"
)

// startPrinting starts script with its stdout on a pipe and returns the
// first line it prints.
func startPrinting(t *testing.T, script string, o StartOptions) (*Proc, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout = w
	p, err := Start(cmd, o)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("read first line: %v", err)
	}
	return p, strings.TrimSpace(line)
}

func TestStartReportsTheExitStatus(t *testing.T) {
	t.Parallel()
	for _, parentDeath := range []bool{false, true} {
		p, err := Start(exec.Command("sh", "-c", "exit 3"), StartOptions{ParentDeath: parentDeath})
		if err != nil {
			t.Fatal(err)
		}
		var exitErr *exec.ExitError
		if err := p.Wait(); !errors.As(err, &exitErr) || p.ExitCode() != 3 {
			t.Errorf("parentDeath %t: Wait = %v, ExitCode %d; want exit status 3", parentDeath, err, p.ExitCode())
		}
	}
}

func TestStartKillsTheGroupWhenTheLeaderExits(t *testing.T) {
	t.Parallel()
	p, line := startPrinting(t, "sleep 30 & echo $!", StartOptions{ParentDeath: true})
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("pid line %q", line)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitGone(t, pid)
}

func TestKillEndsTheGroup(t *testing.T) {
	t.Parallel()
	p, line := startPrinting(t, "sleep 30 & echo $!; wait", StartOptions{})
	pid, _ := strconv.Atoi(line)
	p.Kill()
	if err := p.Wait(); err == nil || p.ExitCode() != -1 {
		t.Errorf("killed command: Wait = %v, ExitCode %d", err, p.ExitCode())
	}
	proctest.WaitGone(t, pid)
	p.Kill() // after the end: does nothing
}

func TestStartFailsForAMissingCommand(t *testing.T) {
	t.Parallel()
	if _, err := Start(exec.Command("/nonexistent/agent"), StartOptions{ParentDeath: true}); err == nil {
		t.Fatal("Start of a missing command succeeded")
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		writes []string
		want   string
		trunc  bool
	}{
		{[]string{"abc"}, "abc", false},
		{[]string{"abc", "de"}, "abcde", false},
		{[]string{"abc", "defg"}, "cdefg", true},
		{[]string{"abcdefgh"}, "defgh", true},
		{[]string{"ab", "cdefg"}, "cdefg", true},
	} {
		b := TailBuffer{Limit: 5}
		for _, w := range tc.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", w, n, err)
			}
		}
		if b.String() != tc.want || b.Truncated != tc.trunc {
			t.Errorf("%q: kept %q truncated %t, want %q %t", tc.writes, b.String(), b.Truncated, tc.want, tc.trunc)
		}
	}
}

// TestRunContainedKeepsTheConfinedThread: the thread Confine ran on and
// that forked the command lives until the command has exited (a
// parent-death signal the command sets, as bwrap's --die-with-parent
// does, is tied to it), and exits after.
func TestRunContainedKeepsTheConfinedThread(t *testing.T) {
	t.Parallel()
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, ready, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var tid int
	cmd := exec.CommandContext(t.Context(), "sh", "-c", "echo ready; read x; exit 0")
	cmd.Stdin, cmd.Stdout = stdin, ready
	done := make(chan error, 1)
	go func() {
		_, err := RunContained(cmd, time.Second, StartOptions{Confine: func() error {
			tid = syscall.Gettid()
			return nil
		}})
		done <- err
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the command printed %q, %v; want ready", line, err)
	}
	task := "/proc/self/task/" + strconv.Itoa(tid)
	if _, err := os.Stat(task); err != nil {
		t.Fatalf("the forking thread %d is gone while its command runs: %v", tid, err)
	}
	release.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the confined thread's exit", func() bool {
		_, err := os.Stat(task)
		return os.IsNotExist(err)
	})
}

// TestConfineNeverRunsOnTheMainThread: Go parks a main thread whose
// goroutine exits locked instead of ending it, so Confine runs elsewhere
// (what it did would otherwise stay in ralph for its life).
func TestConfineNeverRunsOnTheMainThread(t *testing.T) {
	pid := os.Getpid()
	for i := range 20 {
		var tid int
		confine := func() error { tid = syscall.Gettid(); return nil }
		var err error
		if i%2 == 0 {
			_, err = RunContained(exec.CommandContext(t.Context(), "true"), time.Second, StartOptions{Confine: confine})
		} else {
			var p *Proc
			if p, err = Start(exec.Command("true"), StartOptions{Confine: confine}); err == nil {
				err = p.Wait()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if tid == pid {
			t.Fatalf("call %d: Confine ran on the main thread", i)
		}
	}
}
