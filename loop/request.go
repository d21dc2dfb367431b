package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// Requester is who asked for a control of a run from outside its process:
// a fleet member whose signed request a worker checked (DESIGN §17).
type Requester struct {
	Name string // the member's name
	Role string // its role (submitter, viewer, worker)
	Key  string // its public user nkey
}

// RecordRequest records on the run's chain that by asked for op (pause,
// resume, skip, abort, approve or decline) through via ("control" or
// "tunnel"), and makes it durable before the caller acts on it, so the
// chain names who changed the run before the change happens. It fails
// before the run has started (nothing to record on yet) or after it ended.
func (r *Runner) RecordRequest(ctx context.Context, op, via string, by Requester) error {
	st := r.started.Load()
	if st == nil {
		return errors.New("the run has not started; send the control again once it runs")
	}
	r.reqMu.Lock()
	defer r.reqMu.Unlock()
	if r.ended {
		return errors.New("the run has ended; there is nothing left to control")
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
