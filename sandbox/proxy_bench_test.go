//go:build linux

package sandbox

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/mockmodel"
)

// floodBytes is the text the mock model streams per request: 8 MiB,
// which its server-sent events (one content_block_delta per line of
// text) make about 12 MB on the wire.
const floodBytes = 8 << 20

// BenchmarkProxyStream streams the mock Anthropic model's flood (an SSE
// response of floodBytes of text) to a client directly and through a
// run's proxy: over plain HTTP (the proxy forwards the request) and over
// TLS (a CONNECT tunnel), the two ways a CLI's model traffic goes
// through it. MB/s is the wire bytes the client read per second, and
// cpu-ms/op the CPU time this process spent per stream; compare each
// proxy row with its direct row (the sandbox's target: within 10%).
func BenchmarkProxyStream(b *testing.B) {
	model := &mockmodel.Anthropic{Script: "flood", Flood: floodBytes}
	plain := httptest.NewServer(model)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(model)
	defer tlsSrv.Close()
	for _, c := range []struct {
		name, target string
		srv          *httptest.Server
		proxied      bool
	}{
		{"http/direct", plain.URL, plain, false},
		{"http/proxy", "http://api.anthropic.test", plain, true},
		{"https/direct", tlsSrv.URL, tlsSrv, false},
		{"https/proxy", "https://api.anthropic.test", tlsSrv, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := benchClient(b, c.srv, c.proxied)
			b.ReportAllocs()
			var wire int64
			cpu0 := cpuTime()
			for b.Loop() {
				wire += streamOnce(b, client, c.target)
			}
			b.SetBytes(wire / int64(b.N))
			// The CPU the mock, the proxy and the client spent per stream
			// (all in this process): what the proxy adds, less swayed by
			// other load on the machine than MB/s.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// benchClient is a client of srv: directly, or through a run's proxy
// that allows api.anthropic.test and dials srv for it. Over TLS it trusts
// srv's certificate under that name.
func benchClient(b *testing.B, srv *httptest.Server, proxied bool) *http.Client {
	b.Helper()
	tr := srv.Client().Transport.(*http.Transport).Clone()
	if !proxied {
		return &http.Client{Transport: tr}
	}
	rule, err := parseHost("api.anthropic.test")
	if err != nil {
		b.Fatal(err)
	}
	p, err := newProxy([]hostRule{rule}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	addr := srv.Listener.Addr().String()
	dial := p.dial
	p.dial = func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, addr) }
	u, _ := url.Parse("http://" + p.Addr())
	tr.Proxy = http.ProxyURL(u)
	if tr.TLSClientConfig != nil {
		tr.TLSClientConfig = tr.TLSClientConfig.Clone()
		tr.TLSClientConfig.ServerName = "example.com" // httptest's certificate names it
	} else {
		tr.TLSClientConfig = &tls.Config{}
	}
	return &http.Client{Transport: tr}
}

// streamOnce asks target for one streamed reply and reads it to the end;
// it returns the bytes read.
func streamOnce(b *testing.B, client *http.Client, target string) int64 {
	body := `{"model":"claude-test","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"say a lot"}],` +
		`"tools":[{"name":"Read","input_schema":{"type":"object"}}]}` // a turn of the agent's, not a side call
	req, err := http.NewRequestWithContext(b.Context(), "POST", target+"/v1/messages", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || n < floodBytes {
		b.Fatalf("%s: %s, %d bytes, %v", target, resp.Status, n, err)
	}
	return n
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0 // Getrusage(RUSAGE_SELF) fails only for a bad pointer
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
