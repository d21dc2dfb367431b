package fleet

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ralphloop/ralph/loop"
)

// recControls records the controls it was given.
type recControls struct {
	mu       sync.Mutex
	got      []string
	recorded []string // "op via member", each control's record
}

func (r *recControls) Pause()         { r.note(OpPause) }
func (r *recControls) Resume()        { r.note(OpResume) }
func (r *recControls) SkipIteration() { r.note(OpSkip) }
func (r *recControls) Abort()         { r.note(OpAbort) }
func (r *recControls) RecordRequest(_ context.Context, op, via string, by loop.Requester) error {
	r.mu.Lock()
	r.recorded = append(r.recorded, op+" "+via+" "+by.Name)
	r.mu.Unlock()
	return nil
}
func (r *recControls) note(op string) {
	r.mu.Lock()
	r.got = append(r.got, op)
	r.mu.Unlock()
}
func (r *recControls) records() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.recorded, ",")
}
func (r *recControls) ops() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, " ")
}

func TestControlsReachTheRun(t *testing.T) {
	t.Parallel()
	nc, _ := netFleet(t)
	ctx := netCtx(t)
	id := netJob(t).RunID
	rc := &recControls{}
	stop, err := ServeControls(nc, id, rc, ControlOptions{Owner: string(RoleSubmitter)})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, op := range []string{OpPause, OpResume, OpSkip, OpAbort} {
		if err := Control(ctx, submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id, op); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	if got := rc.ops(); got != "pause resume skip abort" {
		t.Errorf("the run got %q", got)
	}
	if got := rc.records(); got != "pause control submitter,resume control submitter,skip control submitter,abort control submitter" {
		t.Errorf("the controls were recorded as %q", got)
	}
	if err := Control(ctx, submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id, "approve"); err == nil || !strings.Contains(err.Error(), "not a control") {
		t.Errorf("an unknown control: %v", err)
	}
	// A bad body sent by hand gets an error answer, and nothing happens.
	m, err := submitterConn(t, nc).RequestWithContext(ctx, CtlSubject(id), []byte("explode"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(m.Data), "error: ") || !strings.Contains(string(m.Data), "pause, resume") {
		t.Errorf("answer to a bad control: %q", m.Data)
	}
	// A tunnel to a run without a socket is refused in a sentence.
	if _, err := DialRun(ctx, submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id); err == nil || !strings.Contains(err.Error(), "no live socket") {
		t.Errorf("a tunnel to a run without a socket: %v", err)
	}
	if got := rc.ops(); got != "pause resume skip abort" {
		t.Errorf("bad requests drove the run: %q", got)
	}
	stop()
	stop() // stopping twice is harmless
	err = Control(ctx, submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id, OpPause)
	if !errors.Is(err, ErrNoWorker) {
		t.Fatalf("a control after stop: %v, want ErrNoWorker", err)
	}
	want := "no worker is running run " + id + "; `ralph runs --nats nats://127.0.0.1:"
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "` shows where it is") {
		t.Errorf("error %q, want %q…", err, want)
	}
	if _, err := DialRun(ctx, submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id); !errors.Is(err, ErrNoWorker) {
		t.Errorf("a tunnel to a run nobody serves: %v, want ErrNoWorker", err)
	}
}

// Controls are signed, and only the run's submitter's are taken (§17):
// the attacks of issue 22 on a run's controls, each refused with its
// sentence, and the owner's control recorded with its name.
func TestControlsAreSignedAndOwned(t *testing.T) {
	t.Parallel()
	nc, _ := netFleet(t)
	ctx := netCtx(t)
	id := netJob(t).RunID
	rc := &recControls{}
	stop, err := ServeControls(nc, id, rc, ControlOptions{Owner: string(RoleSubmitter)})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	sc := submitterConn(t, nc)
	dir, _ := testAuthDirs.Load(nc.ConnectedUrl())
	if _, err := AddMember(dir.(string), "mallory", RoleSubmitter); err != nil {
		t.Fatal(err)
	}
	mallory, err := LoadSigner(CredsPath(dir.(string), "mallory"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddMember(dir.(string), "gone", RoleSubmitter); err != nil {
		t.Fatal(err)
	}
	gone, err := LoadSigner(CredsPath(dir.(string), "gone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := RevokeMember(dir.(string), "gone"); err != nil {
		t.Fatal(err)
	}
	refusedAs := func(what string, err error, want string) {
		t.Helper()
		var r *RefusedError
		if !errors.As(err, &r) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal saying %q", what, err, want)
		}
	}
	// Unsigned, as a bare NATS request.
	m, err := sc.RequestWithContext(ctx, CtlSubject(id), []byte(OpAbort))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Data); got != "refused: the request is not signed by a fleet member; send it with ralph, signed in with --creds FILE" {
		t.Errorf("an unsigned abort: %q", got)
	}
	refusedAs("a viewer's abort", Control(ctx, sc, signerOf(t, nc, RoleViewer), id, OpAbort),
		"member viewer (viewer) may not abort run "+id+": only its submitter, submitter, may")
	refusedAs("another submitter's abort", Control(ctx, sc, mallory, id, OpAbort),
		"member mallory (submitter) may not abort run "+id+": only its submitter, submitter, may")
	refusedAs("a revoked member's abort", Control(ctx, sc, gone, id, OpAbort),
		"which is not a member of this fleet (revoked, or of another fleet)")
	// A signed request sent again (a replay) is refused.
	req := &nats.Msg{Subject: CtlSubject(id), Data: []byte(OpPause)}
	if err := signerOf(t, nc, RoleSubmitter).Sign(req); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"ok", "refused: the request of member submitter was received before (a replay); send a new one"} {
		m, err := sc.RequestMsgWithContext(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != want {
			t.Errorf("send %d of one signed pause: %q, want %q", i+1, m.Data, want)
		}
	}
	// A signature over another body is refused.
	forged := &nats.Msg{Subject: CtlSubject(id), Data: []byte(OpAbort), Header: req.Header}
	forged.Header.Set(HeaderNonce, "0123456789abcdef01234567")
	if m, err := sc.RequestMsgWithContext(ctx, forged); err != nil || !strings.Contains(string(m.Data), "does not match member submitter's key") {
		t.Errorf("a pause's signature on an abort: %q, %v", m.Data, err)
	}
	if got := rc.ops(); got != "pause" {
		t.Errorf("the run got %q; only the owner's one pause should reach it", got)
	}
	if got := rc.records(); got != "pause control submitter" {
		t.Errorf("recorded %q, want the owner's pause", got)
	}
}

func TestControlOfANonRunID(t *testing.T) {
	t.Parallel()
	nc, _ := netFleet(t)
	for _, id := range []string{"", "a.b", "a b", "*", ">"} {
		if err := Control(context.Background(), submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id, OpPause); err == nil || errors.Is(err, ErrNoWorker) {
			t.Errorf("Control(%q): %v, want a refusal", id, err)
		}
	}
}

func TestParseCtl(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body, op, err string
	}{
		{"pause", OpPause, ""},
		{" resume\n", OpResume, ""},
		{"skip", OpSkip, ""},
		{"abort", OpAbort, ""},
		{"tunnel", opTunnel, ""},
		{"", "", "is not a control"},
		{"PAUSE", "", "is not a control"},
		{"pause now", "", "is not a control"},
		{strings.Repeat("x", 65), "", "at most 64 bytes"},
	} {
		op, err := parseCtl([]byte(c.body))
		if op != c.op || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parseCtl(%q) = %q, %v; want %q, %q", c.body, op, err, c.op, c.err)
		}
	}
}

