package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// fakeRunner is a run without a loop behind it: a real event bus over the
// store, and the controls it was asked for.
type fakeRunner struct {
	bus *loop.Bus
	id  string
	mu  sync.Mutex
	got []string
}

func (f *fakeRunner) RunID() string     { return f.id }
func (f *fakeRunner) Events() *loop.Bus { return f.bus }
func (f *fakeRunner) Pause()            { f.note("pause") }
func (f *fakeRunner) Resume()           { f.note("resume") }
func (f *fakeRunner) SkipIteration()    { f.note("skip") }
func (f *fakeRunner) Abort()            { f.note("abort") }
func (f *fakeRunner) note(s string) {
	f.mu.Lock()
	f.got = append(f.got, s)
	f.mu.Unlock()
}

func openStore(t testing.TB) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(ledger.Options{Dir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func action(run string, i int, payload string) *ledger.Action {
	return &ledger.Action{RunID: run, ActionID: fmt.Sprintf("%s-act-%d", run, i), PlanID: run + "-plan", IntentID: "intent",
		Type: ledger.CapabilityCall, FunctionName: "ccos.echo", Arguments: []rtfs.Value{rtfs.String(payload)},
		Result: rtfs.String("ok"), Success: true, Timestamp: time.Unix(1700000000, int64(i)).UTC(),
		Metadata: map[string]rtfs.Value{"n": rtfs.Int(int64(i))}}
}

func appendN(t testing.TB, st *ledger.Store, run string, n int, payload string) {
	t.Helper()
	for i := int(st.Head().Seq); n > 0; i, n = i+1, n-1 {
		if _, err := st.Append(context.Background(), action(run, i, payload)); err != nil {
			t.Fatal(err)
		}
	}
}

func start(t testing.TB, o Options) (*Server, *Client) {
	t.Helper()
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := Dial(context.Background(), o.Store.Dir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, c
}

func TestSocketIsOwnerOnly(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s, _ := start(t, Options{Store: st})
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s has mode %v, want a socket with 0600", s.Path(), fi.Mode())
	}
	di, err := os.Stat(st.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("store dir has mode %v, want 0700", di.Mode().Perm())
	}
	s.Close()
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after Close: %v", err)
	}
}

// A connection whose peer is another uid is closed before anything is
// read: the listener is told its owner is someone else.
func TestPeerOfAnotherUIDIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	pl := &peerListener{Listener: ln, uid: os.Getuid() + 1}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") })}
	go hs.Serve(pl)
	t.Cleanup(func() { hs.Close() })
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(conn)
	if len(b) > 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("a peer of another uid got %q, %v; want the connection closed unanswered", b, err)
	}
}

