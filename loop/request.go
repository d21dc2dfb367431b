package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// Requester is who asked for a control of a run from outside its process:
// a fleet member whose signed request a worker checked (DESIGN §17), or
// the store's owner through the run's socket (ralph attach, ralph mcp,
// ralph web), which only the owner's processes may reach.
type Requester struct {
	Name string // the member's name (the owner's user name)
	Role string // its role (submitter, viewer, worker; owner)
	Key  string // its public user nkey ("" for the owner)
}

// ErrNotStarted and ErrEnded are RecordRequest's refusals: before the
// run's RunStarted there is nothing to record on, after its end nothing
// to control.
var (
	ErrNotStarted = errors.New("the run has not started; send the control again once it runs")
	ErrEnded      = errors.New("the run has ended; there is nothing left to control")
)

// RecordRequest records on the run's chain that by asked for op (pause,
// resume, skip, abort, approve or decline) through via ("control" or
// "tunnel" from a fleet, "socket" from the owner), and makes it durable before the caller acts on it, so the
// chain names who changed the run before the change happens. It fails
// before the run has started (nothing to record on yet) or after it ended.
func (r *Runner) RecordRequest(ctx context.Context, op, via string, by Requester) error {
	st := r.started.Load()
	if st == nil {
		return ErrNotStarted
	}
	r.reqMu.Lock()
	defer r.reqMu.Unlock()
	if r.ended {
		return ErrEnded
	}
	a := &ledger.Action{Type: ledger.ControlRequested, FunctionName: op, Success: true,
		Metadata: map[string]rtfs.Value{
			"op": rtfs.String(op), "via": rtfs.String(via),
			"by": rtfs.String(by.Name), "role": rtfs.String(by.Role), "key": rtfs.String(by.Key),
		}}
	if _, err := r.record(ctx, st, a); err != nil {
		return fmt.Errorf("record the request: %w", err)
	}
	return r.durable(ctx)
}
