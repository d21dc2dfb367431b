package runsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/serve"
)

// Fleet is a fleet as a source: each run's chain is rebuilt from the
// fleet's stream per request.
type Fleet struct {
	URL    string
	SignIn *fleet.SignIn // --creds and --tls-ca, for the fleet's connections
	// Name names the connections (ralph mcp, ralph web).
	Name   string
	ErrOut io.Writer
}

// ErrFleetRuns is Store's answer on a fleet, whose chains are kept one
// per run.
var ErrFleetRuns = errors.New("with --nats, name the run with run_id: a fleet's chains are kept one per run")

// Store is refused: a fleet has no one store.
func (f Fleet) Store(context.Context) (mcpserver.Reader, error) { return nil, ErrFleetRuns }

// open connects to the fleet.
func (f Fleet) open(ctx context.Context) (*fleet.Reader, error) {
	return fleet.OpenReader(ctx, f.URL, f.Name, f.SignIn)
}

// Run rebuilds the chain of the run id names (a unique prefix, or
// loop.LatestRun).
func (f Fleet) Run(ctx context.Context, id string) (*mcpserver.Run, error) {
	fr, err := f.open(ctx)
	if err != nil {
		return nil, err
	}
	st, err := fr.Rebuild(ctx, id, nil)
	if err != nil {
		fr.Close()
		return nil, err
	}
	r, err := RunOf(st, id, "the runs list gives the ids")
	if err != nil {
		return nil, err
	}
	r.Record, r.Live, r.Handle = st.Run.Record(), st.Run.State == fleet.StateRunning, st
	return r, nil
}

// Runs lists every run of the fleet, oldest submission first.
func (f Fleet) Runs(ctx context.Context) ([]loop.RunRecord, error) {
	states, _, err := f.Overview(ctx)
	if err != nil {
		return nil, err
	}
	out := []loop.RunRecord{}
	for _, s := range states {
		out = append(out, s.Record())
	}
	return out, nil
}

// Overview reads every run's state and the workers heartbeating now.
func (f Fleet) Overview(ctx context.Context) ([]fleet.RunState, []fleet.WorkerState, error) {
	fr, err := f.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer fr.Close()
	states, err := fr.States(ctx)
	if err != nil {
		return nil, nil, err
	}
	kv, err := fr.JS.KeyValue(ctx, fleet.BucketWorkers)
	if err != nil {
		return states, nil, nil // a fleet no worker has joined has no workers bucket yet
	}
	workers, err := fleet.ListWorkers(ctx, kv)
	return states, workers, err
}

// Control sends do (pause, resume, skip, abort) to the run, signed with
// the member's credentials.
func (f Fleet) Control(ctx context.Context, r *mcpserver.Run, do string) error {
	return f.Steer(ctx, r, do, 0)
}

// Steerable says whether r runs on a worker now (the worker still checks
// that the member signing a control submitted the run).
func (f Fleet) Steerable(r *mcpserver.Run) bool {
	fr, ok := r.Handle.(fleet.RunReader)
	return ok && fr.Run.State == fleet.StateRunning
}

// Approves is false: a fleet's plans are approved by the worker's policy.
func (f Fleet) Approves(*mcpserver.Run) bool { return false }

// Steer is Control; a fleet's controls answer no plan approvals.
func (f Fleet) Steer(ctx context.Context, r *mcpserver.Run, do string, _ int) error {
	fr := r.Handle.(fleet.RunReader)
	if do == "approve" || do == "decline" {
		return fmt.Errorf("run %s runs on a fleet, whose controls are pause, resume, skip and abort; its plans are approved by the worker's policy", r.ID)
	}
	if fr.Run.State != fleet.StateRunning {
		return fmt.Errorf("run %s is not running (its state in the fleet is %s); only a run a worker runs now can be steered", r.ID, fr.Run.State)
	}
	signer, err := f.SignIn.Signer()
	if err != nil {
		return err
	}
	return fleet.Control(ctx, fr.Fleet.NC, signer, r.ID, do)
}

// Events streams the running run's events through a tunnel to the serve
// socket of the worker running it; the stream has its own connection.
func (f Fleet) Events(ctx context.Context, r *mcpserver.Run, from uint64) (<-chan loop.Event, error) {
	signer, err := f.SignIn.Signer()
	if err != nil {
		return nil, err
	}
	fr, err := f.open(ctx)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("run %s in the fleet at %s", r.ID, f.URL)
	c, err := serve.DialConn(ctx, name, func(ctx context.Context) (net.Conn, error) {
		return fleet.DialRun(ctx, fr.NC, signer, r.ID)
	})
	if err != nil {
		fr.Close()
		return nil, err
	}
	ch, err := c.Events(ctx, from, false)
	if err != nil {
		c.Close()
		fr.Close()
		return nil, err
	}
	return closeAfter(ctx, ch, closers{c, fleetCloser{fr}}), nil
}

type fleetCloser struct{ *fleet.Reader }

func (c fleetCloser) Close() error { c.Reader.Close(); return nil }

// closers closes each in turn.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Diff says why a fleet run has none here.
func (f Fleet) Diff(_ context.Context, r *mcpserver.Run, _ []ledger.Action, _ int) ([]gitx.FileStat, string, string) {
	return nil, "", "a fleet run's checkpoints are commits on its branch ralph/" + r.ID + " in the workspace's repository, not here"
}
