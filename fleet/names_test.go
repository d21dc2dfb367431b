package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestEnsureIsIdempotent(t *testing.T) {
	srv, err := startTestServer(ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := connectAs(srv.ClientURL(), RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 2 {
		h, err := Ensure(ctx, js, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := WorkerConsumer(ctx, h.Jobs, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		info, err := h.Jobs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Retention != jetstream.WorkQueuePolicy {
			t.Errorf("jobs retention %v, want work queue", info.Config.Retention)
		}
	}
}
