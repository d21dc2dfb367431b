package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// A tunnel is served by an HTTP proxy on the worker, between the tunnel
// and the run's serve socket, so that the worker decides what each request
// may do (§17): the run's owner may control it through POST /v1/control,
// each control recorded on the chain with the owner's name before it is
// passed on; every other member (a viewer, another submitter) reads only.

// serveTunnel connects a new tunnel to the run's serve socket for member
// who (control: who owns the run) and returns the tunnel's subjects for
// the reply ("ok UP DOWN"), or the error to reply.
func (s *ctlServer) serveTunnel(who Member, control bool) (string, error) {
	if s.socketPath == "" {
		return "", fmt.Errorf("run %s has no live socket on this worker", s.runID)
	}
	if err := s.room(); err != nil {
		return "", err
	}
	sock, err := net.DialTimeout("unix", s.socketPath, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("the live socket of run %s does not answer on this worker: %v", s.runID, err)
	}
	sock.Close() // it answers; each proxied request dials its own
	up, down, err := newTunnelSubjects(who.Key)
	if err != nil {
		return "", err
	}
	t, err := newTunnel(s.nc, s.tunnel, up, down, false)
	if err != nil {
		return "", err
	}
	if err := s.track(t); err != nil {
		t.Close()
		return "", err
	}
	go func() {
		defer s.untrack(t)
		s.proxy(t, who, control)
	}()
	return "ok " + up + " " + down, nil
}

// maxControlBody bounds a control request's body read by the proxy.
const maxControlBody = 4 << 10

// proxy serves HTTP on tunnel t, passing what who may do on to the run's
// serve socket, until either side ends.
func (s *ctlServer) proxy(t *tunnel, who Member, control bool) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.socketPath)
		},
		MaxIdleConns: 2,
	}
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "run"
			pr.Out.Host = "run"
		},
		Transport:     tr,
		FlushInterval: -1, // event streams pass at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			proxyError(w, http.StatusBadGateway, fmt.Sprintf("the live socket of run %s on this worker: %v", s.runID, err))
		},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !readOnly(r) {
			if !control {
				proxyError(w, http.StatusForbidden, s.mayControl(who, "control").Error()+"; this tunnel reads only")
				return
			}
			if r.URL.Path == "/v1/control" {
				if err := s.recordControl(r, who); err != nil {
					proxyError(w, http.StatusConflict, err.Error())
					return
				}
			}
		}
		rp.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	l := newOneConnListener(t)
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			l.Close()
		}
	}
	_ = srv.Serve(l) // ends when the tunnel closes (ErrClosed)
	t.Close()
}

// readOnly says whether r only reads the run: GET and HEAD, and POST
// /v1/verify, which checks the chain and changes nothing.
func readOnly(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead || (r.Method == http.MethodPost && r.URL.Path == "/v1/verify")
}

// recordControl records the control in r's body, as who asked for it,
// before the request is passed on; the body is put back for the socket.
func (s *ctlServer) recordControl(r *http.Request, who Member) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	if err != nil {
		return fmt.Errorf("read the control: %w", err)
	}
	if len(b) > maxControlBody {
		return fmt.Errorf("a control's body is at most %d bytes", maxControlBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	var c struct {
		Do string `json:"do"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Do == "" {
		return nil // the socket answers a malformed control with its own sentence
	}
	ctx, cancel := context.WithTimeout(r.Context(), ctlTimeout)
	defer cancel()
	if err := s.c.RecordRequest(ctx, c.Do, "tunnel", requester(who)); err != nil {
		return fmt.Errorf("run %s: %w", s.runID, err)
	}
	return nil
}

func proxyError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// oneConnListener is a net.Listener that yields one connection, then
// blocks until closed.
type oneConnListener struct {
	mu     sync.Mutex
	c      net.Conn
	closed chan struct{}
	once   sync.Once
}

func newOneConnListener(c net.Conn) *oneConnListener {
	return &oneConnListener{c: c, closed: make(chan struct{})}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return tunnelAddr("tunnel") }
