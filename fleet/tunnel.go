package fleet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A tunnel carries one byte stream each way between two NATS clients, on
// two subjects: each end subscribes to its own subject ("in") and
// publishes to the other's ("out"). It is how `ralph attach --nats` and
// the other remote views reach a run's serve socket on a worker.
//
// Every message is one frame: a kind byte, a big-endian uint64, then the
// kind's payload.
//
//	'd' seq, bytes     data; seq counts data frames from 1
//	'a' consumed       the sender has read this many bytes in all (window ack)
//	'f' seq            the sender writes no more; seq is its last data frame (half-close)
//	'c' seq, reason    the sender has closed the tunnel (reason "" = a clean close)
//	'p' 0              keepalive
//
// Core NATS keeps the order of messages from one publisher to one
// subscriber but may drop them (a slow consumer, a reconnect): the data
// sequence numbers make any loss an error instead of a silent hole in the
// stream. A sender may have at most window bytes not yet acked by the
// reader, which bounds what the receiving end buffers; the reader acks once
// it has read a quarter of the window. Each end sends a keepalive when it
// has sent nothing for a ping interval, and gives the tunnel up when it has
// heard nothing for the dead interval: a vanished peer never leaks the
// goroutines and buffers of the other end.
const (
	frameData  = 'd'
	frameAck   = 'a'
	frameFin   = 'f'
	frameClose = 'c'
	framePing  = 'p'
	frameHead  = 9
)

type frame struct {
	kind byte
	n    uint64 // seq (d, f, c) or bytes consumed (a)
	data []byte // bytes (d) or reason (c)
}

// parseFrame reads one tunnel message; anything else is an error.
func parseFrame(b []byte) (frame, error) {
	if len(b) < frameHead {
		return frame{}, fmt.Errorf("a tunnel frame of %d bytes is shorter than its %d-byte head", len(b), frameHead)
	}
	f := frame{kind: b[0], n: binary.BigEndian.Uint64(b[1:frameHead]), data: b[frameHead:]}
	switch f.kind {
	case frameData:
		if f.n == 0 || len(f.data) == 0 {
			return frame{}, errors.New("a tunnel data frame needs a sequence number from 1 and at least one byte")
		}
	case frameAck, frameFin, framePing:
		if len(f.data) != 0 {
			return frame{}, fmt.Errorf("a tunnel frame of kind %q carries %d bytes it should not", f.kind, len(f.data))
		}
	case frameClose:
	default:
		return frame{}, fmt.Errorf("%q is not a tunnel frame kind", f.kind)
	}
	return f, nil
}

func appendFrame(dst []byte, kind byte, n uint64, data []byte) []byte {
	dst = append(dst, kind)
	dst = binary.BigEndian.AppendUint64(dst, n)
	return append(dst, data...)
}

// tunnelConfig sizes a tunnel; defaultTunnel is what DialRun and
// ServeControls use.
type tunnelConfig struct {
	window int           // bytes a sender may have unacked
	chunk  int           // the largest data frame's payload
	ping   time.Duration // keepalive after this much silence from this end
	dead   time.Duration // give up after this much silence from the peer
	open   int           // tunnels one run serves at once
}

func defaultTunnel() tunnelConfig {
	return tunnelConfig{window: 256 << 10, chunk: 32 << 10, ping: 5 * time.Second, dead: 30 * time.Second, open: 64}
}

// ErrPeerClosed is a write's error once the other end closed the tunnel.
var ErrPeerClosed = errors.New("the other end closed the tunnel")

// tunnelAddr is an end of a tunnel: the subject it listens on.
type tunnelAddr string

func (a tunnelAddr) Network() string { return "nats" }
func (a tunnelAddr) String() string  { return string(a) }

