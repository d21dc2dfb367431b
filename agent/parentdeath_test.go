package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/proctest"
)

// TestHelperAgentParent is not a test: TestNoAgentSurvivesItsParent runs
// the test binary as a ralph stand-in that starts an agent call and
// prints the pids the agent reports, then kills it with SIGKILL.
func TestHelperAgentParent(t *testing.T) {
	if os.Getenv("AGENT_TEST_HELPER") != "parent" {
		t.Skip("helper process only")
	}
	// The agent reports its own pid and a child's, then works forever.
	script := `sleep 300 & echo "child $!"; echo "agent $$"; wait`
	_, err := Run(context.Background(), Options{CLI: "command", Command: []string{"sh", "-c", script},
		OnEvent: func(e Event) { fmt.Println(e.Text) }})
	fmt.Println("run returned:", err)
	os.Exit(1)
}

func TestNoAgentSurvivesItsParent(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgentParent$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENT_TEST_HELPER=parent")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	sc := bufio.NewScanner(out)
	for len(pids) < 2 && sc.Scan() {
		role, pid, ok := strings.Cut(sc.Text(), " ")
		if n, err := strconv.Atoi(pid); ok && err == nil {
			pids[role] = n
		}
	}
	if pids["agent"] == 0 || pids["child"] == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper reported no pids: %v", pids)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error says so
	for role, pid := range pids {
		if !proctest.Gone(pid, 5*time.Second) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the %s (pid %d) survived its parent's SIGKILL", role, pid)
		}
	}
}