// The real thing, where the test can change uid (as root): another user
// connecting to a socket someone loosened to 0666 gets nothing.
func TestAnotherUserIsRefused(t *testing.T) {
	if os.Getenv("SERVE_PEER_CHILD") != "" {
		conn, err := net.Dial("unix", os.Getenv("SERVE_PEER_CHILD"))
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(0)
		}
		fmt.Fprint(conn, "GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(conn)
		fmt.Printf("answer:%q\n", b)
		os.Exit(0)
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to connect as another user; TestPeerOfAnotherUIDIsRefused covers the check")
	}
	t.Parallel()
	dir, err := os.MkdirTemp("", "serve-peer-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o711)
	bin := filepath.Join(dir, "serve.test") // where the other user can run it
	if b, err := os.ReadFile(os.Args[0]); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatal("copy the test binary:", err)
	}
	st, err := ledger.Open(ledger.Options{Dir: filepath.Join(dir, "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	os.Chmod(st.Dir(), 0o711)
	s, err := Start(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	os.Chmod(s.Path(), 0o666) // loosened by someone: the peer check still holds
	cmd := exec.Command(bin, "-test.run=^TestAnotherUserIsRefused$")
	cmd.Env = append(os.Environ(), "SERVE_PEER_CHILD="+s.Path())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	if !strings.Contains(string(out), `answer:""`) {
		t.Errorf("another user got an answer: %s", out)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	path := SocketPath(st.Dir())
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // a dead server's socket file: nothing answers on it
	if _, err := os.Stat(path); err != nil {
		t.Fatal("no stale socket to replace:", err)
	}
	_, c := start(t, Options{Store: st})
	if c.Info().PID != os.Getpid() {
		t.Errorf("info %+v", c.Info())
	}
	// A socket that answers is never taken over.
	if _, err := Start(Options{Store: st}); err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Errorf("a second server on a live socket: %v", err)
	}
}

func TestWrongDirPermissions(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	if err := os.Chmod(st.Dir(), 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := Start(Options{Store: st})
	var pe *PermissionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "chmod 700 "+st.Dir()) {
		t.Errorf("Start on a 0777 store dir: %v", err)
	}
}

func TestLongStorePathUsesRuntimeDir(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	st, err := ledger.Open(ledger.Options{Dir: long})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := Start(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Path(), filepath.Join(rt, "ralph")+"/") {
		t.Errorf("socket at %s, want under %s/ralph", s.Path(), rt)
	}
	if _, err := Dial(context.Background(), long); err != nil {
		t.Error(err)
	}
}

func TestDialWithoutServer(t *testing.T) {
	t.Parallel()
	if _, err := Dial(context.Background(), t.TempDir()); !errors.Is(err, ErrNotServed) {
		t.Errorf("Dial with no server: %v", err)
	}
}

// Malformed requests get 400 and one sentence; the server goes on.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	appendN(t, st, "r1", 3, "x")
	s, c := start(t, Options{Store: st, Runner: &fakeRunner{bus: loop.NewBus(st, "r1"), id: "r1"}})
	get := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://ralph"+path, strings.NewReader(body))
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var eb errorBody
		if err := json.Unmarshal(b, &eb); err != nil || bytes.Count(b, []byte("\n")) != 1 {
			t.Errorf("%s %s: the answer is not one JSON line: %q", method, path, b)
		}
		return resp.StatusCode, eb.Error
	}
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/v1/actions?from=x", "", "from must be a whole number"},
		{"GET", "/v1/actions?from=5&to=2", "", "to (2) is before from (5)"},
		{"GET", "/v1/actions/abc", "", "whole number"},
		{"GET", "/v1/verify/-1", "", "whole number"},
		{"GET", "/v1/events?from=1e3", "", "from must be a whole number"},
		{"GET", "/v1/runs/r1/predicate", "", "needs ?expr="},
		{"GET", "/v1/runs/r1/predicate?expr=(and", "", "<predicate>:1:1"},
		{"GET", "/v1/action", "", "needs ?id="},
		{"POST", "/v1/control", "{", "must be one JSON object"},
		{"POST", "/v1/control", `{"do":"explode"}`, `"do" must be pause`},
		{"POST", "/v1/control", `{"do":"pause","x":1}`, "unknown field"},
		{"POST", "/v1/control", `{"do":"approve"}`, "does not take plan approvals"},
	} {
		code, body := get(tc.method, tc.path, tc.body)
		if (code != 400 && code != 409) || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %q: %d %q, want 400 naming %q", tc.method, tc.path, tc.body, code, body, tc.want)
		}
	}
	// Raw garbage on the socket: net/http answers 400 itself.
	conn, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "\x00\x01 not http at all\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if !strings.HasPrefix(line, "HTTP/1.1 400") {
		t.Errorf("garbage got %q", line)
	}
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Errorf("the server stopped answering: %v", err)
	}
}