// tunnel is one end of a tunnel, a net.Conn.
type tunnel struct {
	nc       *nats.Conn
	cfg      tunnelConfig
	in, out  string
	sub      *nats.Subscription
	wmu      sync.Mutex // orders data, fin and close frames: one Write at a time
	amu      sync.Mutex // orders acks
	teardown sync.Once
	done     chan struct{} // closed when the tunnel is torn down

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change of state below
	// receiving
	rbuf     []byte
	rseq     uint64 // last data frame received
	consumed uint64 // bytes read by Read
	acked    uint64 // last consumed count acked to the peer
	rfin     bool   // the peer sends no more
	finErr   error  // what Read says after rbuf when rfin (nil: io.EOF)
	// sending
	ready        bool   // the peer listens: it may be sent data
	wseq         uint64 // last data frame sent
	sent         uint64 // bytes sent
	peerConsumed uint64 // bytes the peer has acked
	wfin         bool   // CloseWrite was called
	peerClosed   bool   // the peer closed the whole tunnel
	// both
	broken    error // the tunnel failed; every call returns it
	closed    bool  // Close was called
	lastHeard time.Time
	lastSent  time.Time
	rdl, wdl  time.Time
	rtm, wtm  *time.Timer
}

// newTunnel makes one end listening on in and sending to out; ready says
// whether the peer already listens on out. It starts the keepalive.
func newTunnel(nc *nats.Conn, cfg tunnelConfig, in, out string, ready bool) (*tunnel, error) {
	if max := int(nc.MaxPayload()) - frameHead - 64; max > 0 && cfg.chunk > max {
		cfg.chunk = max
	}
	now := time.Now()
	t := &tunnel{nc: nc, cfg: cfg, in: in, out: out, ready: ready, done: make(chan struct{}),
		changed: make(chan struct{}), lastHeard: now, lastSent: now}
	// A frame that comes at once waits for t.sub to be set: handle and
	// fail take t.mu before anything uses it.
	t.mu.Lock()
	sub, err := nc.Subscribe(in, t.handle)
	t.sub = sub
	t.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("listen on the tunnel's subject %s: %w", in, err)
	}
	go t.keepalive()
	return t, nil
}

// notify wakes every waiter; t.mu is held.
func (t *tunnel) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// wait releases t.mu until the state changes; t.mu is held.
func (t *tunnel) wait() {
	ch := t.changed
	t.mu.Unlock()
	<-ch
	t.mu.Lock()
}

func (t *tunnel) publish(kind byte, n uint64, data []byte) error {
	err := t.nc.Publish(t.out, appendFrame(make([]byte, 0, frameHead+len(data)), kind, n, data))
	if err != nil {
		return fmt.Errorf("send on the tunnel: %w", err)
	}
	t.mu.Lock()
	t.lastSent = time.Now()
	t.mu.Unlock()
	return nil
}

// handle takes one frame from the peer.
func (t *tunnel) handle(m *nats.Msg) {
	f, err := parseFrame(m.Data)
	if err != nil {
		t.fail(fmt.Errorf("the other end of the tunnel sent a bad frame: %w", err))
		return
	}
	t.mu.Lock()
	if t.closed || t.broken != nil {
		t.mu.Unlock()
		return
	}
	t.lastHeard, t.ready = time.Now(), true
	switch f.kind {
	case frameData:
		switch {
		case t.rfin:
			err = errors.New("the other end of the tunnel sent data after its end")
		case f.n != t.rseq+1:
			err = fmt.Errorf("the tunnel lost data (frame %d came after frame %d)", f.n, t.rseq)
		case len(t.rbuf)+len(f.data) > t.cfg.window:
			err = fmt.Errorf("the other end of the tunnel sent more than the %d-byte window", t.cfg.window)
		default:
			t.rseq = f.n
			t.rbuf = append(t.rbuf, f.data...)
		}
	case frameAck:
		if f.n > t.sent {
			err = fmt.Errorf("the other end of the tunnel acked %d bytes of the %d sent", f.n, t.sent)
		} else if f.n > t.peerConsumed {
			t.peerConsumed = f.n
		}
	case frameFin, frameClose:
		if f.n != t.rseq {
			err = fmt.Errorf("the tunnel lost data (it ended after frame %d, %d arrived)", f.n, t.rseq)
			break
		}
		t.rfin = true
		if f.kind == frameClose {
			t.peerClosed = true
			if len(f.data) > 0 {
				t.finErr = fmt.Errorf("the other end closed the tunnel: %s", printable(f.data, 200))
			}
		}
	}
	t.notify()
	peerGone := t.peerClosed
	t.mu.Unlock()
	switch {
	case err != nil:
		t.fail(err)
	case peerGone: // nothing more will come: stop listening and pinging
		t.stop()
	}
}

