//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/mockmodel"
)

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want hostRule
		bad  bool
	}{
		{in: "api.anthropic.com", want: hostRule{host: "api.anthropic.com"}},
		{in: "API.Example.COM.", want: hostRule{host: "api.example.com"}},
		{in: "localhost:8080", want: hostRule{host: "localhost", port: 8080}},
		{in: "[::1]:443", want: hostRule{host: "::1", port: 443}},
		{in: "::1", want: hostRule{host: "::1"}},
		{in: "https://api.example.com", bad: true},
		{in: "api.example.com/v1", bad: true},
		{in: "api.example.com:0", bad: true},
		{in: "api.example.com:http", bad: true},
		{in: "", bad: true},
	} {
		got, err := parseHost(tc.in)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), `hosts = ["api.example.com"]`) {
				t.Errorf("parseHost(%q) = %v, %v; want an error showing the form", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseHost(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// testProxy is a proxy allowing hosts, its dials going to upstream (by
// name: allowed names map to real addresses) and noted.
type testProxy struct {
	*proxy
	mu      sync.Mutex
	dialled []string
	denials []Denial
}

func newTestProxy(t *testing.T, upstream map[string]string, hosts ...string) *testProxy {
	t.Helper()
	var rules []hostRule
	for _, h := range hosts {
		r, err := parseHost(h)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	tp := &testProxy{}
	p, err := newProxy(rules, func(d Denial) { tp.mu.Lock(); tp.denials = append(tp.denials, d); tp.mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		tp.mu.Lock()
		tp.dialled = append(tp.dialled, addr)
		tp.mu.Unlock()
		real, ok := upstream[addr]
		if !ok {
			return nil, fmt.Errorf("no upstream %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, real)
	}
	tp.proxy = p
	return tp
}

// client is an HTTP client that uses p for every URL.
func (p *testProxy) client() *http.Client {
	u, _ := url.Parse("http://" + p.Addr())
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
}

// connect opens a CONNECT tunnel to target and returns the conn and the
// proxy's answer.
func (p *testProxy) connect(t *testing.T, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

// streamer serves an event, then waits for release before the next:
// the client sees the first while the server still holds the second,
// which a buffering proxy would never pass on.
func streamer(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: two\n\n")
	})
}

func TestProxyStreamsPlainHTTPUnbuffered(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(streamer(release))
	defer srv.Close()
	p := newTestProxy(t, map[string]string{"model.test:80": srv.Listener.Addr().String()}, "model.test")
	resp, err := p.client().Get("http://model.test/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: two") {
		t.Errorf("the rest of the stream is %q", rest)
	}
}

func TestProxyTunnelsAnAllowedHost(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(streamer(release))
	defer srv.Close()
	p := newTestProxy(t, map[string]string{"model.test:443": srv.Listener.Addr().String()}, "model.test:443")
	c, br, resp := p.connect(t, "model.test:443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT model.test:443: %s", resp.Status)
	}
	fmt.Fprint(c, "GET /v1/messages HTTP/1.1\r\nHost: model.test\r\n\r\n")
	stream, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := bufio.NewReader(stream.Body)
	if line, err := sb.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event through the tunnel %q, %v", line, err)
	}
	close(release)
	// Close ends the tunnel: the stream ends rather than hanging.
	p.Close()
	_, _ = io.ReadAll(sb)
}

// TestProxyRefuses: a host not on the list, or on another port, is
// refused with 403 naming the line that allows it, reported as a Denial,
// and never dialled (so never resolved).
func TestProxyRefuses(t *testing.T) {
	p := newTestProxy(t, map[string]string{}, "api.example.com:443")
	_, _, resp := p.connect(t, "evil.example.net:443")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `hosts = ["evil.example.net"]`) || !strings.Contains(string(body), "connect evil.example.net:443") {
		t.Errorf("CONNECT evil: %s %q", resp.Status, body)
	}
	_, _, resp = p.connect(t, "api.example.com:22")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT to an allowed host's other port: %s", resp.Status)
	}
	r, err := p.client().Get("http://evil.example.net/x")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("GET evil: %s", r.Status)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dialled) != 0 {
		t.Errorf("the proxy dialled %v", p.dialled)
	}
	want := []Denial{
		{What: "connect evil.example.net:443", Allow: `hosts = ["evil.example.net"]`},
		{What: "connect api.example.com:22", Allow: `hosts = ["api.example.com"]`},
		{What: "connect evil.example.net:80", Allow: `hosts = ["evil.example.net"]`},
	}
	if fmt.Sprint(p.denials) != fmt.Sprint(want) {
		t.Errorf("denials %v; want %v", p.denials, want)
	}
}

// TestProxyBoundsTunnels: past its limit the proxy answers 503 rather
// than opening more.
func TestProxyBoundsTunnels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAll(ln)
	p := newTestProxy(t, map[string]string{"a.test:1": ln.Addr().String()}, "a.test")
	p.slots = make(chan struct{}, 1)
	if _, _, resp := p.connect(t, "a.test:1"); resp.StatusCode != http.StatusOK {
		t.Fatalf("first tunnel: %s", resp.Status)
	}
	if _, _, resp := p.connect(t, "a.test:1"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second tunnel past the limit: %s", resp.Status)
	}
}

// TestProxyPassesTheMockModelsStream: the mock model's "hang" script
// starts its SSE stream and then goes silent; its first events come
// through the proxy while the model still holds the stream open, which a
// buffering proxy would never allow.
func TestProxyPassesTheMockModelsStream(t *testing.T) {
	srv := httptest.NewServer(&mockmodel.Anthropic{Script: "hang", Logf: t.Logf})
	defer srv.Close()
	p := newTestProxy(t, map[string]string{"api.anthropic.test:80": srv.Listener.Addr().String()}, "api.anthropic.test")
	body := `{"model":"claude-test","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"fix it"}],` +
		`"tools":[{"name":"Read","input_schema":{"type":"object"}}]}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://api.anthropic.test/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s", resp.Status, b)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before message_start: %v", err)
		}
		if strings.TrimSpace(line) == "event: message_start" {
			return
		}
	}
}
