package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/serve"
)

type clusterRun struct {
	id     string
	bus    *loop.Bus
	paused chan struct{}
}

func (r *clusterRun) RunID() string     { return r.id }
func (r *clusterRun) Events() *loop.Bus { return r.bus }
func (r *clusterRun) Pause()            { close(r.paused) }
func (r *clusterRun) Resume()           {}
func (r *clusterRun) SkipIteration()    {}
func (r *clusterRun) Abort()            {}
func (r *clusterRun) RecordRequest(context.Context, string, string, loop.Requester) error {
	return nil
}

// A viewer on one node of a cluster reaches a run whose worker is
// connected to another: the tunnel's subjects are known on every node
// before either end sends.
func TestTunnelAcrossACluster(t *testing.T) {
	t.Parallel()
	c := fleettest.NewCluster(t, 3)
	worker, err := fleettest.Dial(c.Nodes[0].ClientURL(), fleet.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Close)
	viewer, err := fleettest.Dial(c.Nodes[2].ClientURL(), fleet.RoleSubmitter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viewer.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	id := uuid.Must(uuid.NewV7()).String()
	st, err := ledger.Open(ledger.Options{Dir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const n = 500
	for i := range n {
		a := &ledger.Action{RunID: id, ActionID: fmt.Sprintf("act-%d", i), PlanID: "plan", IntentID: "intent",
			Type: ledger.CapabilityCall, FunctionName: "ccos.echo", Arguments: []rtfs.Value{rtfs.String("x")},
			Result: rtfs.String("ok"), Success: true, Timestamp: time.Unix(1700000000, int64(i)).UTC()}
		if _, err := st.Append(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	run := &clusterRun{id: id, bus: loop.NewBus(st, id), paused: make(chan struct{})}
	srv, err := serve.Start(serve.Options{Store: st, Runner: run, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	stop, err := fleet.ServeControls(worker, id, run, fleet.ControlOptions{Socket: srv.Path(), Owner: string(fleet.RoleSubmitter)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	// The control subscription reaches the viewer's node in its own time.
	var cl *serve.Client
	for {
		cl, err = serve.DialConn(ctx, "run "+id, func(ctx context.Context) (net.Conn, error) {
			return fleet.DialRun(ctx, viewer, fleettest.Signer(t, c.URL(), fleet.RoleSubmitter), id)
		})
		if !errors.Is(err, fleet.ErrNoWorker) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.Info().StoreID != st.ID() {
		t.Errorf("info across the cluster: %+v", cl.Info())
	}
	for range 5 { // new tunnels each time the client dials again
		acts, err := cl.ByRun(id)
		if err != nil || len(acts) != n {
			t.Fatalf("%d actions across the cluster, %v; want %d", len(acts), err, n)
		}
		cl.Close()
	}
	if err := fleet.Control(ctx, viewer, fleettest.Signer(t, c.URL(), fleet.RoleSubmitter), id, fleet.OpPause); err != nil {
		t.Fatal(err)
	}
	<-run.paused
}
