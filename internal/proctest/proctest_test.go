package proctest

import (
	"os"
	"os/exec"
	"testing"
)

func TestAliveUntilExitedAndReaped(t *testing.T) {
	t.Parallel()
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Fatal("a sleeping child is not alive")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed but not yet reaped: a zombie, which is not alive.
	if !Gone(pid) {
		t.Fatal("a killed child is still alive")
	}
	_ = cmd.Wait() // "signal: killed"
	if Alive(pid) {
		t.Fatal("a reaped child is alive")
	}
}
