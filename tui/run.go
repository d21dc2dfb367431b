package tui

import (
	"context"
	"errors"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// Reader is what the UI reads from a run's store beside its event stream:
// an action for the detail view and history, its proof, and a verification
// of the whole chain. *ledger.Store satisfies it, and so does a client of
// the process that holds the store (serve.Client).
type Reader interface {
	Get(actionID string) (ledger.Action, error)
	GetSeq(seq uint64) (ledger.Action, error)
	VerifyAction(ctx context.Context, seq uint64) (ledger.ActionProof, error)
	Verify(ctx context.Context, progress func(done, total uint64)) (ledger.VerifyReport, error)
}

// Scanner is a Reader that also streams the chain in seq order, which is
// how ralph view reads a recorded run.
type Scanner interface {
	Reader
	Range(fromSeq uint64, fn func(ledger.Action) error) error
}

// Live is a live run as the UI follows and controls it: the in-process
// runner (Local) or a run reached through its store's socket
// (serve.Client.Run). The UI never holds a *loop.Runner.
type Live interface {
	Reader
	// RunID names the run.
	RunID() string
	// State is the run's state now (loop.StateIdle before it starts).
	State() string
	// Events streams the run's events from the chain's fromSeq on (0: the
	// whole chain), as loop.Bus.Subscribe does, until ctx ends.
	Events(ctx context.Context, fromSeq uint64) <-chan loop.Event
	// Pause, Resume, Skip and Abort ask the run; they return once asked,
	// not once done. The error says the request did not reach the run.
	Pause() error
	Resume() error
	Skip() error
	Abort() error
	// Approve answers the plan awaiting approval for iteration (approve
	// mode); CanApprove says whether this run takes answers from the UI.
	Approve(iteration int, ok bool) error
	CanApprove() bool
}

// Local is the Run of a runner in this process over its store; approver,
// when the runner's RunnerOptions.Approve is approver.Approve, answers its
// plans.
func Local(r *loop.Runner, store *ledger.Store, approver *Approver) Live {
	return &localRun{Store: store, r: r, approver: approver}
}

type localRun struct {
	*ledger.Store
	r        *loop.Runner
	approver *Approver
}

func (l *localRun) RunID() string { return l.r.RunID() }
func (l *localRun) State() string { return l.r.Events().State() }
func (l *localRun) Pause() error  { l.r.Pause(); return nil }
func (l *localRun) Resume() error { l.r.Resume(); return nil }
func (l *localRun) Skip() error   { l.r.SkipIteration(); return nil }
func (l *localRun) Abort() error  { l.r.Abort(); return nil }

// Events subscribes to the runner's bus. A state change before the
// subscription is not replayed, so the stream starts with the state as it
// is now.
func (l *localRun) Events(ctx context.Context, fromSeq uint64) <-chan loop.Event {
	bus := l.r.Events()
	in := bus.Subscribe(ctx, fromSeq)
	out := make(chan loop.Event, 1)
	out <- loop.Event{Kind: loop.EventState, State: bus.State(), Time: time.Now()}
	go func() {
		defer close(out)
		for e := range in {
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (l *localRun) CanApprove() bool { return l.approver != nil }

func (l *localRun) Approve(iteration int, ok bool) error {
	if l.approver == nil {
		return errors.New("this run does not ask for approval")
	}
	l.approver.answer(iteration, ok)
	return nil
}

// bus is the runner's event bus, for a log handler that publishes on it.
func (l *localRun) bus() *loop.Bus { return l.r.Events() }
