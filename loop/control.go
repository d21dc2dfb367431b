package loop

import (
	"context"
	"sync"
)

// control holds the user's requests to a running loop. Its methods are safe
// to call from any goroutine (the UI, a signal handler) at any time.
type control struct {
	mu      sync.Mutex
	paused  bool
	resumed chan struct{} // closed by Resume
	abort   context.CancelCauseFunc
	aborted bool // Abort came before Run started
	skip    context.CancelCauseFunc
	// pauseReq (capacity 1) wakes the delay between iterations, where no
	// step will reach a gate, so a pause there takes effect at once.
	pauseReq chan struct{}
}

// Pause stops the run after the step that is executing (or before the next
// iteration, between iterations) until Resume. A paused run's state is
// "paused", in the store and on the event bus.
func (r *Runner) Pause() {
	r.ctl.mu.Lock()
	defer r.ctl.mu.Unlock()
	if !r.ctl.paused {
		r.ctl.paused, r.ctl.resumed = true, make(chan struct{})
		select {
		case r.ctl.pauseReq <- struct{}{}:
		default:
		}
		r.log.Info("pause requested; it takes effect after the current step")
	}
}

// Resume continues a paused run.
func (r *Runner) Resume() {
	r.ctl.mu.Lock()
	defer r.ctl.mu.Unlock()
	if r.ctl.paused {
		r.ctl.paused = false
		close(r.ctl.resumed)
		r.log.Info("resume requested")
	}
}

// Paused reports whether a pause is requested or in effect.
func (r *Runner) Paused() bool {
	r.ctl.mu.Lock()
	defer r.ctl.mu.Unlock()
	return r.ctl.paused
}

// Abort cancels the run: the running plan's compensations run and the run
// ends as aborted (exit status 4), like a first Ctrl-C.
func (r *Runner) Abort() {
	r.ctl.mu.Lock()
	cancel := r.ctl.abort
	r.ctl.aborted = true
	r.ctl.mu.Unlock()
	if cancel != nil {
		r.log.Info("abort requested; compensations run before the run ends")
		cancel(&Cancelled{By: CancelAbort})
	}
}

// SkipIteration cancels the current iteration (its compensations run); it
// is recorded as skipped and the loop goes on with the next one.
func (r *Runner) SkipIteration() {
	r.ctl.mu.Lock()
	cancel := r.ctl.skip
	r.ctl.mu.Unlock()
	if cancel != nil {
		r.log.Info("skip requested; the current iteration is cancelled")
		cancel(&Cancelled{By: CancelSkip})
	}
}

// gate blocks while the run is paused, recording the state change. A wait
// that an abort, a skip or max_duration ends leaves the run paused (it is:
// Resume has not been called); the next gate after Resume reports running.
func (r *Runner) gate(ctx context.Context, st *runState) error {
	r.ctl.mu.Lock()
	paused, resumed := r.ctl.paused, r.ctl.resumed
	r.ctl.mu.Unlock()
	if paused {
		if err := r.saveState(ctx, st, StatePaused, nil); err != nil {
			return err
		}
		r.bus.setState(StatePaused, r.o.Now())
		select {
		case <-resumed:
		case <-ctx.Done():
			select {
			case <-resumed:
			default: // still paused
				return ctx.Err()
			}
		}
	}
	if r.bus.State() == StatePaused { // resumed, here or while nothing waited
		if err := r.saveState(ctx, st, StateRunning, nil); err != nil {
			return err
		}
		r.bus.setState(StateRunning, r.o.Now())
	}
	if paused {
		return ctx.Err()
	}
	return nil
}
