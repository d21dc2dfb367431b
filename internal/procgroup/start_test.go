package procgroup

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

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
