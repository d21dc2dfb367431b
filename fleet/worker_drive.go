package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
)

// runResult is how a run's Run returned.
type runResult struct {
	out *loop.Outcome
	err error
}

// drive runs the started run to its end while serving its store, its
// controls and its state; it hands the run back when ctx ends and stops
// it at once when another worker has taken it over.
func (j *jobRun) drive(ctx context.Context, h RunHandle, repl *Replicator, p prepared) settle {
	bg := context.WithoutCancel(ctx)
	runCtx, cancelRun := context.WithCancelCause(bg)
	defer cancelRun(nil)
	j.stopRun = cancelRun
	defer j.serveRun(h)()
	watchCtx, stopWatch := context.WithCancel(bg)
	stale := make(chan error, 1)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		j.follow(watchCtx, h.Events().Subscribe(watchCtx, p.fromSeq), p.tally, stale)
	}()
	defer func() { stopWatch(); <-followed }()

	done := make(chan runResult, 1)
	go func() {
		out, err := h.Run(runCtx)
		done <- runResult{out, err}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	stopping, handingBack, lost := ctx.Done(), false, false
	replDone := repl.Done()
	for {
		select {
		case r := <-done:
			stopWatch()
			<-followed // the last iteration's state is recorded before the final one
			if ctx.Err() != nil {
				// The worker is stopping: its closing steps get StopGrace, so
				// it exits even when NATS is out of reach.
				closing, cancel := context.WithTimeout(bg, j.w.o.StopGrace)
				defer cancel()
				return j.ended(closing, repl, r, lost)
			}
			return j.ended(bg, repl, r, lost)
		case <-stopping: // SIGTERM: pause after the current call, then hand back
			stopping, handingBack = nil, true
			j.log.Info("the worker is stopping: the run pauses after its current call and is handed back")
			h.Pause()
		case err := <-stale:
			if !lost {
				lost = true
				j.log.Warn("another worker has taken the run over; it stops here at once", "err", err)
				cancelRun(&loop.Cancelled{By: loop.CancelHandBack, Reason: "another worker has taken the run over"})
			}
		case <-replDone:
			// Replication has stopped: another worker owns the run (fenced),
			// or the stream cannot take its chain. Whatever the run did from
			// here would be lost or done twice: it stops at once.
			replDone = nil
			if err := repl.Err(); err != nil && !lost {
				lost = true
				j.log.Warn("the run's chain cannot be replicated any more; it stops here at once", "err", err)
				cancelRun(&loop.Cancelled{By: loop.CancelHandBack, Reason: "replication stopped: " + err.Error()})
			}
		case <-tick.C:
			if handingBack && h.Events().State() == loop.StatePaused {
				cancelRun(&loop.Cancelled{By: loop.CancelHandBack, Reason: "the worker stopped; another worker continues the run"})
			}
		}
	}
}

// serveRun serves the run's store (attach and remote reads reach it) and
// takes its controls while it runs; the func it returns stops both.
func (j *jobRun) serveRun(h RunHandle) (stop func()) {
	var stops []func()
	socket := ""
	if srv, err := serve.Start(serve.Options{Store: h.Store(), Runner: h, Logger: j.log}); err != nil {
		j.log.Warn("the run's store is not served; attach and remote reads cannot reach it", "err", err)
	} else {
		stops = append(stops, func() { _ = srv.Close() }) // the run has ended: nothing waits on its socket
		socket = srv.Path()
	}
	if stopCtl, err := ServeControls(j.w.o.NC, j.job.RunID, h, ControlOptions{Socket: socket, Owner: j.state.SubmittedBy,
		Nonces: j.w.o.Handles.Nonces}); err != nil {
		j.log.Warn("the run takes no controls", "subject", CtlSubject(j.job.RunID), "err", err)
	} else {
		stops = append(stops, stopCtl)
	}
	return func() {
		for i := len(stops) - 1; i >= 0; i-- { // the controls first, as deferred
			stops[i]()
		}
	}
}

// follow records the run's state after each iteration (iteration, cost,
// tokens); a put another worker's state refuses is sent on stale.
func (j *jobRun) follow(ctx context.Context, events <-chan loop.Event, t tally, stale chan<- error) {
	for e := range events {
		if e.Kind != loop.EventAction || !t.add(e.Action) {
			continue
		}
		if j.repl.Load().Err() != nil { // lost: the state is another worker's to write now
			return
		}
		j.state.Iteration, j.state.CostUSD, j.state.Tokens = t.iteration, t.cost, t.tokens
		j.noteReplSkipped(j.repl.Load())
		err := j.put(ctx)
		switch {
		case errors.Is(err, ErrStale) || errors.Is(err, ErrRunEnded):
			select {
			case stale <- err:
			default:
			}
			return
		case err != nil && ctx.Err() == nil:
			j.log.Warn("the run's state was not updated", "err", err)
		}
	}
}

// ended settles a run whose Run returned: an ended run's end line goes to
// the stream and its final state to the bucket before its job is acked;
// a handed-back run is flushed and given back; a lost one is let go.
func (j *jobRun) ended(ctx context.Context, repl *Replicator, r runResult, lost bool) settle {
	switch {
	case lost:
		j.closeRepl(ctx, repl)
		if err := repl.Err(); err != nil && !errors.Is(err, ErrFenced) {
			return j.handBack(ctx, fmt.Errorf("worker %s could not replicate the run's chain: %w", j.w.o.ID, err))
		}
		return settleNone
	case errors.Is(r.err, loop.ErrHandedBack):
		if err := repl.Close(ctx); err != nil {
			if errors.Is(err, ErrFenced) {
				return settleNone
			}
			j.log.Warn("the run's chain was not fully replicated; the next worker resumes from what the stream has", "err", err)
		}
		return j.handBack(ctx, nil)
	case errors.Is(r.err, loop.ErrCannotResume):
		j.closeRepl(ctx, repl)
		return j.fail(ctx, r.err)
	case r.err != nil:
		j.closeRepl(ctx, repl)
		return j.retry(ctx, fmt.Errorf("the run stopped on worker %s without ending: %w", j.w.o.ID, r.err))
	}
	if err := repl.End(ctx); err != nil {
		if errors.Is(err, ErrFenced) {
			return settleNone
		}
		j.closeRepl(ctx, repl)
		return j.retry(ctx, fmt.Errorf("the run ended but its end was not replicated: %w", err))
	}
	j.closeRepl(ctx, repl)
	out := r.out
	j.state.State, j.state.Error = finalState(out.Class), ""
	j.state.Class, j.state.Condition, j.state.Reason = string(out.Class), out.TriggeredBy, out.Reason
	j.state.Iteration, j.state.CostUSD, j.state.Tokens = out.Iterations, out.CostUSD, out.Tokens
	j.noteReplSkipped(repl)
	if err := j.put(ctx); err != nil {
		return j.lost(err)
	}
	return settleAck
}

// closeRepl stops replication; what it could not publish is the next
// worker's to redo from the stream, so its error is only logged.
func (j *jobRun) closeRepl(ctx context.Context, repl *Replicator) {
	if err := repl.Close(ctx); err != nil && !errors.Is(err, ErrFenced) {
		j.log.Warn("stopping the run's replication", "err", err)
	}
}

// compile-time check: a *loop.Runner has the controls a RunHandle needs.
var _ interface {
	serve.Runner
	Run(context.Context) (*loop.Outcome, error)
} = (*loop.Runner)(nil)
