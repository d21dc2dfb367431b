package serve

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
)

// DialConn speaks to a server over any connection its dialer makes; the
// connection it makes first serves the first request, and a first dial
// that fails is its error as the dialer gave it.
func TestDialConnUsesItsDialer(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	appendN(t, st, "r1", 3, "x")
	s, _ := start(t, Options{Store: st})
	var dials atomic.Int32
	c, err := DialConn(context.Background(), "test server", func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.Path())
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Info().StoreID != st.ID() {
		t.Errorf("info %+v, want store %s", c.Info(), st.ID())
	}
	acts, err := c.ByRun("r1")
	if err != nil || len(acts) != 3 {
		t.Fatalf("ByRun: %d actions, %v", len(acts), err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials for two requests in turn, want 1 (the first connection reused)", n)
	}

	errGone := errors.New("no such server")
	_, err = DialConn(context.Background(), "gone", func(context.Context) (net.Conn, error) { return nil, errGone })
	if !errors.Is(err, errGone) || err.Error() != errGone.Error() {
		t.Errorf("a failing first dial: %v, want %v as it is", err, errGone)
	}
}
