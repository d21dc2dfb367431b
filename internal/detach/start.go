package detach

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/internal/sealenv"
)

// Started is a process Start started in the background.
type Started struct {
	PID int
	// Early is what it wrote before it sent its output elsewhere (its
	// log file) or exited.
	Early []byte
	// Exited says it exited soon after (Code is then its exit status);
	// otherwise it runs on its own, released.
	Exited bool
	Code   int
}

// Start starts exe with args in the background, in a session of its own
// (setsid: the terminal closing does not reach it), with the environment's
// secrets handed over sealed (sealenv.HandOver). Until the process sends
// its output elsewhere, or exits, its stdout and stderr come back here
// (Started.Early), so a start that fails can be reported as a foreground
// one would be.
func Start(exe string, args []string) (Started, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return Started{}, err
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return Started{}, err
	}
	defer null.Close()
	c := exec.Command(exe, args...)
	c.Stdin, c.Stdout, c.Stderr = null, w, w
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	sealed, err := sealenv.HandOver(c)
	if err != nil {
		w.Close()
		return Started{}, err
	}
	err = c.Start()
	sealed.Close()
	w.Close()
	if err != nil {
		return Started{}, fmt.Errorf("start the run in the background: %w", err)
	}
	st := Started{PID: c.Process.Pid}
	st.Early, _ = io.ReadAll(r) // ends when the process writes elsewhere instead, or exits
	exited := make(chan struct{})
	go func() { c.Wait(); close(exited) }()
	select {
	case <-exited:
		st.Exited, st.Code = true, c.ProcessState.ExitCode()
	case <-time.After(100 * time.Millisecond):
		// Still running: it is on its own now.
		_ = c.Process.Release()
	}
	return st, nil
}
