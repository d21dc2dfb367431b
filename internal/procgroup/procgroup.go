// Package procgroup runs every command ralph starts (agent calls,
// shell.exec, command stop conditions, the command provider, git in fleet
// workspaces) in a process group of its own and contained: in a cgroup v2
// of its own where ralph can make one, else with ralph as child subreaper
// and a sweep of /proc (see Proc.Containment). A timeout or cancellation
// kills every descendant, also one that moved to a new session; a
// descendant left holding the output open does not hold the caller;
// nothing outlives the command; and a watcher (ralph started again, see
// watcher.go) kills whatever is left when ralph dies, SIGKILL included.
package procgroup

import (
	"bytes"
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// Run runs cmd (made with exec.CommandContext) in its own process group.
// Cancelling cmd's context kills the whole group; once the command has
// exited, a descendant still holding its output open is given waitDelay
// and then killed with the group; the group is killed when Run returns. A
// command that exited while a descendant held its output reports its own
// exit status (nil, or an *exec.ExitError), not exec.ErrWaitDelay.
//
// The command is contained as Start's are (see Proc.Containment): what it
// started in a new session dies with it too, and when this process dies
// the watcher kills it all.
func Run(cmd *exec.Cmd, waitDelay time.Duration) error {
	_, err := RunContained(cmd, waitDelay, StartOptions{})
	return err
}

// RunContained is Run that also says which mechanism contained the
// command (o.ParentDeath is ignored: the watcher is what outlives this
// process). cmd must be made with exec.CommandContext.
func RunContained(cmd *exec.Cmd, waitDelay time.Duration, o StartOptions) (containment string, err error) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	cont := newContainer(o)
	cont.prepare(cmd, attr)
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { cont.kill(); return nil }
	cmd.WaitDelay = waitDelay
	release, err := startLocked(cmd, o.Confine)
	if err == nil {
		cont.started(cmd.Process.Pid)
		err = cmd.Wait()
		release()
	}
	cont.release() // stragglers, wherever they went
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil {
		err = nil
		if !cmd.ProcessState.Success() {
			err = &exec.ExitError{ProcessState: cmd.ProcessState}
		}
	}
	return cont.kind, err
}

// startLocked starts cmd. With confine it does so from a goroutine locked
// to a thread of its own, which confine restricts first and which exits
// with that goroutine (see StartOptions.Confine). That goroutine, and so
// its thread, lives until release is called once the command has been
// reaped: a parent-death signal the command set (bwrap's
// --die-with-parent) is tied to the thread that forked it, not to the
// process.
func startLocked(cmd *exec.Cmd, confine func() error) (release func(), err error) {
	if confine == nil {
		return func() {}, cmd.Start()
	}
	done := make(chan error, 1)
	reaped := make(chan struct{})
	goConfined(func() {
		err := startOn(cmd, confine)
		done <- err
		if err == nil {
			<-reaped
		}
	})
	if err := <-done; err != nil {
		return nil, err
	}
	return func() { close(reaped) }, nil
}

// CappedBuffer keeps the first Limit bytes written to it and notes whether
// more came. Writes never fail, so a chatty command is not killed by a
// full buffer.
type CappedBuffer struct {
	Limit     int
	Truncated bool
	buf       bytes.Buffer
}

func (c *CappedBuffer) Write(p []byte) (int, error) {
	room := c.Limit - c.buf.Len()
	if len(p) > room {
		c.Truncated = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}

// String is what was kept.
func (c *CappedBuffer) String() string { return c.buf.String() }

// TailBuffer keeps the last Limit bytes written to it and notes whether
// earlier bytes were dropped. Writes never fail. It is not safe for
// concurrent use.
type TailBuffer struct {
	Limit     int
	Truncated bool
	buf       []byte
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.Limit {
		t.Truncated = t.Truncated || len(p) > t.Limit || len(t.buf) > 0
		t.buf = append(t.buf[:0], p[len(p)-t.Limit:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.Limit; over > 0 {
		t.Truncated = true
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String is what was kept.
func (t *TailBuffer) String() string { return string(t.buf) }