// Everything the client reads equals what the store holds.
func TestClientReadsWhatTheStoreHolds(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	appendN(t, st, "r1", 20, "hello")
	appendN(t, st, "r2", 5, "world")
	_, c := start(t, Options{Store: st})
	var want, got []ledger.Action
	st.Range(1, func(a ledger.Action) error { want = append(want, a); return nil })
	if err := c.Range(1, func(a ledger.Action) error { got = append(got, a); return nil }); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(jsonLines(want), jsonLines(got)); d != "" {
		t.Errorf("Range differs (-store +client):\n%s", d)
	}
	byRun, _ := st.ByRun("r2")
	cr, err := c.ByRun("r2")
	if err != nil || cmp.Diff(jsonLines(byRun), jsonLines(cr)) != "" {
		t.Errorf("ByRun: %v %s", err, cmp.Diff(jsonLines(byRun), jsonLines(cr)))
	}
	a, err := c.GetSeq(7)
	if err != nil || a.Seq != 7 || a.ActionHash != want[6].ActionHash {
		t.Errorf("GetSeq(7): %+v %v", a, err)
	}
	if _, err := c.GetSeq(999); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetSeq(999): %v", err)
	}
	if a, err := c.Get(want[3].ActionID); err != nil || a.Seq != 4 {
		t.Errorf("Get: %v %v", a.Seq, err)
	}
	rep, err := c.Verify(context.Background(), nil)
	if err != nil || rep.Actions != 25 || rep.Head.Seq != 25 {
		t.Errorf("Verify: %+v %v", rep, err)
	}
	p, err := c.VerifyAction(context.Background(), 3)
	if err != nil || !p.OK() {
		t.Errorf("VerifyAction: %+v %v", p, err)
	}
	var ranged []uint64
	c.stream(context.Background(), "/v1/actions?from=5&to=8", func(a ledger.Action) error { ranged = append(ranged, a.Seq); return nil })
	if fmt.Sprint(ranged) != "[5 6 7 8]" {
		t.Errorf("seq range 5–8: %v", ranged)
	}
}

// Verification while a writer appends reports a consistent head.
func TestVerifyWhileAppending(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	appendN(t, st, "r1", 200, "x")
	_, c := start(t, Options{Store: st})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 200; ctx.Err() == nil; i++ {
			st.Append(ctx, action("r1", i, "y"))
		}
	}()
	for i := 0; i < 5; i++ {
		rep, err := c.Verify(context.Background(), nil)
		if err != nil || rep.Actions != rep.Head.Seq || rep.Actions < 200 {
			t.Errorf("Verify while appending: %+v %v", rep, err)
		}
	}
	cancel()
	<-done
}

