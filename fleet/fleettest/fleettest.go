// Package fleettest starts real NATS servers with JetStream in the test's
// process: one node, or a cluster of three for failover tests.
package fleettest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
)

// Node starts a single JetStream node on a free port; it stops with the test.
func Node(t testing.TB) *fleet.Server {
	t.Helper()
	s, err := fleet.StartServer(fleet.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0", Name: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Cluster is a cluster of JetStream nodes started in process.
type Cluster struct {
	Nodes []*fleet.Server
	dirs  []string
	opts  []fleet.ServerOptions
}

// NewCluster starts n routed JetStream nodes and waits until JetStream has
// a meta leader. They stop with the test.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{}
	routes := make([]string, n)
	for i := range routes {
		routes[i] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	root := t.TempDir()
	for i := range n {
		o := fleet.ServerOptions{Dir: filepath.Join(root, fmt.Sprintf("n%d", i+1)), Listen: "127.0.0.1:0",
			Name: fmt.Sprintf("n%d", i+1), ClusterName: "ralph-test", ClusterListen: routes[i]}
		for j, r := range routes {
			if j != i {
				o.Routes = append(o.Routes, r)
			}
		}
		c.opts = append(c.opts, o)
	}
	errs := make(chan error, n)
	c.Nodes = make([]*fleet.Server, n)
	for i := range n {
		go func() {
			s, err := fleet.StartServer(c.opts[i])
			c.Nodes[i] = s
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range c.Nodes {
			if s != nil {
				s.Shutdown()
			}
		}
	})
	c.WaitReady(t)
	return c
}

// URL is every running node's client URL, comma-separated (what
// nats.Connect and --nats take).
func (c *Cluster) URL() string {
	var urls []string
	for _, s := range c.Nodes {
		if s != nil {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// WaitReady waits until a JetStream request succeeds through the cluster
// and the meta leader counts every running node as a current peer: a
// stream of as many replicas as nodes can then be placed.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	nc, err := nats.Connect(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil && c.peersCurrent() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster has no JetStream leader seeing every node after 30s (last request: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// peersCurrent reports whether the meta leader sees every running node.
func (c *Cluster) peersCurrent() bool {
	running := 0
	for _, s := range c.Nodes {
		if s != nil {
			running++
		}
	}
	for _, s := range c.Nodes {
		if s != nil && len(s.Raw().JetStreamClusterPeers()) >= running {
			return true
		}
	}
	return false
}

// StreamLeader is the index of the node leading stream, or -1.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Nodes {
		if s != nil && s.Raw().JetStreamIsStreamLeader("$G", stream) {
			return i
		}
	}
	return -1
}

// Stop shuts node i down (a leader that goes away).
func (c *Cluster) Stop(i int) {
	c.Nodes[i].Shutdown()
	c.Nodes[i] = nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
