package web

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/serve"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Source is where the pages read and what the controls steer: a local
// store or a fleet (package runsource).
type Source interface {
	mcpserver.Source
	// Steer sends do (pause, resume, skip, abort, approve, decline) to the
	// run, which must be running now; iteration names the plan answered.
	Steer(ctx context.Context, r *mcpserver.Run, do string, iteration int) error
	// Events streams the running run's events from the chain's seq from;
	// the channel closes when the run's process goes or ctx ends.
	Events(ctx context.Context, r *mcpserver.Run, from uint64) (<-chan loop.Event, error)
	// Steerable says whether r takes controls now; Approves whether it
	// takes plan approvals from a page.
	Steerable(r *mcpserver.Run) bool
	Approves(r *mcpserver.Run) bool
}

// storeOpener is a Source over one store: the runs page reads the runs and
// who serves them through one open.
type storeOpener interface {
	Open(ctx context.Context) (serve.Reader, error)
}

// fleetViewer is a Source over a fleet: the fleet page reads its runs and
// workers.
type fleetViewer interface {
	Overview(ctx context.Context) ([]fleet.RunState, []fleet.WorkerState, error)
}

// Options configure a Server.
type Options struct {
	Source Source
	// Token is what a client shows to be let in (?token=, Bearer).
	Token string
	// Addr is the address the server listens on (its port names the
	// session cookie, its host is an accepted Host header).
	Addr string
	// Where says what the pages read, in words ("store .ralph", "the fleet
	// at nats://…").
	Where   string
	Version string
	// Log takes what goes wrong in a request that is not the client's.
	Log *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// SSEBuffer is how many events a browser may fall behind before it is
	// sent a snapshot instead (default 256).
	SSEBuffer int
}

// Server is ralph web: its pages, streams and forms.
type Server struct {
	o        Options
	pages    map[string]*template.Template
	sessions *sessions
	cookie   string
	hosts    []string
	verified *verifyCache
	window   uint64 // firstWindow; smaller in tests
	hubs     hubs
}

// New makes the server; Handler serves it.
func New(o Options) (*Server, error) {
	if len(o.Token) < minToken {
		return nil, fmt.Errorf("the token is %d characters; use one of %d or more", len(o.Token), minToken)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.SSEBuffer <= 0 {
		o.SSEBuffer = 256
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("address %q is not HOST:PORT: %w", o.Addr, err)
	}
	s := &Server{o: o, pages: pages, sessions: newSessions(maxSessions), cookie: "ralph_web_" + port,
		hosts: []string{"localhost", "127.0.0.1", "::1"}, verified: &verifyCache{}, window: firstWindow}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		s.hosts = append(s.hosts, strings.ToLower(host))
	} else {
		s.hosts = nil // every name: off loopback it is TLS, whose certificate names the host
	}
	return s, nil
}

// Handler is every route, behind the Host check and the token.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets") // "assets" is embedded above
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", assetHandler(http.FileServerFS(assets))))
	mux.HandleFunc("GET /{$}", s.runsPage)
	mux.HandleFunc("GET /runs/{id}", s.runPage)
	mux.HandleFunc("GET /runs/{id}/events", s.events)
	mux.HandleFunc("GET /runs/{id}/diff", s.diffPage)
	mux.HandleFunc("GET /runs/{id}/verify", s.verifyPage)
	mux.HandleFunc("POST /runs/{id}/control", s.control)
	mux.HandleFunc("POST /runs/{id}/whatif", s.whatIf)
	mux.HandleFunc("GET /fleet", s.fleetPage)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("there is no page at %s; the runs page is /", r.URL.Path))
	})
	return s.recoverer(s.guard(mux))
}

// assetHandler lets browsers keep the embedded assets for a day.
func assetHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private, max-age=86400")
		next.ServeHTTP(w, r)
	})
}

// recoverer answers 500 to a handler that panicked, and logs it.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.o.Log.Error("ralph web: a request failed", "path", r.URL.Path, "panic", v)
				s.fail(w, r, http.StatusInternalServerError, "ralph web failed to answer this request; its log says why")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// ListenOptions say where Listen listens.
type ListenOptions struct {
	// Addr is HOST:PORT; a port of 0 picks a free one.
	Addr string
	// TLSCert and TLSKey are PEM files; they are needed off loopback.
	TLSCert, TLSKey string
}

// Listen opens the listener o names: loopback freely, any other address
// only with a TLS certificate and key (as ralph fleet serve). URL is the
// address clients open (no token).
func Listen(o ListenOptions) (ln net.Listener, url string, err error) {
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, "", usage.Flagf("--listen %q is not HOST:PORT (e.g. 127.0.0.1:8080, or port 0 for a free one)", o.Addr)
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, "", usage.Flagf("TLS needs both a certificate and its key; pass --tls-cert FILE and --tls-key FILE")
	}
	if o.TLSCert == "" && !loopback(host) {
		return nil, "", usage.Flagf("--listen %s is reachable from other machines, which needs TLS; pass --tls-cert FILE and --tls-key FILE, or listen on 127.0.0.1", o.Addr)
	}
	ln, err = net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	scheme := "http"
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			ln.Close()
			return nil, "", usage.Errorf("load the TLS certificate %s and key %s: %v; pass PEM files", o.TLSCert, o.TLSKey, err)
		}
		ln, scheme = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), "https"
	}
	return ln, scheme + "://" + net.JoinHostPort(urlHost(host), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)) + "/", nil
}

// urlHost is the host a client opens for a listen host: this machine's
// name for an unspecified address.
func urlHost(host string) string {
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			return h
		}
		return "localhost"
	}
	return host
}

// loopback says whether host names this machine only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve serves s on ln until ctx ends, then shuts down (streams end with
// ctx).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() { // ends with ctx, or when Serve has returned
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := hs.Shutdown(sctx); err != nil {
				hs.Close() // the streams that did not end in time are cut
			}
		case <-done:
		}
	}()
	err := hs.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