// A client that stops reading its event stream blocks neither the writer
// nor the server: appends go on, and the stream ends at its write deadline.
func TestSlowClientDoesNotBlock(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	r := &fakeRunner{bus: loop.NewBus(st, "r1"), id: "r1"}
	s, c := start(t, Options{Store: st, Runner: r, WriteTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /v1/events?from=1 HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	big := strings.Repeat("z", 16<<10)
	appendN(t, st, "r1", 1000, big) // ~16 MiB through a socket nobody reads
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Errorf("the server stopped answering: %v", err)
	}
	if err := c.Control(context.Background(), "pause", 0); err != nil {
		t.Error(err)
	}
}

func TestEventsAndControls(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	r := &fakeRunner{bus: loop.NewBus(st, "r1"), id: "r1"}
	var approved []string
	s, c := start(t, Options{Store: st, Runner: r, Approve: func(it int, ok bool) error {
		approved = append(approved, fmt.Sprint(it, ok))
		return nil
	}})
	_ = s
	appendN(t, st, "r1", 3, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := c.Live()
	events := live.Events(ctx, 2)
	var seqs []uint64
	for e := range events {
		if e.Kind == loop.EventAction {
			seqs = append(seqs, e.Action.Seq)
		}
		if len(seqs) == 2 {
			break
		}
	}
	if fmt.Sprint(seqs) != "[2 3]" {
		t.Errorf("events from seq 2: %v", seqs)
	}
	if in, _ := c.Refresh(ctx); in.UIs != 1 || in.RunID != "r1" {
		t.Errorf("info with one attached UI: %+v", in)
	}
	appendN(t, st, "r1", 1, "later")
	for e := range events {
		if e.Kind == loop.EventAction {
			if e.Action.Seq != 4 {
				t.Errorf("next live action has seq %d, want 4", e.Action.Seq)
			}
			break
		}
	}
	for _, f := range []func() error{live.Pause, live.Resume, live.Skip, live.Abort} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	if err := live.Approve(2, true); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.got) != "[pause resume skip abort]" || fmt.Sprint(approved) != "[2 true]" {
		t.Errorf("controls reached the run as %v, approvals %v", r.got, approved)
	}
}

// jsonLines is acts in the ledger's JSON form, which holds every field.
func jsonLines(acts []ledger.Action) []string {
	out := make([]string, len(acts))
	for i := range acts {
		out[i] = string(ledger.AppendJSON(nil, &acts[i]))
	}
	return out
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// GET /v1/bundle is the store's own bundle byte for byte, and one taken
// while a writer appends ends at a signed checkpoint and verifies.
func TestBundleWhileAppending(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	appendN(t, st, "r1", 300, "x")
	_, c := start(t, Options{Store: st})
	var want, got bytes.Buffer
	wn, err := st.ExportBundle(&want)
	if err != nil {
		t.Fatal(err)
	}
	gn, err := c.ExportBundle(&got)
	if err != nil || gn != wn || !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("served bundle (%d actions, %v) differs from the store's (%d actions)", gn, err, wn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 300; ctx.Err() == nil; i++ {
			st.Append(ctx, action("r1", i, "y"))
		}
	}()
	for i := 0; i < 5; i++ {
		var b bytes.Buffer
		n, err := c.ExportBundle(&b)
		if err != nil {
			t.Fatalf("bundle while appending: %v", err)
		}
		rep, err := ledger.ReadBundle(context.Background(), &b, []string{st.VerifierKeyString()}, nil)
		if err != nil || rep.Actions != uint64(n) || n < 300 {
			t.Errorf("a bundle taken while appending (%d actions) does not verify: %+v %v", n, rep, err)
		}
	}
	cancel()
	<-done
	if _, err := c.get(context.Background(), "/v1/bundle?run=r1"); err == nil || !strings.Contains(err.Error(), "whole store") {
		t.Errorf("GET /v1/bundle?run=: %v", err)
	}
}

// The socket serves at most MaxStreams streams at once: the next is told
// why with a 503, and a stream that ends frees its slot.
func TestStreamsAreCapped(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	r := &fakeRunner{bus: loop.NewBus(st, "r1"), id: "r1"}
	s, _ := start(t, Options{Store: st, Runner: r})
	appendN(t, st, "r1", 2, "a")
	open := func(path string) (net.Conn, *http.Response) {
		t.Helper()
		conn, err := net.Dial("unix", s.Path())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return conn, resp
	}
	var conns []net.Conn
	for i := 0; i < MaxStreams; i++ {
		conn, resp := open("/v1/events?from=1")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %s", i+1, resp.Status)
		}
		conns = append(conns, conn)
	}
	for _, path := range []string{"/v1/events?from=1", "/v1/actions", "/v1/bundle"} {
		_, resp := open(path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "already serves 64 streams") {
			t.Errorf("%s beyond the cap: %s %s", path, resp.Status, body)
		}
	}
	conns[0].Close()
	eventually.True(t, "a closed stream freeing its slot", func() bool {
		_, resp := open("/v1/actions")
		return resp.StatusCode == http.StatusOK
	})
}

// A store its holder is closing (its socket gone, Badger's lock not yet
// released) is waited for, so a run that ends while it is read stays
// readable; one held longer than HeldWait is the held-store error.
func TestOpenReaderWaitsForAClosingHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := ledger.Open(ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), &ledger.Action{Type: ledger.RunStarted, RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the holder finishing its close
		closed <- st.Close()
	}()
	r, err := OpenReader(context.Background(), dir, ledger.Options{}, io.Discard)
	if err != nil {
		t.Fatalf("OpenReader while the holder closes: %v", err)
	}
	defer r.Close()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	acts, err := r.ByRun("r")
	if err != nil || len(acts) != 1 {
		t.Fatalf("run r: %d actions, %v; want its one action", len(acts), err)
	}
}
