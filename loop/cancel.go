package loop

import (
	"context"
	"errors"
	"fmt"
)

// Who cut a run, an iteration or a call short: Cancelled.By, and the
// cancelled_by metadata of a call that was running when it happened.
const (
	CancelSkip        = "skip"         // the user skipped the iteration
	CancelAbort       = "abort"        // the user aborted the run (the UI's a, a control)
	CancelSignal      = "signal"       // a signal (Ctrl-C, SIGTERM) cancelled the run's context
	CancelMaxDuration = "max_duration" // the run's max_duration passed
	// CancelHandBack stops the run in this process without ending it: a
	// fleet worker hands it back (SIGTERM) or has lost it to another worker.
	// Nothing more is recorded; Run returns ErrHandedBack and the run stays
	// open, as after a crash, for another process to resume.
	CancelHandBack = "hand-back"
	// CancelStoreLost stops the run because its store was removed,
	// replaced or turned read-only (ledger.LostError): nothing more can
	// be recorded, and Run returns the store's LostError.
	CancelStoreLost = "store_lost"
	// CancelSuperseded stops a run whose work is no longer wanted: another
	// attempt at the same task of a batch merged first (DESIGN §23). The
	// run ends aborted, its condition "superseded", its reason the
	// Cancelled's.
	CancelSuperseded = "superseded"
)

// ErrHandedBack is what Run returns when its context was cancelled with
// &Cancelled{By: CancelHandBack}: the run has no closing action (it has not
// ended) and another process resumes it.
var ErrHandedBack = errors.New("the run was handed back unfinished, for another process to resume")

// Cancelled is the cause a run's or an iteration's context is cancelled
// with (context.Cause). Capability handlers and stop conditions below loop
// report context.Cause(ctx) as it is, so a call cut short by it is recorded
// as cancelled, by whom, never as a timeout of its own.
type Cancelled struct {
	By     string // CancelSkip, CancelAbort, CancelSignal, CancelMaxDuration
	Reason string // what happened, when By alone does not say (the signal)
}

func (c *Cancelled) Error() string {
	switch {
	case c.Reason != "":
		return c.Reason
	case c.By == CancelSkip:
		return "iteration skipped by the user"
	case c.By == CancelAbort:
		return "aborted by the user"
	}
	return "cancelled by " + c.By
}

// Is makes a Cancelled match context.Canceled, as the cause of a cancelled
// context stands for it.
func (c *Cancelled) Is(target error) bool { return target == context.Canceled }

// stepTimeout is the cause a step's :timeout-ms cancels its body with: a
// timeout, so a call it cuts short is recorded as timed out.
type stepTimeout struct {
	name  string
	after string
}

func (t *stepTimeout) Error() string {
	return fmt.Sprintf("step %q timed out after %s", t.name, t.after)
}

// Is makes a stepTimeout match context.DeadlineExceeded.
func (t *stepTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// cancelledBy says who cancelled ctx: the *Cancelled it was cancelled with,
// or, for a cause loop did not set (the caller's context: a signal), one
// that says so. It returns nil while ctx is live.
func cancelledBy(ctx context.Context) *Cancelled {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	var c *Cancelled
	switch {
	case errors.As(cause, &c):
		return c
	case errors.Is(cause, context.DeadlineExceeded):
		return nil // a deadline, not a cancellation: see stopReason
	case cause == nil || cause == context.Canceled:
		return &Cancelled{By: CancelSignal, Reason: "cancelled by the caller"}
	}
	return &Cancelled{By: CancelSignal, Reason: cause.Error()}
}

// stopReason says why a call running under ctx was cut short: "cancelled"
// with who asked, or "timeout" (a step's :timeout-ms, a deadline). Both are
// empty while ctx is live.
func stopReason(ctx context.Context) (stopped, by string) {
	if ctx.Err() == nil {
		return "", ""
	}
	if c := cancelledBy(ctx); c != nil {
		return "cancelled", c.By
	}
	return "timeout", ""
}
