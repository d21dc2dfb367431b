package serve

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ralphloop/ralph/loop"
)

// LiveRun is the served run as a UI follows and controls it (it satisfies
// tui.Live): its events come through the socket, and each control is one
// request.
type LiveRun struct {
	*Client
}

// Live returns the served run; Info().RunID names it ("" when the serving
// process drives no run).
func (c *Client) Live() *LiveRun { return &LiveRun{Client: c} }

// RunID names the run.
func (l *LiveRun) RunID() string { return l.info.RunID }

// State is the run's state as of the last Info.
func (l *LiveRun) State() string {
	if l.info.State == "" {
		return loop.StateIdle
	}
	return l.info.State
}

// Events streams the run's events as an attached UI. A stream that cannot
// start, or that ends because the serving process went, closes the
// channel after a log event saying why.
func (l *LiveRun) Events(ctx context.Context, fromSeq uint64) <-chan loop.Event {
	in, err := l.Client.Events(ctx, fromSeq, true)
	out := make(chan loop.Event, 64)
	go func() {
		defer close(out)
		if err == nil {
			for e := range in {
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
			if ctx.Err() != nil {
				return
			}
			err = fmt.Errorf("the process that ran the loop has exited; `ralph view %s` shows the recorded run", l.RunID())
		}
		select {
		case out <- loop.Event{Kind: loop.EventLog, Time: time.Now(), Log: loop.LogLine{Level: slog.LevelError, Msg: err.Error()}}:
		case <-ctx.Done():
		}
	}()
	return out
}

func (l *LiveRun) ctl(do string, it int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.Control(ctx, do, it)
}

// Pause asks the run to pause after its current step.
func (l *LiveRun) Pause() error { return l.ctl("pause", 0) }

// Resume continues a paused run.
func (l *LiveRun) Resume() error { return l.ctl("resume", 0) }

// Skip cancels the current iteration.
func (l *LiveRun) Skip() error { return l.ctl("skip", 0) }

// Abort cancels the run (compensations run).
func (l *LiveRun) Abort() error { return l.ctl("abort", 0) }

// CanApprove says whether the run takes plan approvals from the socket.
func (l *LiveRun) CanApprove() bool { return l.info.Approves }

// Approve answers iteration's plan.
func (l *LiveRun) Approve(iteration int, ok bool) error {
	if ok {
		return l.ctl("approve", iteration)
	}
	return l.ctl("decline", iteration)
}
