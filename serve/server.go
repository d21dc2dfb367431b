package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// Runner is the live run a server drives: *loop.Runner.
type Runner interface {
	RunID() string
	Events() *loop.Bus
	Pause()
	Resume()
	SkipIteration()
	Abort()
}

// Options configure a Server.
type Options struct {
	// Store is the store this process holds open for writing.
	Store *ledger.Store
	// Runner is the run this process drives; nil when it only holds the
	// store (the controls and the event stream then answer 409).
	Runner Runner
	// Approve answers the plan awaiting approval for iteration, from an
	// attached UI; nil when this run takes no approvals from the socket.
	Approve func(iteration int, ok bool) error
	// LogFile is where the run's output goes when no terminal shows it.
	LogFile string
	// LocalUI says this process shows the run in its own UI (counted in
	// Info.UIs).
	LocalUI bool
	// Logger receives the server's own problems (a handler's panic).
	Logger *slog.Logger
	// RefuseRunPeers turns away every peer that is a process this ralph
	// started or one of theirs (the run's agent and what it runs, which
	// Landlock cannot keep from connecting to a pathname socket): set when
	// the run is sandboxed, so that nothing inside reads the store or
	// steers the run through its socket. The user's own commands connect
	// as before.
	RefuseRunPeers bool
	// Batch is the batch this process drives (Hold), "" for none: its own
	// run and its task runs that are running are this process's (Info).
	Batch string
	// WriteTimeout bounds each write to a client; a client that does not
	// read for this long loses its stream. Default 10s.
	WriteTimeout time.Duration
}

// Server serves one store on its socket until Close.
type Server struct {
	o      Options
	path   string
	ln     net.Listener
	hs     *http.Server
	ctx    context.Context // ends every stream on Close
	cancel context.CancelFunc
	done   chan struct{} // Serve returned

	attached atomic.Int32  // attached UIs with an open event stream
	slots    chan struct{} // one per open stream, at most MaxStreams
	mu       sync.Mutex
	streams  map[*stream]struct{}
	logFile  string // Options.LogFile until SetOutput
	localUI  bool
}

// MaxStreams is how many streams (events, actions, bundles) the socket
// serves at once; one more is answered 503, so that many readers cannot
// slow the run that writes the store.
const MaxStreams = 64

// openStream takes one of the MaxStreams slots for a streaming answer, or
// answers 503 and returns false when all are taken. release gives it back.
func (s *Server) openStream(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, true
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the store's socket already serves %d streams, its most at once; "+
			"close an attached UI or a following reader of this store, or try again when one has ended", MaxStreams))
		return nil, false
	}
}

// stream is one open event stream, for Close to let it catch up.
type stream struct{ last atomic.Uint64 }

// Start serves o.Store on its socket (SocketPath) in the background. The
// store directory must be the user's own and closed to others.
func Start(o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("serve.Start needs a Store")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	path := SocketPath(o.Store.Dir())
	warning, err := checkDir(filepath.Dir(path), filepath.Dir(path) != absDir(o.Store.Dir()))
	if err != nil {
		return nil, err
	}
	if warning != "" {
		o.Logger.Warn(warning)
	}
	var refuse func(int) bool
	if o.RefuseRunPeers {
		refuse = func(pid int) bool {
			if !sandboxedPeer(pid) {
				return false
			}
			o.Logger.Warn("the run's socket refused a connection from a process of the run (the sandbox keeps the store and the controls from it)", "pid", pid)
			return true
		}
	}
	ln, err := listen(path, refuse)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{o: o, path: path, ln: ln, ctx: ctx, cancel: cancel, done: make(chan struct{}), streams: map[*stream]struct{}{},
		slots:   make(chan struct{}, MaxStreams),
		logFile: o.LogFile, localUI: o.LocalUI}
	s.hs = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if pc, ok := c.(*peerConn); ok {
				return context.WithValue(ctx, peerPIDKey{}, pc.pid)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)}
	go func() {
		defer close(s.done)
		if err := s.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("the store's socket stopped serving", "socket", path, "err", err)
		}
	}()
	return s, nil
}

