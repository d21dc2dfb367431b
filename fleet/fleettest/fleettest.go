// Package fleettest starts real NATS servers with JetStream in the test's
// process: one node, or a cluster of three for failover tests.
package fleettest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
)

// The servers started here let in only the fleet's users (§17): each
// test's servers get a fleet directory of their own with one member per
// role, whose credentials Creds and Connect find by a server's URL.
var authDirs sync.Map // client URL → fleet directory
var authCAs sync.Map  // client URL → the CA of its TLS certificate, when it has one

// NewAuth makes a fleet directory with one member per role (worker,
// submitter, viewer), as `ralph fleet serve` does on first start.
func NewAuth(t testing.TB) (dir string, members []fleet.Member) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "auth")
	ms, err := fleet.InitAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, ms
}

// Register records that the server at url lets in the members of the fleet
// directory dir (for servers a test starts itself).
func Register(t testing.TB, url, dir string) {
	authDirs.Store(url, dir)
	t.Cleanup(func() { authDirs.Delete(url) })
}

// RegisterTLS records that the server at url presents a certificate ca
// signed: Connect and Dial then trust it.
func RegisterTLS(t testing.TB, url, ca string) {
	authCAs.Store(url, ca)
	t.Cleanup(func() { authCAs.Delete(url) })
}

// tlsOption trusts the CA of the server(s) at url, if they use TLS.
func tlsOption(url string) []nats.Option {
	first, _, _ := strings.Cut(url, ",")
	if ca, ok := authCAs.Load(first); ok {
		return []nats.Option{nats.RootCAs(ca.(string))}
	}
	return nil
}

// AuthDir is the fleet directory of the server(s) at url.
func AuthDir(t testing.TB, url string) string {
	t.Helper()
	first, _, _ := strings.Cut(url, ",")
	d, ok := authDirs.Load(first)
	if !ok {
		t.Fatalf("no fleet directory for the server at %s; start it with fleettest", url)
	}
	return d.(string)
}

// Creds is the credentials file of role's member on the server(s) at url.
func Creds(t testing.TB, url string, role fleet.Role) string {
	t.Helper()
	return fleet.CredsPath(AuthDir(t, url), string(role))
}

// Signer signs requests as role's member of the fleet at url.
func Signer(t testing.TB, url string, role fleet.Role) *fleet.Signer {
	t.Helper()
	s, err := fleet.LoadSigner(Creds(t, url, role))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Connect connects to the server(s) at url as role's member; the
// connection closes with the test.
func Connect(t testing.TB, url string, role fleet.Role, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := Dial(url, role, opts...)
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", url, role, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Node starts a single JetStream node on a free port with the roles' users
// and the fleet's streams, made by its keeper as ralph fleet serve makes
// them; it stops with the test.
func Node(t testing.TB) *fleet.Server {
	t.Helper()
	dir, ms := NewAuth(t)
	s, err := fleet.StartServer(fleet.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0", Name: "n1", Members: ms, AuthDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	Register(t, s.ClientURL(), dir)
	makeStreams(t, s)
	return s
}

// makeStreams has s's keeper make the fleet's streams and buckets.
func makeStreams(t testing.TB, s *fleet.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.MakeStreams(ctx); err != nil {
		t.Fatalf("the keeper could not make the fleet's streams: %v", err)
	}
}

// Cluster is a cluster of JetStream nodes started in process.
type Cluster struct {
	Nodes []*fleet.Server
	// TLS, when the cluster was started with it, are its certificate files.
	TLS *TLSFiles
	// Auth is the fleet directory every node takes its users from.
	Auth string
	dirs []string
	opts []fleet.ServerOptions
}

// NewCluster starts n routed JetStream nodes and waits until JetStream has
// a meta leader. They stop with the test.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return newCluster(t, n, nil)
}

// NewTLSCluster is NewCluster with TLS for clients and routes, under
// certificates a test CA signed (c.TLS).
func NewTLSCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	f := NewTLS(t, time.Time{}, time.Time{})
	return newCluster(t, n, &f)
}

func newCluster(t testing.TB, n int, tf *TLSFiles) *Cluster {
	t.Helper()
	c := &Cluster{TLS: tf}
	routes := make([]string, n)
	for i := range routes {
		routes[i] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	root := t.TempDir()
	var ms []fleet.Member
	c.Auth, ms = NewAuth(t)
	for i := range n {
		o := fleet.ServerOptions{Dir: filepath.Join(root, fmt.Sprintf("n%d", i+1)), Listen: "127.0.0.1:0",
			Name: fmt.Sprintf("n%d", i+1), ClusterName: "ralph-test", ClusterListen: routes[i], Members: ms, AuthDir: c.Auth, Log: os.Getenv("FLEETTEST_LOG") != ""}
		if tf != nil {
			o.TLSCert, o.TLSKey, o.TLSCA = tf.Cert, tf.Key, tf.CA
		}
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
	for _, s := range c.Nodes {
		Register(t, s.ClientURL(), c.Auth)
		if tf != nil {
			RegisterTLS(t, s.ClientURL(), tf.CA)
		}
	}
	c.WaitReady(t)
	makeStreams(t, c.Nodes[0])
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
	o, err := fleet.CredsOption(fleet.CredsPath(c.Auth, string(fleet.RoleViewer)))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.URL(), append([]nats.Option{o}, tlsOption(c.URL())...)...)
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

// Dial connects to the server(s) at url as role's member, for a test that
// wants the error.
func Dial(url string, role fleet.Role, opts ...nats.Option) (*nats.Conn, error) {
	creds, ok := LookupCreds(url, role)
	if !ok {
		return nil, fmt.Errorf("no fleet directory for the server at %s; start it with fleettest", url)
	}
	o, err := fleet.CredsOption(creds)
	if err != nil {
		return nil, err
	}
	return nats.Connect(url, append(append([]nats.Option{o}, tlsOption(url)...), opts...)...)
}

// LookupCreds is the credentials file of role's member on the server(s) at
// url, when fleettest started them.
func LookupCreds(url string, role fleet.Role) (string, bool) {
	first, _, _ := strings.Cut(url, ",")
	d, ok := authDirs.Load(first)
	if !ok {
		return "", false
	}
	return fleet.CredsPath(d.(string), string(role)), true
}

// LookupCA is the CA file of the TLS server(s) at url, when fleettest
// started them with TLS.
func LookupCA(url string) (string, bool) {
	first, _, _ := strings.Cut(url, ",")
	ca, ok := authCAs.Load(first)
	if !ok {
		return "", false
	}
	return ca.(string), true
}