// printable is at most max bytes of b with anything but printable ASCII
// replaced, for a peer's words in an error.
func printable(b []byte, max int) string {
	var sb strings.Builder
	for i, c := range b {
		if i == max {
			sb.WriteString("…")
			break
		}
		if c < ' ' || c > '~' {
			c = '?'
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// fail breaks the tunnel with err: every call returns it from now on, the
// peer is told why, and this end stops listening.
func (t *tunnel) fail(err error) {
	t.mu.Lock()
	if t.closed || t.broken != nil {
		t.mu.Unlock()
		return
	}
	t.broken = err
	seq, tell := t.wseq, !t.peerClosed
	t.mu.Unlock()
	t.stop() // wakes the waiters once this end no longer listens
	if tell {
		// Best effort: the peer may be what failed, and its own keepalive
		// ends its side otherwise.
		_ = t.publish(frameClose, seq, []byte(err.Error()))
	}
}

// stop ends listening and the keepalive.
func (t *tunnel) stop() {
	t.teardown.Do(func() {
		// Unsubscribe fails only when the connection is closed, which
		// ends the subscription as well.
		_ = t.sub.Unsubscribe()
		close(t.done)
		t.mu.Lock()
		for _, tm := range []*time.Timer{t.rtm, t.wtm} {
			if tm != nil {
				tm.Stop()
			}
		}
		t.notify()
		t.mu.Unlock()
	})
}

func (t *tunnel) keepalive() {
	tick := time.NewTicker(max(t.cfg.ping/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case now := <-tick.C:
			t.mu.Lock()
			quiet, idle := now.Sub(t.lastHeard), now.Sub(t.lastSent)
			t.mu.Unlock()
			switch {
			case quiet > t.cfg.dead:
				t.fail(fmt.Errorf("the other end of the tunnel (%s) said nothing for %v; it is gone", t.out, t.cfg.dead))
				return
			case idle >= t.cfg.ping:
				if err := t.publish(framePing, 0, nil); err != nil {
					t.fail(err)
					return
				}
			}
		}
	}
}

func timeoutError() error { return os.ErrDeadlineExceeded }

func passed(dl time.Time) bool { return !dl.IsZero() && !time.Now().Before(dl) }

// Read reads what the peer wrote, in order.
func (t *tunnel) Read(p []byte) (int, error) {
	t.mu.Lock()
	for {
		switch {
		case t.closed:
			t.mu.Unlock()
			return 0, net.ErrClosed
		case t.broken != nil:
			err := t.broken
			t.mu.Unlock()
			return 0, err
		case len(p) == 0:
			t.mu.Unlock()
			return 0, nil
		case len(t.rbuf) > 0:
			n := copy(p, t.rbuf)
			t.rbuf = t.rbuf[n:]
			if len(t.rbuf) == 0 {
				t.rbuf = nil // let the buffer go between bursts
			}
			t.consumed += uint64(n)
			ack := !t.rfin && t.consumed-t.acked >= uint64(t.cfg.window/4)
			t.mu.Unlock()
			if ack {
				t.sendAck()
			}
			return n, nil
		case t.rfin:
			err := t.finErr
			t.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return 0, err
		case passed(t.rdl):
			t.mu.Unlock()
			return 0, timeoutError()
		}
		t.wait()
	}
}

// sendAck tells the peer how much has been read, at most once per count
// and in increasing order.
func (t *tunnel) sendAck() {
	t.amu.Lock()
	defer t.amu.Unlock()
	t.mu.Lock()
	n := t.consumed
	if n <= t.acked || t.broken != nil || t.closed {
		t.mu.Unlock()
		return
	}
	t.acked = n
	t.mu.Unlock()
	if err := t.publish(frameAck, n, nil); err != nil {
		t.fail(err)
	}
}

// Write sends p, in frames within the peer's window.
func (t *tunnel) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if len(p) == 0 {
		t.mu.Lock()
		defer t.mu.Unlock()
		return 0, t.writeErr()
	}
	total := 0
	for len(p) > 0 {
		t.mu.Lock()
		var credit uint64
		for {
			err := t.writeErr()
			if err != nil {
				t.mu.Unlock()
				return total, err
			}
			if t.ready {
				credit = t.peerConsumed + uint64(t.cfg.window) - t.sent
			}
			if credit > 0 {
				break
			}
			t.wait()
		}
		n := min(uint64(len(p)), credit, uint64(t.cfg.chunk))
		t.wseq++
		t.sent += n
		seq := t.wseq
		t.mu.Unlock()
		if err := t.publish(frameData, seq, p[:n]); err != nil {
			t.fail(err)
			return total, err
		}
		p, total = p[n:], total+int(n)
	}
	return total, nil
}

// writeErr is why nothing can be written now, or nil; t.mu is held.
func (t *tunnel) writeErr() error {
	switch {
	case t.closed:
		return net.ErrClosed
	case t.broken != nil:
		return t.broken
	case t.wfin:
		return errors.New("write on a tunnel after CloseWrite")
	case t.peerClosed:
		return ErrPeerClosed
	case passed(t.wdl):
		return timeoutError()
	}
	return nil
}

// CloseWrite ends this end's stream: the peer reads io.EOF once it has
// read everything sent before. Reading goes on.
func (t *tunnel) CloseWrite() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	if err := t.writeErr(); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.mu.Unlock()
		return err
	}
	t.wfin = true
	seq := t.wseq
	t.notify()
	t.mu.Unlock()
	if err := t.publish(frameFin, seq, nil); err != nil {
		t.fail(err)
		return err
	}
	return nil
}

