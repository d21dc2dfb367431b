package fleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/serve"
)

// tunnelPair connects two ends of a tunnel, each on its own connection to
// one server, as a submitter (a) and a worker (b) are.
func tunnelPair(t testing.TB, cfg tunnelConfig) (a, b *tunnel, ncB *nats.Conn) {
	t.Helper()
	w, _ := netFleet(t)
	nc := submitterConn(t, w)
	ncB, err := connectAs(nc.ConnectedUrl(), RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncB.Close)
	sb, sa, err := newTunnelSubjects(signerOf(t, nc, RoleSubmitter).Key())
	if err != nil {
		t.Fatal(err)
	}
	b, err = newTunnel(ncB, cfg, sb, sa, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ncB.Flush(); err != nil { // b listens before a may send
		t.Fatal(err)
	}
	a, err = newTunnel(nc, cfg, sa, sb, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.publish(frameAck, 0, nil); err != nil { // the hello: b may send
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b, ncB
}

// small makes flow control and chunking work hard.
func small() tunnelConfig {
	return tunnelConfig{window: 1 << 10, chunk: 100, ping: time.Second, dead: 20 * time.Second}
}

func TestTunnelCarriesBytesBothWaysInOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  tunnelConfig
		size int
	}{
		{"small window", small(), 200 << 10},
		{"default", defaultTunnel(), 4 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, b, _ := tunnelPair(t, c.cfg)
			ab, ba := make([]byte, c.size), make([]byte, c.size/2)
			rand.Read(ab)
			rand.Read(ba)
			var wg sync.WaitGroup
			send := func(w *tunnel, p []byte) {
				defer wg.Done()
				for len(p) > 0 { // uneven writes
					n := min(len(p), 1+len(p)%7777)
					if m, err := w.Write(p[:n]); err != nil || m != n {
						t.Errorf("write %d: %d, %v", n, m, err)
						return
					}
					p = p[n:]
				}
				if err := w.CloseWrite(); err != nil {
					t.Error(err)
				}
			}
			wg.Add(2)
			go send(a, ab)
			go send(b, ba)
			var gotAB, gotBA []byte
			var rerr [2]error
			wg.Add(2)
			go func() { defer wg.Done(); gotAB, rerr[0] = io.ReadAll(b) }()
			go func() { defer wg.Done(); gotBA, rerr[1] = io.ReadAll(a) }()
			wg.Wait()
			if rerr[0] != nil || rerr[1] != nil {
				t.Fatal(rerr)
			}
			if sha256.Sum256(gotAB) != sha256.Sum256(ab) || sha256.Sum256(gotBA) != sha256.Sum256(ba) {
				t.Errorf("the bytes changed on the way: %d of %d and %d of %d", len(gotAB), len(ab), len(gotBA), len(ba))
			}
			a.mu.Lock()
			if a.sent-a.peerConsumed > uint64(c.cfg.window) {
				t.Errorf("a sender went past its window")
			}
			a.mu.Unlock()
		})
	}
}

