package fleettest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
)

// A three-node cluster keeps its R3 streams when the jobs stream's leader
// stops: a message published before is still there, and new ones go in.
func TestClusterSurvivesStreamLeaderStop(t *testing.T) {
	t.Run("plain", func(t *testing.T) { clusterSurvivesStreamLeaderStop(t, NewCluster(t, 3)) })
	// With TLS for clients and routes: a client must trust the cluster's
	// CA, and the roles hold as on one node.
	t.Run("tls", func(t *testing.T) {
		c := NewTLSCluster(t, 3)
		if !strings.HasPrefix(c.URL(), "tls://") {
			t.Errorf("a TLS cluster's URL %s", c.URL())
		}
		o, err := fleet.CredsOption(fleet.CredsPath(c.Auth, "viewer"))
		if err != nil {
			t.Fatal(err)
		}
		if nc, err := nats.Connect(c.URL(), o); err == nil {
			nc.Close()
			t.Error("a client that does not trust the cluster's CA connected")
		} else if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("a client without the CA: %v", err)
		}
		clusterSurvivesStreamLeaderStop(t, c)
	})
}

func clusterSurvivesStreamLeaderStop(t *testing.T, c *Cluster) {
	nc, err := Dial(c.URL(), fleet.RoleWorker, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := fleet.DefaultConfig()
	cfg.Replicas = 3
	h, err := fleet.Ensure(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Chain lines are a worker's to publish.
	sc, sjs := nc, js
	subject := fleet.ChainSubject("01a215b5-0000-7000-8000-000000000001")
	if _, err := sjs.Publish(ctx, subject, []byte("one"), jetstream.WithMsgID("one")); err != nil {
		t.Fatal(err)
	}
	leader := c.StreamLeader(fleet.StreamChains)
	if leader < 0 {
		t.Fatal("no leader for the chains stream")
	}
	c.Stop(leader)
	for {
		// A publish that timed out in the election may have been stored:
		// the retry carries the same message id, so it is not stored twice.
		// Each attempt has its own deadline: a publish sent while no
		// leader can answer is never acked.
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := sjs.Publish(actx, subject, []byte("two"), jetstream.WithMsgID("two"))
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no publish after the leader stopped: %v (connected to %s, status %v)", err, sc.ConnectedUrl(), sc.Status())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var info *jetstream.StreamInfo
	for { // the stream's new leader answers once elected
		ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
		info, err = h.Chains.Info(ictx)
		icancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("the chains stream holds %d messages after a leader change, want 2", info.State.Msgs)
	}
}
