package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/sealenv"
	"github.com/ralphloop/ralph/loop"
)

// runLogPath is where a run's output goes when no terminal shows it:
// <store>/logs/<run-id>.log.
func runLogPath(storeDir, runID string) string {
	return filepath.Join(storeDir, "logs", runID+".log")
}

// redirectOutput points this process's stdout and stderr (the file
// descriptors, so every writer holding os.Stdout follows) at the run's log
// file, appending. It is how a run goes on without its terminal.
func redirectOutput(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the run's log: %w", err)
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := dupOnto(int(f.Fd()), fd); err != nil {
			return fmt.Errorf("send output to %s: %w", path, err)
		}
	}
	return nil
}

// absDir is dir made absolute for messages (as given when that fails).
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// detachedArgs are the arguments of the `ralph run` that runs run id in
// the background: args and the flags f set, headless, logging to the store.
func detachedArgs(args []string, f runFlags, id string) []string {
	child := append([]string{"run"}, args...)
	child = append(child, "--no-tui", "--log-to-store", "--run-id="+id)
	for _, fl := range []struct {
		name, value string
		set         bool
	}{
		{"json", "", f.asJSON}, {"verbose", "", f.verbose}, {"provider", f.provider, f.provider != ""},
		{"model", f.model, f.model != ""}, {"store", f.store, f.store != ""}, {"sandbox", f.sandbox, f.sandbox != ""},
		{"max-iterations", strconv.Itoa(f.maxIterations), f.maxIterations > 0},
	} {
		switch {
		case fl.set && fl.value == "":
			child = append(child, "--"+fl.name)
		case fl.set:
			child = append(child, "--"+fl.name+"="+fl.value)
		}
	}
	return child
}

// startDetached starts `ralph run` again as a background process in its
// own session (setsid: the terminal closing does not reach it), with the
// run id chosen here. Until that process has opened the store and sent its
// output to the run's log file, its output comes back here, so a config or
// store that fails is reported as a foreground run reports it.
func startDetached(cmd *cobra.Command, cfg *config.Config, args []string, f runFlags) error {
	if f.approve {
		return usageErrorf("--approve asks on a terminal, which a detached run has not; run without --detach, or without --approve")
	}
	exe, err := os.Executable()
	if err != nil {
		return exitError(ExitFailure, fmt.Errorf("find the ralph executable to start in the background: %w", err))
	}
	id := loop.NewID()
	child := detachedArgs(args, f, id)
	r, w, err := os.Pipe()
	if err != nil {
		return exitError(ExitFailure, err)
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return exitError(ExitFailure, err)
	}
	defer null.Close()
	c := exec.Command(exe, child...)
	c.Stdin, c.Stdout, c.Stderr = null, w, w
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	sealed, err := sealenv.HandOver(c)
	if err != nil {
		w.Close()
		return exitError(ExitFailure, err)
	}
	err = c.Start()
	sealed.Close()
	w.Close()
	if err != nil {
		return exitError(ExitFailure, fmt.Errorf("start the run in the background: %w", err))
	}
	pid := c.Process.Pid
	early, _ := io.ReadAll(r) // ends when the run writes to its log instead, or exits
	exited := make(chan struct{})
	go func() { c.Wait(); close(exited) }()
	logPath := runLogPath(absDir(storeDir(f.store, cfg)), id)
	select {
	case <-exited:
		code := c.ProcessState.ExitCode()
		if len(early) > 0 || code == ExitUsage { // it never got to its log
			cmd.ErrOrStderr().Write(early)
			return exitError(code, silentError{})
		}
		return writeOut(cmd.OutOrStdout(), fmt.Sprintf("run %s ran in the background and has already ended (exit %d); its output is in %s\nralph view %s\n",
			id, code, logPath, id))
	case <-time.After(100 * time.Millisecond):
		// Still running: it is on its own now (warnings it gave on the way
		// are shown).
		cmd.ErrOrStderr().Write(early)
		_ = c.Process.Release()
	}
	return writeOut(cmd.OutOrStdout(), fmt.Sprintf("run %s started in the background (pid %d); its output goes to %s\nralph attach %s\n",
		id, pid, logPath, id))
}