// Close closes both directions and tells the peer; a Read or Write
// blocked on the tunnel returns net.ErrClosed.
func (t *tunnel) Close() error { return t.closeWith("") }

// closeWith is Close telling the peer why: its reads end with reason
// instead of io.EOF once it has read what was sent.
func (t *tunnel) closeWith(reason string) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return net.ErrClosed
	}
	t.closed = true
	tell := t.broken == nil && !t.peerClosed
	t.notify()
	t.mu.Unlock()
	if tell {
		t.wmu.Lock() // a Write in progress ends first: the close frame follows its data
		t.mu.Lock()
		seq := t.wseq
		t.mu.Unlock()
		// Best effort: a peer that misses it gives up at its dead interval.
		_ = t.publish(frameClose, seq, []byte(reason))
		t.wmu.Unlock()
	}
	t.stop()
	return nil
}

func (t *tunnel) LocalAddr() net.Addr  { return tunnelAddr(t.in) }
func (t *tunnel) RemoteAddr() net.Addr { return tunnelAddr(t.out) }

func (t *tunnel) SetDeadline(dl time.Time) error {
	t.SetReadDeadline(dl)
	return t.SetWriteDeadline(dl)
}

func (t *tunnel) SetReadDeadline(dl time.Time) error {
	t.setDeadline(&t.rdl, &t.rtm, dl)
	return nil
}

func (t *tunnel) SetWriteDeadline(dl time.Time) error {
	t.setDeadline(&t.wdl, &t.wtm, dl)
	return nil
}