func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// SetOutput says where the run's output goes now: whether this process
// shows it in its own UI, and the log file (a foreground run whose UI
// detached goes on writing there).
func (s *Server) SetOutput(localUI bool, logFile string) {
	s.mu.Lock()
	s.localUI, s.logFile = localUI, logFile
	s.mu.Unlock()
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close lets open event streams deliver what the chain holds now (up to a
// second), then ends every stream and request and removes the socket.
func (s *Server) Close() error {
	head := s.o.Store.Head().Seq
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !s.caughtUp(head); {
		time.Sleep(10 * time.Millisecond)
	}
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.hs.Shutdown(ctx)
	if err != nil {
		err = s.hs.Close()
	}
	<-s.done
	return err
}

func (s *Server) caughtUp(head uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		if st.last.Load() < head {
			return false
		}
	}
	return true
}

// info says who serves the store and how its run stands.
func (s *Server) info() Info {
	s.mu.Lock()
	logFile, localUI := s.logFile, s.localUI
	s.mu.Unlock()
	in := Info{PID: os.Getpid(), Store: absDir(s.o.Store.Dir()), StoreID: s.o.Store.ID(), VerifierKey: s.o.Store.VerifierKeyString(), LogFile: logFile, Head: s.o.Store.Head().Seq,
		UIs: int(s.attached.Load()), Approves: s.o.Approve != nil, Batch: s.o.Batch}
	if localUI {
		in.UIs++
	}
	if r := s.o.Runner; r != nil {
		in.RunID, in.State = r.RunID(), r.Events().State()
	}
	return in
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.info()) })
	mux.HandleFunc("GET /v1/runs", s.runs)
	mux.HandleFunc("GET /v1/runs/{id}", s.run)
	mux.HandleFunc("GET /v1/runs/{id}/history", s.history)
	mux.HandleFunc("GET /v1/runs/{id}/predicate", s.predicate)
	mux.HandleFunc("GET /v1/actions", s.actions)
	mux.HandleFunc("GET /v1/actions/{seq}", s.action)
	mux.HandleFunc("GET /v1/action", s.actionByID)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("GET /v1/verify", s.verify)
	mux.HandleFunc("POST /v1/verify", s.verify)
	mux.HandleFunc("GET /v1/bundle", s.bundle)
	mux.HandleFunc("GET /v1/checkpoint", s.checkpoint)
	mux.HandleFunc("GET /v1/prove/{seq}", s.prove)
	mux.HandleFunc("GET /v1/verify/{seq}", s.verifyAction)
	mux.HandleFunc("POST /v1/control", s.control)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s %s; see docs/live.md for the API", r.Method, r.URL.Path))
	})
	return s.recoverer(mux)
}

// recoverer answers 500 for a handler that panicked, and logs it.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.o.Logger.Error("internal error serving the store", "request", r.Method+" "+r.URL.String(), "panic", v, "stack", string(debug.Stack()))
				writeError(w, http.StatusInternalServerError, fmt.Sprintf("internal error: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode the answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(errorBody{Error: msg}) // a string cannot fail to marshal
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// uintParam reads the whole number query parameter name (def when absent).
func uintParam(r *http.Request, name string, def uint64) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s must be a whole number, not %q", name, v)
	}
	return n, nil
}

// deadlineWriter sets a write deadline before each write, so a client that
// stops reading ends its own request and nothing else.
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) *deadlineWriter {
	return &deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) // unsupported only on a non-net.Conn writer (tests)
	return d.w.Write(p)
}

func (d *deadlineWriter) Flush() error {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.rc.Flush()
}

// ndjson starts an NDJSON answer: a 64 KiB buffer over a writer with
// deadlines.
func (s *Server) ndjson(w http.ResponseWriter) (*bufio.Writer, *deadlineWriter) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	dw := newDeadlineWriter(w, s.o.WriteTimeout)
	return bufio.NewWriterSize(dw, 64<<10), dw
}

// Hold serves st on its socket for a process that drives batch, not one
// run (its task runs are not steered from there: no controls),
// so that every other ralph command reads the store while it is held;
// refusePeers is Options.RefuseRunPeers. A socket that cannot be made is
// a warning on errOut, and the store goes unserved. The func it returns
// stops serving; call it before the store is closed.
func Hold(st *ledger.Store, batch string, refusePeers bool, errOut io.Writer) (stop func()) {
	srv, err := Start(Options{Store: st, Batch: batch, RefuseRunPeers: refusePeers})
	if err != nil {
		fmt.Fprintf(errOut, "ralph: other commands cannot read this store while it is held: %v\n", err)
		return func() {}
	}
	return func() { _ = srv.Close() } // its streams end with the holder; the holder's own end is what it reports
}
