package detach

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// hangup is what a SIGHUP (the terminal closed) does to the running
// command. By default it ends the command as SIGTERM does — a reader
// closes its store on the way out; a run claims it (OnHangup) to detach
// instead: the run goes on, its output in the store's log file.
type hangup struct {
	mu      sync.Mutex
	handler func()
	// ownEnd is set by a command that bounds its own end after a signal
	// (a fleet worker's hand-back grace): no watchdog is armed for it.
	ownEnd bool
	// interrupt, when set, is what a Ctrl-C does instead of cancelling the
	// command (a run whose UI detached: KeepInterrupt).
	interrupt func()
}

type hangupKey struct{}

// Signals returns ctx cancelled by the first Ctrl-C or SIGTERM (then
// the default handlers return, so a second one ends the process at once)
// and, unless a command claims it, by SIGHUP; either calls armWatchdog,
// saying why, unless the command bounds its own end (OwnEnd): cli's
// watchdog then ends the process if the command has not ended in time. A
// broken pipe on stdout (ralph chain show | head) becomes a write error,
// so the command closes its store and exits instead of the process dying
// at the write.
func Signals(parent context.Context, armWatchdog func(why string)) (context.Context, func()) {
	ctx, cancelCause := context.WithCancelCause(parent)
	cancel := func() { cancelCause(nil) }
	ints := make(chan os.Signal, 1)
	signal.Notify(ints, os.Interrupt, syscall.SIGTERM)
	stop := func() { signal.Stop(ints) } // the default handlers again
	context.AfterFunc(ctx, stop)
	h := &hangup{}
	h.handler = func() {
		h.mu.Lock()
		own := h.ownEnd
		h.mu.Unlock()
		if !own {
			armWatchdog("the hangup signal")
		}
		cancel()
	}
	ctx = context.WithValue(ctx, hangupKey{}, h)
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-ints:
				h.mu.Lock()
				fn := h.interrupt
				h.mu.Unlock()
				if fn != nil && sig == os.Interrupt {
					fn()
					continue
				}
				h.mu.Lock()
				own := h.ownEnd
				h.mu.Unlock()
				if !own {
					armWatchdog("the " + sig.String() + " signal")
				}
				cancelCause(signalCause(sig.String() + " signal received")) // as signal.NotifyContext says it
			case <-hups:
				h.mu.Lock()
				fn := h.handler
				h.mu.Unlock()
				fn()
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		close(done)
		signal.Stop(hups)
		stop()
		cancel()
	}
}

// signalCause is why a signal cancelled the command's context
// (context.Cause), worded as signal.NotifyContext words it.
type signalCause string

func (s signalCause) Error() string { return string(s) }

// OnHangup makes fn what a SIGHUP does while the command runs; it returns
// a function that restores the default.
func OnHangup(ctx context.Context, fn func()) (restore func()) {
	h, ok := ctx.Value(hangupKey{}).(*hangup)
	if !ok {
		return func() {}
	}
	h.mu.Lock()
	prev := h.handler
	h.handler = fn
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.handler = prev
		h.mu.Unlock()
	}
}

// OwnEnd says that the command bounds its own end after a signal (a
// fleet worker hands its runs back within its StopGrace, and a second
// signal kills what they run): the watchdog is not armed for it.
func OwnEnd(ctx context.Context) {
	if h, ok := ctx.Value(hangupKey{}).(*hangup); ok {
		h.mu.Lock()
		h.ownEnd = true
		h.mu.Unlock()
	}
}
