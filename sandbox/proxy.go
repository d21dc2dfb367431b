package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy limits: a tunnel with no byte either way for tunnelIdle is
// closed (a model's stream sends at least every few seconds); at most
// maxTunnels CONNECT tunnels and plain requests are open at once.
const (
	tunnelIdle  = 5 * time.Minute
	dialTimeout = 30 * time.Second
	maxTunnels  = 256
)

// proxy is a run's allow-listing HTTP proxy on 127.0.0.1: HTTP CONNECT
// tunnels and plain HTTP requests, to the allowed hosts only. A refused
// host is never resolved: the check is on the name the client sent.
type proxy struct {
	ln      net.Listener
	srv     *http.Server
	allow   []hostRule
	denied  func(Denial)
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	forward *httputil.ReverseProxy
	slots   chan struct{}

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// hostRule is one allowed host, on any port (port 0) or on one.
type hostRule struct {
	host string
	port int
}

// parseHost reads an entry of hosts: "host" or "host:port".
func parseHost(s string) (hostRule, error) {
	bad := fmt.Errorf("sandbox host %q is not a host name or host:port (no scheme, no path); write it as hosts = [\"api.example.com\"] or [\"api.example.com:443\"]", s)
	if s == "" || strings.ContainsAny(s, "/ @") {
		return hostRule{}, bad
	}
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") { // a bare IPv6 address
			return hostRule{host: normHost(s)}, nil
		}
		if strings.Contains(s, ":") {
			return hostRule{}, bad
		}
		return hostRule{host: normHost(s)}, nil
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return hostRule{}, bad
	}
	return hostRule{host: normHost(host), port: port}, nil
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// newProxy listens on 127.0.0.1 for a run whose processes may reach
// hosts; each refusal goes to denied (which may be nil).
func newProxy(hosts []hostRule, denied func(Denial)) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sandbox: the proxy cannot listen on loopback: %w", err)
	}
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	p := &proxy{ln: ln, allow: hosts, denied: denied, dial: d.DialContext,
		slots: make(chan struct{}, maxTunnels), tunnels: map[net.Conn]struct{}{}}
	p.forward = &httputil.ReverseProxy{
		Rewrite:       func(*httputil.ProxyRequest) {}, // the absolute URL as sent; hop-by-hop headers dropped
		FlushInterval: -1,                              // a model's stream is passed on as it comes
		Transport: &http.Transport{
			DialContext:           func(ctx context.Context, n, a string) (net.Conn, error) { return p.dial(ctx, n, a) },
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, fmt.Sprintf("ralph's sandbox proxy could not reach %s: %v", r.URL.Host, err), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln) // ends with Close (http.ErrServerClosed)
	}()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port, the one Landlock lets processes connect to.
func (p *proxy) Port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

// allowed reports whether host:port is on the list.
func (p *proxy) allowed(host string, port int) bool {
	host = normHost(host)
	for _, r := range p.allow {
		if r.host == host && (r.port == 0 || r.port == port) {
			return true
		}
	}
	return false
}

// refuse answers 403 naming the host and the line that would allow it.
func (p *proxy) refuse(w http.ResponseWriter, host string, port int) {
	host = normHost(host)
	d := Denial{What: "connect " + net.JoinHostPort(host, strconv.Itoa(port)), Allow: fmt.Sprintf("hosts = [%q]", host)}
	if p.denied != nil {
		p.denied(d)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "ralph's sandbox refused %s: %s is not among the hosts this run may reach; to allow it, add to ralph.toml:\n[sandbox]\n%s\n", d.What, host, d.Allow)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	default:
		http.Error(w, fmt.Sprintf("ralph's sandbox proxy has %d connections open already; try again", maxTunnels), http.StatusServiceUnavailable)
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "this is ralph's sandbox proxy: send it proxy requests (an absolute URL or CONNECT)", http.StatusBadRequest)
		return
	}
	port := 80
	if r.URL.Scheme == "https" {
		port = 443
	}
	if ps := r.URL.Port(); ps != "" {
		port, _ = strconv.Atoi(ps) // url.Parse checked it is digits
	}
	if !p.allowed(r.URL.Hostname(), port) {
		p.refuse(w, r.URL.Hostname(), port)
		return
	}
	p.forward.ServeHTTP(w, r)
}

// tunnel answers CONNECT: the host checked, then dialled, then bytes
// copied both ways until either side ends or both are idle.
func (p *proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	host, portStr, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil {
		http.Error(w, fmt.Sprintf("CONNECT %q: want host:port", r.Host), http.StatusBadRequest)
		return
	}
	if !p.allowed(host, port) {
		p.refuse(w, host, port)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dialTimeout)
	up, err := p.dial(ctx, "tcp", r.Host)
	cancel()
	if err != nil {
		http.Error(w, fmt.Sprintf("ralph's sandbox proxy could not reach %s: %v", r.Host, err), http.StatusBadGateway)
		return
	}
	down, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "ralph's sandbox proxy cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	if !p.track(up, down) {
		return
	}
	defer p.untrack(up, down)
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	splice(up, down, brw.Reader)
}

// track notes a tunnel's two ends, so that Close ends them; after Close
// it closes them and says no.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.tunnels, c)
	}
}

// splice copies up<->down (down read through brw's buffer, which may
// hold bytes already) until both ways ended, one failed, or neither
// moved a byte for tunnelIdle.
func splice(up, down net.Conn, buffered *bufio.Reader) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	errc := make(chan error, 2)
	go func() { errc <- copyIdle(up, buffered, down, &last) }()
	go func() { errc <- copyIdle(down, up, up, &last) }()
	for range 2 {
		if err := <-errc; err != nil {
			up.Close()
			down.Close()
		}
	}
}

// copyIdle copies src to dst; a read deadline lets it notice a tunnel
// idle both ways (last is the tunnel's latest byte, either way). At
// src's end it half-closes dst, so that the other way goes on.
func copyIdle(dst net.Conn, src io.Reader, srcConn net.Conn, last *atomic.Int64) error {
	buf := make([]byte, 32<<10)
	for {
		_ = srcConn.SetReadDeadline(time.Now().Add(tunnelIdle)) // a closed conn fails the Read below
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < tunnelIdle:
			// the other way is busy: a stream being answered
		case err == io.EOF:
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return nil
			}
			return err
		default:
			return err
		}
	}
}

// Close stops the proxy: no new connection, every tunnel closed.
func (p *proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.wg.Wait()
	return err
}