func FuzzParseCtl(f *testing.F) {
	for _, s := range []string{"pause", "tunnel", "", "\x00", "error: x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := parseCtl(b)
		if (op == "") == (err == nil) {
			t.Fatalf("parseCtl(%q) = %q, %v", b, op, err)
		}
	})
}

func FuzzTunnelSubjects(f *testing.F) {
	const key = "UKEY"
	for _, s := range []string{"ok ralph.tunup.UKEY.1 ralph.tundown.UKEY.1", "ok _INBOX.a _INBOX.b", "ok ralph.tunup.UOTHER.1 ralph.tundown.UOTHER.1",
		"ok a a", "ok a.* b", "error: x", "ok  a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		up, down, err := tunnelSubjects(s, key)
		if err == nil && (!plainSubject(up) || !plainSubject(down) || up == down ||
			!strings.HasPrefix(up, "ralph.tunup.UKEY.") || !strings.HasPrefix(down, "ralph.tundown.UKEY.")) {
			t.Fatalf("tunnelSubjects(%q) accepted %q %q", s, up, down)
		}
	})
}

func TestTunnelToASocketThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	nc, _ := netFleet(t)
	id := netJob(t).RunID
	stop, err := ServeControls(nc, id, &recControls{}, ControlOptions{Socket: filepath.Join(t.TempDir(), "gone.sock"), Owner: string(RoleSubmitter)})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, err = DialRun(netCtx(t), submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id)
	if err == nil || !strings.Contains(err.Error(), "live socket of run "+id+" does not answer") {
		t.Errorf("a tunnel to a dead socket: %v", err)
	}
}

// A tunnel the requester never uses (it vanished after the answer) is
// given up by the worker at its dead interval: the worker says so, and
// nothing of it is left running.
func TestWorkerGivesUpAnUnusedTunnel(t *testing.T) {
	t.Parallel()
	nc, _ := netFleet(t)
	ctx := netCtx(t)
	id := netJob(t).RunID
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	cfg := tunnelConfig{window: 1 << 10, chunk: 100, ping: 50 * time.Millisecond, dead: 500 * time.Millisecond, open: 1}
	stop, err := serveControls(nc, id, &recControls{}, ControlOptions{Socket: ln.Addr().String(), Owner: string(RoleSubmitter)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	req := &nats.Msg{Subject: TunnelSubject(id), Data: []byte("tunnel")}
	if err := signerOf(t, nc, RoleSubmitter).Sign(req); err != nil {
		t.Fatal(err)
	}
	m, err := submitterConn(t, nc).RequestMsgWithContext(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	_, down, err := tunnelSubjects(string(m.Data), signerOf(t, nc, RoleSubmitter).Key())
	if err != nil {
		t.Fatal(err)
	}
	// One tunnel is all this run serves at once.
	if _, err := DialRun(ctx, submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id); err == nil || !strings.Contains(err.Error(), "no room for another tunnel (at most 1 at once)") {
		t.Errorf("a tunnel over the limit: %v", err)
	}
	sub, err := submitterConn(t, nc).SubscribeSync(down)
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parseFrame(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if f.kind == frameClose {
			if !strings.Contains(string(f.data), "said nothing") {
				t.Errorf("the worker closed the unused tunnel saying %q", f.data)
			}
			break
		}
	}
	sock := <-accepted
	defer sock.Close()
	if _, err := io.ReadAll(sock); err != nil { // the worker's end of the socket is closed
		t.Errorf("the run's socket after the tunnel was given up: %v", err)
	}
}
