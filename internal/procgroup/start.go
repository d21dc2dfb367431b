package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// StartOptions configures Start.
type StartOptions struct {
	// ParentDeath asks the kernel to SIGKILL the command when its parent
	// dies (Linux; elsewhere it does nothing). The kernel ties that signal to
	// the OS thread that forked the command, not to the process, so Start
	// forks from a goroutine locked to its thread and keeps that thread
	// until the command has exited: no other goroutine can run on it, and
	// the Go runtime cannot retire it while the command lives.
	//
	// The signal reaches only the command itself, so Start also puts a
	// watcher in the command's group: a shell reading a pipe whose
	// other end only this process holds. When this process dies, however it
	// dies, the pipe reads end-of-file and the watcher kills the whole
	// group, so the command's own children die with it too.
	ParentDeath bool
}

// Proc is a command started by Start: the leader of a process group of its
// own. Kill and Wait may be called from any goroutine.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the command's exit status; set before done closes

	mu     sync.Mutex
	exited bool // the leader was reaped and its group killed
}

// Start starts cmd in a process group of its own and returns once it runs.
// cmd.Stdin, Stdout and Stderr should be nil or *os.File values (for
// example the ends of os.Pipe), so that no copying goroutine of os/exec
// stands between the command's exit and Wait: when the leader exits, the
// rest of its group is killed at once. cmd must not have a Context; use
// Kill to end it.
func Start(cmd *exec.Cmd, o StartOptions) (*Proc, error) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if o.ParentDeath {
		setParentDeath(attr)
	}
	cmd.SysProcAttr = attr
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The thread stays locked to this goroutine until the command has
		// been reaped, so the parent-death signal cannot fire early.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		var w *watcher
		if o.ParentDeath {
			var err error
			if w, err = startWatcher(cmd.Process.Pid); err != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				_ = cmd.Wait() // reap; the start error below is what matters
				started <- err
				return
			}
		}
		started <- nil
		err := cmd.Wait()
		p.mu.Lock()
		p.exited = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers; the group may already be gone
		p.mu.Unlock()
		w.stop()
		p.err = err
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the leader's process id (and the group's id).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL to the whole group. After the leader has been reaped
// it does nothing (the group was killed then, and its id may be reused).
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // ESRCH: the group is already gone
	}
}

// Done is closed once the leader has exited and its group was killed.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for Done and returns the command's exit status: nil, an
// *exec.ExitError, or the error os/exec reported.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// ExitCode is the leader's exit code after Done: -1 when a signal ended
// it or it has not exited.
func (p *Proc) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// watcher is a shell in a command's process group that kills the group
// when the pipe it reads reaches end-of-file: when this process closes its
// end, or dies.
type watcher struct {
	cmd *exec.Cmd
	w   *os.File // held open by this process only (close-on-exec)
}

// watcherScript reads until end-of-file, then kills its own process group.
const watcherScript = "read -r _; kill -KILL 0"

func startWatcher(pgid int) (*watcher, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("group watcher: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watcherScript)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	err = cmd.Start()
	_ = r.Close() // the watcher holds its own copy
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("group watcher: %w", err)
	}
	return &watcher{cmd: cmd, w: w}, nil
}

// stop runs after the group was killed: it closes the pipe (in case the
// kill missed the watcher) and reaps the watcher.
func (w *watcher) stop() {
	if w == nil {
		return
	}
	_ = w.w.Close()
	_ = w.cmd.Wait() // killed with its group, or ended at end-of-file: both expected
}
