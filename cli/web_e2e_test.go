package cli_test

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// WebTokenCookieCSRF drives the real `ralph web` over HTTP: the token as
// the first line, 401 without it, the session cookie of ?token=, CSRF on a
// form, the Host check, an ended run's stream that replays and closes, and
// the refusal to listen beyond loopback without TLS.
var _ = suite.Add(e2e.Test{Name: "WebTokenCookieCSRF", Run: func(t *testing.T, e *e2e.E) {
	store := filepath.Join(t.TempDir(), "store")
	if out, errOut, code := e.Ralph("run", "--no-tui", "--store", store, "../examples/quickstart/ralph.toml").Run(); code != 0 {
		t.Fatalf("quickstart: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := e.Ralph("web", "--store", store, "--listen", "0.0.0.0:0").Run(); code != 2 || !strings.Contains(errOut, "needs TLS") {
		t.Fatalf("web off loopback without TLS: exit %d, %q; want 2 saying it needs TLS", code, errOut)
	}
	web := e.Ralph("web", "--store", store).Start()
	first := strings.TrimSpace(web.WaitLine("?token="))
	base, token, ok := strings.Cut(first, "?token=")
	if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("first line %q, want http://127.0.0.1:PORT/?token=TOKEN", first)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, body url.Values, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+strings.TrimPrefix(path, "/"), strings.NewReader(body.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i] == "Host" {
				req.Host = hdr[i+1]
			} else {
				req.Header.Set(hdr[i], hdr[i+1])
			}
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, _ := do("GET", "/", nil); resp.StatusCode != 401 {
		t.Fatalf("GET / without the token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := do("GET", "/runs/latest/events", nil); resp.StatusCode != 401 {
		t.Fatalf("the stream without the token: %d, want 401", resp.StatusCode)
	}
	resp, _ := do("GET", "/?token="+token, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" || len(resp.Cookies()) != 1 || resp.Cookies()[0].Value == token {
		t.Fatalf("first visit: %d to %q, cookies %v; want 303 to / and a session cookie", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	cookie := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	resp, page := do("GET", "/", nil, "Cookie", cookie)
	if resp.StatusCode != 200 || !strings.Contains(page, `data-state="done"`) {
		t.Fatalf("runs page with the cookie: %d\n%s", resp.StatusCode, page)
	}
	if resp, body := do("POST", "/runs/latest/control", url.Values{"do": {"pause"}}, "Cookie", cookie); resp.StatusCode != 403 || !strings.Contains(body, "CSRF") {
		t.Fatalf("a form without its CSRF token: %d, want 403\n%s", resp.StatusCode, body)
	}
	if resp, _ := do("GET", "/", nil, "Authorization", "Bearer "+token, "Host", "rebound.example"); resp.StatusCode != 421 {
		t.Fatalf("another Host: %d, want 421", resp.StatusCode)
	}
	resp, stream := do("GET", "/runs/latest/events", nil, "Authorization", "Bearer "+token)
	if resp.StatusCode != 200 || !strings.Contains(stream, "event: action") || !strings.HasSuffix(strings.TrimSpace(stream), `"why":"the run has ended: this is what it recorded"}`) {
		t.Fatalf("an ended run's stream: %d, want its actions then end, closed\n%s", resp.StatusCode, stream)
	}
	web.Kill()
	web.Wait()
}})