// A sender stops at the window until the reader reads: the reader's
// buffer never holds more than the window.
func TestTunnelFlowControl(t *testing.T) {
	t.Parallel()
	cfg := small()
	a, b, _ := tunnelPair(t, cfg)
	big := bytes.Repeat([]byte("x"), 10*cfg.window)
	done := make(chan error, 1)
	go func() { _, err := a.Write(big); done <- err }()
	// Wait until the sender has used its window; it must then be blocked.
	for {
		a.mu.Lock()
		full := a.sent == uint64(cfg.window)
		a.mu.Unlock()
		if full {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("a write of 10 windows ended before anything was read: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	b.mu.Lock()
	buffered := len(b.rbuf)
	b.mu.Unlock()
	if buffered > cfg.window {
		t.Errorf("the reader buffers %d bytes, more than the window %d", buffered, cfg.window)
	}
	got, err := io.ReadAll(io.LimitReader(b, int64(len(big))))
	if err != nil || len(got) != len(big) {
		t.Fatalf("read %d, %v", len(got), err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTunnelHalfClose(t *testing.T) {
	t.Parallel()
	a, b, _ := tunnelPair(t, defaultTunnel())
	if _, err := a.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if err := a.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("more")); err == nil {
		t.Error("a write after CloseWrite succeeded")
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "request" {
		t.Fatalf("b read %q, %v; want the request then EOF", got, err)
	}
	// The other direction still works after the half-close.
	if _, err := b.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if err := b.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(a)
	if err != nil || string(got) != "answer" {
		t.Fatalf("a read %q, %v; want the answer then EOF", got, err)
	}
}

func TestTunnelClose(t *testing.T) {
	t.Parallel()
	a, b, _ := tunnelPair(t, defaultTunnel())
	// A Read blocked on a closes with it.
	blocked := make(chan error, 1)
	go func() { _, err := a.Read(make([]byte, 10)); blocked <- err }()
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; !errors.Is(err, net.ErrClosed) {
		t.Errorf("a Read blocked on Close: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a second Close: %v", err)
	}
	got, err := io.ReadAll(b) // what was sent before the close, then EOF
	if err != nil || string(got) != "last words" {
		t.Fatalf("b read %q, %v", got, err)
	}
	if _, err := b.Write([]byte("anyone?")); !errors.Is(err, ErrPeerClosed) {
		t.Errorf("a write to a closed peer: %v, want ErrPeerClosed", err)
	}
	<-b.done // b stops listening and pinging: nothing more can come
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Read after the peer closed: %v, want io.EOF", err)
	}
}

func TestTunnelDeadlines(t *testing.T) {
	t.Parallel()
	cfg := small()
	a, b, _ := tunnelPair(t, cfg)
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
	}
	buf := make([]byte, 10)
	// A deadline in the past fails at once; one in the future while blocked.
	a.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := a.Read(buf); !isTimeout(err) {
		t.Errorf("Read past its deadline: %v", err)
	}
	a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := a.Read(buf); !isTimeout(err) {
		t.Errorf("Read until its deadline: %v", err)
	}
	// A later deadline set while a Read waits applies to that Read.
	a.SetReadDeadline(time.Time{})
	res := make(chan error, 1)
	go func() { _, err := a.Read(buf); res <- err }()
	a.SetReadDeadline(time.Now().Add(-time.Second))
	if err := <-res; !isTimeout(err) {
		t.Errorf("Read whose deadline passed while it waited: %v", err)
	}
	// Clearing the deadline makes the tunnel usable again.
	a.SetDeadline(time.Time{})
	if _, err := b.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(a, buf[:2]); err != nil || string(buf[:n]) != "hi" {
		t.Errorf("Read after clearing the deadline: %q, %v", buf[:n], err)
	}
	// A Write blocked on a full window times out, having sent the window.
	a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := a.Write(make([]byte, 3*cfg.window))
	if !isTimeout(err) || n != cfg.window {
		t.Errorf("Write into a window nobody reads: %d, %v; want %d and a timeout", n, err, cfg.window)
	}
	a.SetWriteDeadline(time.Time{})
	if got, err := io.ReadFull(b, make([]byte, cfg.window)); err != nil || got != cfg.window {
		t.Fatalf("read the window: %d, %v", got, err)
	}
	if _, err := a.Write([]byte("after")); err != nil {
		t.Errorf("Write after its deadline was cleared: %v", err)
	}
}

// An end whose peer vanished (its connection gone, nothing said) gives up
// at its dead interval, and its blocked calls return.
func TestTunnelPeerThatVanishesIsGivenUp(t *testing.T) {
	t.Parallel()
	cfg := tunnelConfig{window: 1 << 10, chunk: 100, ping: 50 * time.Millisecond, dead: time.Second}
	a, b, ncB := tunnelPair(t, cfg)
	// Keepalives hold an idle tunnel open past its dead interval.
	deadline := time.Now().Add(2 * cfg.dead)
	for time.Now().Before(deadline) {
		a.SetReadDeadline(time.Now().Add(cfg.dead / 2))
		if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("an idle tunnel with a live peer: %v", err)
		}
	}
	a.SetReadDeadline(time.Time{})
	ncB.Close() // b's process is gone: it sends nothing more, not even a close
	_, err := a.Read(make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "said nothing") {
		t.Fatalf("Read from a vanished peer: %v", err)
	}
	select {
	case <-a.done:
	default:
		t.Error("the tunnel still listens after giving up")
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Error("Write to a vanished peer succeeded")
	}
	_ = b
}

// Bad or missing frames break the tunnel with a sentence; they never
// panic or pass a hole in the stream on.
func TestTunnelRefusesBadFrames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		frames [][]byte
		want   string
	}{
		{"lost frame", [][]byte{appendFrame(nil, frameData, 1, []byte("a")), appendFrame(nil, frameData, 3, []byte("c"))}, "lost data"},
		{"end after a lost frame", [][]byte{appendFrame(nil, frameFin, 2, nil)}, "lost data"},
		{"short", [][]byte{{frameData, 0}}, "shorter than"},
		{"unknown kind", [][]byte{appendFrame(nil, 'z', 0, nil)}, "not a tunnel frame kind"},
		{"empty data", [][]byte{appendFrame(nil, frameData, 1, nil)}, "at least one byte"},
		{"ack of unsent bytes", [][]byte{appendFrame(nil, frameAck, 99, nil)}, "acked 99 bytes"},
		{"over the window", [][]byte{appendFrame(nil, frameData, 1, make([]byte, 2<<10))}, "window"},
		{"data after the end", [][]byte{appendFrame(nil, frameFin, 0, nil), appendFrame(nil, frameData, 1, []byte("x"))}, "after its end"},
		{"close with a reason", [][]byte{appendFrame(nil, frameClose, 0, []byte("the run ended"))}, "closed the tunnel: the run ended"},
		{"close with a raw reason", [][]byte{appendFrame(nil, frameClose, 0, []byte("a\x1b[2Jb"))}, "closed the tunnel: a?[2Jb"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			peer, _ := netFleet(t)
			nc := submitterConn(t, peer)
			up, down, err := newTunnelSubjects(signerOf(t, nc, RoleSubmitter).Key())
			if err != nil {
				t.Fatal(err)
			}
			a, err := newTunnel(nc, small(), down, up, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			for _, f := range c.frames {
				if err := peer.Publish(a.in, f); err != nil {
					t.Fatal(err)
				}
			}
			for err == nil {
				_, err = a.Read(make([]byte, 10))
			}
			if errors.Is(err, io.EOF) { // a frame after the end breaks the tunnel once it comes
				<-a.done
				_, err = a.Read(make([]byte, 10))
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, b := range [][]byte{
		appendFrame(nil, frameData, 1, []byte("x")), appendFrame(nil, frameAck, 5, nil),
		appendFrame(nil, frameClose, 2, []byte("bye")), appendFrame(nil, framePing, 0, nil), {}, {'d'},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := parseFrame(b)
		if err != nil {
			return
		}
		if again := appendFrame(nil, fr.kind, fr.n, fr.data); !bytes.Equal(again, b) {
			t.Fatalf("frame %q reads as %+v, which writes as %q", b, fr, again)
		}
	})
}

// liveRun is a run without a loop behind it: a real event bus on a real
// store, and the controls it was given.
type liveRun struct {
	recControls
	id  string
	bus *loop.Bus
}

func (r *liveRun) RunID() string     { return r.id }
func (r *liveRun) Events() *loop.Bus { return r.bus }

func tunnelAction(run string, i int) *ledger.Action {
	return &ledger.Action{RunID: run, ActionID: fmt.Sprintf("%s-act-%d", run, i), PlanID: run + "-plan", IntentID: "intent",
		Type: ledger.CapabilityCall, FunctionName: "ccos.echo", Arguments: []rtfs.Value{rtfs.String(strings.Repeat("p", 700))},
		Result: rtfs.String("ok"), Success: true, Timestamp: time.Unix(1700000000, int64(i)).UTC()}
}

// The serve client `ralph attach` uses reads and drives a run on another
// machine through a tunnel: its info, its runs, a long NDJSON action
// stream, the live event stream, a control.
func TestServeClientThroughATunnel(t *testing.T) {
	t.Parallel()
	nc, _ := netFleet(t)
	viewer, err := connectAs(nc.ConnectedUrl(), RoleSubmitter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viewer.Close)
	ctx := netCtx(t)
	id := netJob(t).RunID

	st, err := ledger.Open(ledger.Options{Dir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rec := rtfs.NewMapBuilder(3)
	rec.Set(rtfs.Keyword("id"), rtfs.String(id))
	rec.Set(rtfs.Keyword("state"), rtfs.Keyword(loop.StateRunning))
	rec.Set(rtfs.Keyword("goal"), rtfs.String("tunnel"))
	if err := st.KV().Put(ctx, loop.RunKVPrefix+id, rtfs.MapValue(rec.Map())); err != nil {
		t.Fatal(err)
	}
	const n = 3000 // about 3 MB of NDJSON: many windows
	for i := range n {
		if _, err := st.Append(ctx, tunnelAction(id, i)); err != nil {
			t.Fatal(err)
		}
	}
	run := &liveRun{id: id, bus: loop.NewBus(st, id)}
	srv, err := serve.Start(serve.Options{Store: st, Runner: run, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	stop, err := ServeControls(nc, id, run, ControlOptions{Socket: srv.Path(), Owner: string(RoleSubmitter)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	c, err := serve.DialConn(ctx, "run "+id, func(ctx context.Context) (net.Conn, error) {
		return DialRun(ctx, viewer, signerOf(t, viewer, RoleSubmitter), id)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if in := c.Info(); in.StoreID != st.ID() || in.RunID != id {
		t.Errorf("info through the tunnel: %+v, want store %s run %s", in, st.ID(), id)
	}
	runs, err := c.ListRuns()
	if err != nil || len(runs) != 1 || runs[0].ID != id || runs[0].Goal != "tunnel" {
		t.Errorf("runs through the tunnel: %+v, %v", runs, err)
	}
	acts, err := c.ByRun(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != n {
		t.Fatalf("%d actions through the tunnel, want %d", len(acts), n)
	}
	for i, a := range acts {
		want, err := st.GetSeq(uint64(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		if a.Seq != want.Seq || a.ChainHash != want.ChainHash || a.ActionHash != want.ActionHash {
			t.Fatalf("action %d through the tunnel differs from the store's", i+1)
		}
	}

	// The live event stream: the chain so far, then what is appended now.
	evctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := c.Events(evctx, uint64(n-1), true)
	if err != nil {
		t.Fatal(err)
	}
	next := func() loop.Event {
		for e := range events {
			if e.Kind == loop.EventAction {
				return e
			}
		}
		t.Fatal("the event stream ended")
		return loop.Event{}
	}
	if e := next(); e.Action.Seq != n-1 {
		t.Fatalf("first event at seq %d, want %d", e.Action.Seq, n-1)
	}
	next()
	for i := n; i < n+3; i++ {
		if _, err := st.Append(ctx, tunnelAction(id, i)); err != nil {
			t.Fatal(err)
		}
		if e := next(); e.Action.Seq != uint64(i+1) {
			t.Fatalf("live event at seq %d, want %d", e.Action.Seq, i+1)
		}
	}
	cancel()

	if err := c.Control(ctx, "pause", 0); err != nil {
		t.Fatal(err)
	}
	if got := run.ops(); got != "pause" {
		t.Errorf("controls through the tunnel drove %q, want pause", got)
	}
	if got := run.records(); got != "pause tunnel submitter" {
		t.Errorf("the tunnel's control was recorded as %q, want the submitter's pause", got)
	}
	c.Close()

	// A viewer's tunnel reads only: its control is refused in a sentence
	// and reaches nothing.
	vc, err := connectAs(nc.ConnectedUrl(), RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vc.Close)
	ro, err := serve.DialConn(ctx, "run "+id, func(ctx context.Context) (net.Conn, error) {
		return DialRun(ctx, vc, signerOf(t, vc, RoleViewer), id)
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs, err := ro.ListRuns(); err != nil || len(runs) != 1 {
		t.Errorf("a viewer's read through its tunnel: %v, %v", runs, err)
	}
	err = ro.Control(ctx, "abort", 0)
	if err == nil || !strings.Contains(err.Error(), "member viewer (viewer) may not control run "+id+": only its submitter, submitter, may; this tunnel reads only") {
		t.Errorf("a viewer's abort through its tunnel: %v", err)
	}
	if got := run.ops(); got != "pause" {
		t.Errorf("a viewer's tunnel drove %q", got)
	}
	ro.Close()
	raw, err := DialRun(ctx, viewer, signerOf(t, viewer, RoleSubmitter), id)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	stop() // ends every tunnel still open, and waits for them
	if _, err := io.ReadAll(raw); err == nil || !strings.Contains(err.Error(), "the worker stopped serving run "+id) {
		t.Errorf("a tunnel open when the worker stopped: %v", err)
	}
	if _, err := serve.DialConn(ctx, "run "+id, func(ctx context.Context) (net.Conn, error) {
		return DialRun(ctx, viewer, signerOf(t, viewer, RoleSubmitter), id)
	}); !errors.Is(err, ErrNoWorker) ||
		!strings.HasPrefix(err.Error(), "no worker is running run "+id) {
		t.Errorf("attach to a run no worker serves: %v", err)
	}
}

// BenchmarkTunnel measures what a tunnel carries on an embedded node:
//   - bytes: one direction, 4 MiB per op (MB/s);
//   - actions-stream: serve.Client reading a 20k-action run's NDJSON
//     actions through a tunnel (actions/s), and actions-stream-socket the
//     same read through the store's unix socket, its baseline.
func BenchmarkTunnel(b *testing.B) {
	b.Run("bytes", func(b *testing.B) {
		a, r, _ := tunnelPair(b, defaultTunnel())
		buf := make([]byte, 4<<20)
		sink := make([]byte, 64<<10)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			done := make(chan error, 1)
			go func() { _, err := a.Write(buf); done <- err }()
			for got := 0; got < len(buf); {
				n, err := r.Read(sink)
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
	const n = 20_000
	nc, _ := netFleet(b)
	id := netJob(b).RunID
	st, err := ledger.Open(ledger.Options{Dir: filepath.Join(b.TempDir(), "store")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for i := range n {
		if _, err := st.Append(context.Background(), tunnelAction(id, i)); err != nil {
			b.Fatal(err)
		}
	}
	run := &liveRun{id: id, bus: loop.NewBus(st, id)}
	srv, err := serve.Start(serve.Options{Store: st, Runner: run, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	stop, err := ServeControls(nc, id, run, ControlOptions{Socket: srv.Path(), Owner: string(RoleSubmitter)})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	read := func(b *testing.B, c *serve.Client) {
		defer c.Close()
		b.ResetTimer()
		for range b.N {
			acts, err := c.ByRun(id)
			if err != nil || len(acts) != n {
				b.Fatalf("%d actions, %v", len(acts), err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "actions/s")
	}
	b.Run("actions-stream", func(b *testing.B) {
		c, err := serve.DialConn(context.Background(), "run", func(ctx context.Context) (net.Conn, error) {
			return DialRun(ctx, submitterConn(b, nc), signerOf(b, nc, RoleSubmitter), id)
		})
		if err != nil {
			b.Fatal(err)
		}
		read(b, c)
	})
	b.Run("actions-stream-socket", func(b *testing.B) {
		c, err := serve.Dial(context.Background(), st.Dir())
		if err != nil {
			b.Fatal(err)
		}
		read(b, c)
	})
}

// FuzzTunnelFrames feeds a tunnel end any sequence of frames (each input
// byte string is cut into frames at 0xff bytes): it never panics, never
// buffers more than its window, and a Read after it never blocks past its
// deadline.
func FuzzTunnelFrames(f *testing.F) {
	nc, _ := netFleet(f)
	seed := func(frames ...[]byte) []byte { return bytes.Join(frames, []byte{0xff}) }
	f.Add(seed(appendFrame(nil, frameData, 1, []byte("ab")), appendFrame(nil, frameData, 2, []byte("c")), appendFrame(nil, frameFin, 2, nil)))
	f.Add(seed(appendFrame(nil, frameAck, 0, nil), appendFrame(nil, frameClose, 0, []byte("bye"))))
	f.Add(seed(appendFrame(nil, frameData, 2, []byte("x"))))
	f.Add(seed(appendFrame(nil, framePing, 0, nil), []byte{frameData}))
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := small()
		tn, err := newTunnel(nc, cfg, nc.NewInbox(), nc.NewInbox(), true)
		if err != nil {
			t.Fatal(err)
		}
		defer tn.Close()
		for _, fr := range bytes.Split(in, []byte{0xff}) {
			tn.handle(&nats.Msg{Data: fr})
			tn.mu.Lock()
			if len(tn.rbuf) > cfg.window {
				t.Fatalf("buffered %d bytes, window %d", len(tn.rbuf), cfg.window)
			}
			tn.mu.Unlock()
		}
		tn.SetReadDeadline(time.Now().Add(-time.Second))
		for range 3 {
			if _, err := tn.Read(make([]byte, 512)); err != nil {
				break
			}
		}
	})
}
