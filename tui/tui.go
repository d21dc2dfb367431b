package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/stop"
)

// Options configure the UI.
type Options struct {
	// Run is the live run (Run): the in-process runner (Local) or one
	// reached through its store's socket. Its RunID names the run.
	Run Live
	// Store is what the detail and history views read: the run's ledger
	// (View), or Run itself when nil.
	Store Reader
	// StoreDir is the store's directory, where the detail of an agent call
	// reads the end of its output file; empty: Store's Dir() when it has
	// one.
	StoreDir string
	// Attached says the UI follows a run another process owns (ralph
	// attach): q leaves the run going instead of asking to abort it.
	Attached bool
	// Config is the run's config, for the header (provider, model,
	// max_iterations, max_cost) and the conditions listed before the first
	// evaluation. View reads it from the run's RunStarted when nil.
	Config *config.Config
	// Done receives runner.Run's error (nil when it returned an Outcome)
	// once Run has returned; Start makes such a channel. Without it the UI
	// learns that the run ended from its closing action.
	Done <-chan error
	// Approver answers RunnerOptions.Approve with the y/n keys (approve
	// mode). Pass the same *Approver to both.
	Approver *Approver
	// Logs, when it is RunnerOptions.Logger's handler, shows the run's log
	// records in the log view (l).
	Logs *LogHandler
	// FromSeq is the first chain seq to show: Head().Seq+1 taken before a
	// new run starts skips older runs' actions; 0 reads the whole chain
	// (a resumed run shows its history).
	FromSeq uint64
	// GoesOn, for View, says the run is still going on in another process
	// (named here, e.g. "process 4242"): the view shows it as recorded so
	// far, not as interrupted, and points to ralph attach.
	GoesOn string
	// RunID is the recorded run View shows (set by View).
	RunID string
	// Replay, for View, is a replay of another stop configuration against
	// the run (ralph view --replay FILE, named ReplayName): the history
	// view shows its verdicts beside the recorded ones.
	Replay     *stop.ReplayResult
	ReplayName string
	// Input and Output default to os.Stdin and os.Stdout.
	Input  io.Reader
	Output io.Writer
	// Now is the clock for elapsed times and countdowns (tests).
	Now func() time.Time
}

// ErrForceQuit is returned by Run when the user pressed q (or ctrl+c)
// twice: the second press does not wait for the aborted run to end. The
// caller should exit at once (DESIGN §3: status 130).
var ErrForceQuit = errors.New("quit before the run ended")

// ErrDetached is returned by Run when the user left a live run going (q
// in an attached UI, q then d in a foreground one): the run goes on without
// this UI.
var ErrDetached = errors.New("detached from the run; it goes on")

// PanicError reports a panic in one of the UI's goroutines (or in the
// function Start runs). The terminal has been restored when it is returned.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack)
}

// Run shows the live UI for o.Run until the user quits. For a runner in
// this process the caller starts runner.Run in its own goroutine (see
// Start) before or after calling Run; the UI follows the run's events from
// o.FromSeq. When the
// run ends the UI shows its final state and why, and waits for q. ctrl+c
// while the run goes on aborts it (compensations run) and exits once it has
// ended; a second press returns ErrForceQuit at once. q asks first: abort
// (y, as ctrl+c), detach (d: Run returns ErrDetached and the run goes on)
// or stay (n); in an attached UI (o.Attached) q detaches at once.
func Run(ctx context.Context, o Options) error {
	if o.Run == nil {
		return errors.New("tui.Run needs a Run")
	}
	if o.Store == nil {
		o.Store = o.Run
	}
	parseCfg := o.Config == nil
	if o.Logs != nil {
		defer o.Logs.detach()
	}
	return run(ctx, &o, func(ctx context.Context, send func(tea.Msg)) {
		events := o.Run.Events(ctx, o.FromSeq)
		if l, ok := o.Run.(*localRun); ok && o.Logs != nil {
			o.Logs.attach(l.bus())
		}
		forward(ctx, events, send, parseCfg)
	})
}

// View shows a recorded run read-only (ralph view): the same panes and
// views, streamed from the store without holding the decoded actions, and
// no controls. It returns when the user quits.
func View(ctx context.Context, store Scanner, runID string, o Options) error {
	if store == nil || runID == "" {
		return errors.New("tui.View needs a store and a run id")
	}
	o.Store, o.RunID, o.Run, o.Done, o.Approver = store, runID, nil, nil, nil
	parseCfg := o.Config == nil
	return run(ctx, &o, func(ctx context.Context, send func(tea.Msg)) {
		load(ctx, store, runID, send, parseCfg, o.GoesOn != "")
	})
}

// Start runs fn in a goroutine and returns a channel for Options.Done that
// receives fn's error when it returns. A panic in fn becomes a *PanicError
// on the channel, so the UI ends and restores the terminal instead of the
// process dying with the terminal in raw mode.
func Start(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- &PanicError{Value: r, Stack: debug.Stack()}
			}
		}()
		done <- fn()
	}()
	return done
}

// session guards the UI's own goroutines: a panic in one is recovered,
// kills the program (which restores the terminal) and is returned by Run.
type session struct {
	p     *tea.Program
	mu    sync.Mutex
	panic *PanicError
}

func (s *session) goSafe(fn func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				s.mu.Lock()
				if s.panic == nil {
					s.panic = &PanicError{Value: r, Stack: debug.Stack()}
				}
				s.mu.Unlock()
				s.p.Kill()
			}
		}()
		fn()
	}()
}

func run(ctx context.Context, o *Options, source func(context.Context, func(tea.Msg))) error {
	in, out := o.Input, o.Output
	if in == nil {
		in = os.Stdin
	}
	if out == nil {
		out = os.Stdout
	}
	m := newModel(o, newStyles(out, profileFor(out)))
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.ctx = ctx // the UI's commands end with it
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen(),
		tea.WithMouseCellMotion(), tea.WithoutSignalHandler())
	s := &session{p: p}
	s.goSafe(func() { source(ctx, p.Send) })
	// The UI's title (title.go) is the terminal's while it runs: the one
	// before it is pushed on the terminal's title stack and popped when the
	// UI ends (a closed terminal takes neither).
	_, _ = io.WriteString(out, pushTitle)
	final, err := p.Run()
	_, _ = io.WriteString(out, popTitle)
	cancel()
	// A UI that quit takes the plan question with it (the runner ends the
	// run); one that detached, or whose context was cancelled (a closed
	// terminal, a signal), leaves it to an attached UI or the runner's end.
	if fm, ok := final.(*model); o.Approver != nil && parent.Err() == nil && !(ok && fm.detached) {
		o.Approver.close()
	}
	s.mu.Lock()
	pe := s.panic
	s.mu.Unlock()
	if pe != nil {
		return pe
	}
	if fm, ok := final.(*model); ok && fm.runErr != nil {
		var re *PanicError
		if errors.As(fm.runErr, &re) {
			return re
		}
	}
	if err != nil {
		if errors.Is(err, tea.ErrProgramKilled) && parent.Err() != nil {
			return context.Cause(parent) // the caller cancelled (a signal)
		}
		return err
	}
	if fm, ok := final.(*model); ok && fm.forced {
		return ErrForceQuit
	}
	if fm, ok := final.(*model); ok && fm.detached {
		return ErrDetached
	}
	return nil
}