// setDeadline sets a deadline and a timer that wakes the waiters when it
// passes; waiters compare the time themselves, so a stale timer's wake-up
// is harmless.
func (t *tunnel) setDeadline(at *time.Time, tm **time.Timer, dl time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	*at = dl
	if *tm != nil {
		(*tm).Stop()
		*tm = nil
	}
	if d := time.Until(dl); !dl.IsZero() && d > 0 {
		*tm = time.AfterFunc(d, func() {
			t.mu.Lock()
			t.notify()
			t.mu.Unlock()
		})
	}
	t.notify()
}

// newTunnelSubjects are the subjects of a new tunnel opened by the member
// whose public key is key: up (the member sends, the worker listens) and
// down (the worker sends, the member listens), both under the member's key
// and a random id. NATS lets only that member publish on its up subjects
// and listen on its down subjects (RolePermissions), so no third party
// injects a frame into the tunnel or reads it, and what comes up the
// tunnel is the member's, as the worker credits it.
func newTunnelSubjects(key string) (up, down string, err error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", "", err
	}
	h := hex.EncodeToString(id[:])
	return subjectTunnelUp + key + "." + h, subjectTunnelDown + key + "." + h, nil
}

// tunnelSubjects reads the reply to a tunnel request signed with key:
// "ok UP DOWN", two subjects of a tunnel of that key's (newTunnelSubjects).
func tunnelSubjects(reply, key string) (up, down string, err error) {
	f := strings.Fields(reply)
	if len(f) != 3 || f[0] != "ok" || !plainSubject(f[1]) || !plainSubject(f[2]) || f[1] == f[2] {
		return "", "", fmt.Errorf("the worker's answer to a tunnel request is not \"ok UP DOWN\" with two subjects: %.80q", reply)
	}
	if !strings.HasPrefix(f[1], subjectTunnelUp+key+".") || !strings.HasPrefix(f[2], subjectTunnelDown+key+".") {
		return "", "", fmt.Errorf("the worker's answer to a tunnel request names subjects that are not this member's tunnel (%s…): %.120q", subjectTunnelUp+shortKey(key), reply)
	}
	return f[1], f[2], nil
}

// plainSubject says whether s is a subject one can publish to: tokens of
// printable ASCII without wildcards, at most 256 bytes.
func plainSubject(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			if tok[i] <= ' ' || tok[i] > '~' {
				return false
			}
		}
	}
	return true
}

// DialRun opens a tunnel to the serve socket of run runID on the worker
// running it: a net.Conn over NATS that serve.DialConn speaks HTTP
// through. When no worker serves the run the error is ErrNoWorker.
func DialRun(ctx context.Context, nc *nats.Conn, signer *Signer, runID string) (net.Conn, error) {
	return dialRun(ctx, nc, signer, runID, defaultTunnel())
}

func dialRun(ctx context.Context, nc *nats.Conn, signer *Signer, runID string, cfg tunnelConfig) (net.Conn, error) {
	reply, err := request(ctx, nc, signer, runID, opTunnel)
	if err != nil {
		return nil, err
	}
	up, down, err := tunnelSubjects(reply, signer.Key())
	if err != nil {
		return nil, err
	}
	t, err := newTunnel(nc, cfg, down, up, true)
	if err != nil {
		return nil, err
	}
	// The subscription is only queued on the connection: until the
	// server has it, a frame the worker sends (a close, when the worker
	// stops) would be dropped. A round trip makes sure it has it.
	fctx, cancel := context.WithTimeout(ctx, ctlTimeout)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		t.fail(err)
		return nil, fmt.Errorf("open a tunnel to run %s: %w", runID, err)
	}
	// The worker sends nothing else until it hears from this end, which
	// now listens.
	if err := t.publish(frameAck, 0, nil); err != nil {
		t.fail(err)
		return nil, err
	}
	return t, nil
}
