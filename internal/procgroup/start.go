package procgroup

import (
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
	// The signal reaches only the command itself; the rest of what it
	// started is killed by the watcher (see watcher.go), as for every
	// contained command. Under the sweep with the watcher up, the signal is
	// not set: the watcher ends the command too, after reading its tree.
	ParentDeath bool
	// NoCgroup contains the command by the subreaper and sweep even where
	// a cgroup could be made (as RALPH_NO_CGROUP=1 does for all).
	NoCgroup bool
	// Confine, when set, runs on the OS thread that forks the command,
	// just before it does (package sandbox restricts that thread with
	// Landlock there, so the command inherits the restriction and ralph's
	// other threads do not). A thread Confine ran on is never given back
	// to the Go runtime: it exits with the goroutine that locked it. An
	// error from Confine fails the start; the command never runs.
	Confine func() error
}

// Proc is a command started by Start: the leader of a process group of its
// own. Kill and Wait may be called from any goroutine.
type Proc struct {
	cmd  *exec.Cmd
	cont *container
	done chan struct{}
	err  error // the command's exit status; set before done closes

	mu     sync.Mutex
	exited bool // the leader was reaped and its group killed
}

// Start starts cmd in a process group of its own, contained (see
// Containment), and returns once it runs.
// cmd.Stdin, Stdout and Stderr should be nil or *os.File values (for
// example the ends of os.Pipe), so that no copying goroutine of os/exec
// stands between the command's exit and Wait: when the leader exits, the
// rest of its group is killed at once. cmd must not have a Context; use
// Kill to end it.
func Start(cmd *exec.Cmd, o StartOptions) (*Proc, error) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	cont := newContainer(o)
	cont.prepare(cmd, attr)
	// Under the sweep, a watcher that is up is left to end the command when
	// this process dies: it reads the tree while the leader still links its
	// children to it. A parent-death signal would kill the leader first and
	// send its children to init, losing that ancestry. A cgroup needs none.
	if o.ParentDeath && (cont.kind != ContainSweep || !watcherUp()) {
		setParentDeath(attr)
	}
	cmd.SysProcAttr = attr
	p := &Proc{cmd: cmd, cont: cont, done: make(chan struct{})}
	started := make(chan error, 1)
	run := func() {
		if err := startOn(cmd, o.Confine); err != nil {
			cont.release()
			started <- err
			return
		}
		cont.started(cmd.Process.Pid)
		started <- nil
		err := cmd.Wait()
		p.mu.Lock()
		p.exited = true
		cont.release() // stragglers, wherever they went
		p.mu.Unlock()
		p.err = err
		close(p.done)
	}
	// The thread stays locked to the goroutine until the command has been
	// reaped, so the parent-death signal cannot fire early.
	if o.Confine != nil {
		goConfined(run)
	} else {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			run()
		}()
	}
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the leader's process id (and the group's id).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL to every process of the command: its group, and
// what left the group (see Containment). After the leader has been reaped
// it does nothing (everything was killed then, and its id may be reused).
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		p.cont.kill()
	}
}

// Containment names the mechanism that holds the command's processes:
// ContainCgroup, ContainSweep or (not on Linux) ContainGroup.
func (p *Proc) Containment() string { return p.cont.kind }

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

// goConfined runs f on a new goroutine locked to a thread that exits
// when f returns, and that is not the process's main thread: Go never
// ends that one (a goroutine that exits locked to it leaves it parked for
// the process's life), so what Confine did to it would stay in ralph.
// On the main thread, f runs on a goroutine of its own, which cannot be
// scheduled there while this one holds it locked.
func goConfined(f func()) {
	go func() {
		runtime.LockOSThread()
		if !onMainThread() {
			f()
			return // still locked: the thread exits with the goroutine
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
			f()
		}()
		<-done
		runtime.UnlockOSThread() // the main thread, untouched, goes back to the runtime
	}()
}

// startOn starts cmd on the calling goroutine's locked thread after
// confine (if any) restricted that thread.
func startOn(cmd *exec.Cmd, confine func() error) error {
	if confine != nil {
		if err := confine(); err != nil {
			return err
		}
	}
	return cmd.Start()
}
