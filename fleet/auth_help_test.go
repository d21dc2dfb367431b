package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Every server a test starts lets in only the fleet's users (§17).
var testAuthDirs sync.Map // client URL → fleet directory

// startTestServer starts a server whose users are kept beside its streams
// (in o.Dir/.auth, so a restart on the same directory has the same ones).
func startTestServer(o ServerOptions) (*Server, error) {
	dir := filepath.Join(o.Dir, ".auth")
	if _, err := InitAuth(dir); err != nil {
		return nil, err
	}
	ms, err := LoadMembers(dir)
	if err != nil {
		return nil, err
	}
	o.Members, o.AuthDir = ms, dir
	s, err := StartServer(o)
	if err != nil {
		return nil, err
	}
	testAuthDirs.Store(s.ClientURL(), dir)
	testServers.Store(s.ClientURL(), s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.MakeStreams(ctx); err != nil { // the keeper's, as ralph fleet serve does
		s.Shutdown()
		return nil, err
	}
	return s, nil
}

var testServers sync.Map // client URL → *Server

// submitJob submits j as the fleet's submitter, through the keeper of the
// server h is connected to, as `ralph submit` does.
func submitJob(ctx context.Context, t testing.TB, h *Handles, j Job) error {
	t.Helper()
	return Submit(ctx, submitterConn(t, h.JS.Conn()), signerOf(t, h.JS.Conn(), RoleSubmitter), j)
}

// signerOf signs as role's member of the fleet nc is connected to.
func signerOf(t testing.TB, nc *nats.Conn, role Role) *Signer {
	t.Helper()
	first, _, _ := strings.Cut(nc.ConnectedUrl(), ",")
	d, ok := testAuthDirs.Load(first)
	if !ok {
		t.Fatalf("no users for the server at %s", first)
	}
	s, err := LoadSigner(CredsPath(d.(string), string(role)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keeperHandles are the fleet's handles over the keeper's own connection
// on the server nc is connected to: what only the keeper may do (publish
// jobs), a test does through them.
func keeperHandles(t testing.TB, nc *nats.Conn) *Handles {
	t.Helper()
	s, ok := testServers.Load(nc.ConnectedUrl())
	if !ok {
		t.Fatalf("no test server at %s", nc.ConnectedUrl())
	}
	k := s.(*Server).keeper
	h, err := k.handles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// connectAs connects to the test server(s) at url as role's member.
func connectAs(url string, role Role, opts ...nats.Option) (*nats.Conn, error) {
	first, _, _ := strings.Cut(url, ",")
	d, ok := testAuthDirs.Load(first)
	if !ok {
		return nil, fmt.Errorf("no users for the server at %s; start it with startTestServer", url)
	}
	o, err := CredsOption(CredsPath(d.(string), string(role)))
	if err != nil {
		return nil, err
	}
	return nats.Connect(url, append([]nats.Option{o}, opts...)...)
}

var submitterConns sync.Map // a worker's *nats.Conn → a submitter's

// submitterConn is a submitter's connection to the server nc is connected
// to: the one controls and tunnels are sent over.
func submitterConn(t testing.TB, nc *nats.Conn) *nats.Conn {
	t.Helper()
	if s, ok := submitterConns.Load(nc); ok {
		return s.(*nats.Conn)
	}
	sc, err := connectAs(nc.ConnectedUrl(), RoleSubmitter)
	if err != nil {
		t.Fatal(err)
	}
	submitterConns.Store(nc, sc)
	t.Cleanup(func() { submitterConns.Delete(nc); sc.Close() })
	return sc
}
