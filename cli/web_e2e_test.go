package cli_test

import (
	"bufio"
	"github.com/ralphloop/ralph/ledger"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/internal/eventually"
)

// WebTokenCookieCSRF drives the real `ralph web` over HTTP: the token as
// the first line, 401 without it, the session cookie of ?token=, CSRF on a
// form, the Host check, an ended run's stream that replays and closes (and
// resumes after Last-Event-ID), and
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
	do := webClient(t, base)
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
	resp, stream = do("GET", "/runs/latest/events", nil, "Cookie", cookie, "Last-Event-ID", "10")
	if resp.StatusCode != 200 || !strings.HasPrefix(stream, "id: 11\n") {
		t.Fatalf("a stream resumed after Last-Event-ID 10 with the cookie: %d, want it to start at id 11\n%.200s", resp.StatusCode, stream)
	}
	web.Kill()
	web.Wait()
}})

// webClient is a request to the ralph web at base, not following
// redirects; hdr is name, value pairs (Host sets the request's host).
func webClient(t *testing.T, base string) func(method, path string, body url.Values, hdr ...string) (*http.Response, string) {
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(method, path string, body url.Values, hdr ...string) (*http.Response, string) {
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
}

// WebFollowsALiveRun: the stream of a live run carries its events as they
// happen; pause and resume from the page's form reach the loop; the stream
// ends when the run does, and the run page then shows it done.
var _ = suite.Add(e2e.Test{Name: "WebFollowsALiveRun", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, release := releasedLoop(t, dir)
	store := filepath.Join(dir, "store")
	run := e.Ralph("run", cfg, "--no-tui", "--store", store).In(dir).Start()
	runID := liveRunID(t, store)
	web := e.Ralph("web", "--store", store).Start()
	base, token, _ := strings.Cut(strings.TrimSpace(web.WaitLine("?token=")), "?token=")
	auth := "Bearer " + token
	req, err := http.NewRequest("GET", base+"runs/"+runID[:8]+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 1024)
	go func() { // ends when the stream does
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		name := ""
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				events <- name + " " + strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	await := func(want string) {
		t.Helper()
		deadline := time.After(eventually.Bound)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended before %q", want)
				}
				if strings.Contains(ev, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q on the stream", want)
			}
		}
	}
	await(`action {"seq":`)
	do := webClient(t, base)
	for _, c := range []struct{ do, state string }{{"pause", `state {"state":"paused"}`}, {"resume", `state {"state":"running"}`}} {
		if resp, body := do("POST", "/runs/"+runID+"/control", url.Values{"do": {c.do}}, "Authorization", auth); resp.StatusCode != 303 {
			t.Fatalf("%s: %d %s", c.do, resp.StatusCode, body)
		}
		await(c.state)
	}
	release()
	await(`end {`)
	if err := run.Wait(); run.State().ExitCode() != 0 {
		t.Fatalf("the run did not complete: %v\n%s", err, run.Output())
	}
	if resp, page := do("GET", "/runs/"+runID, nil, "Authorization", auth); resp.StatusCode != 200 || !strings.Contains(page, `<span id="state" class="state st-ok">done</span>`) || !strings.Contains(page, `data-condition="released" data-met="true"`) {
		t.Fatalf("the run page after the end: %d\n%s", resp.StatusCode, page)
	}
	web.Kill()
	web.Wait()
	// The chain says who paused and resumed the run, and through what.
	st, err := ledger.Open(ledger.Options{Dir: store, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	acts, err := st.ByRun(runID)
	if err != nil {
		t.Fatal(err)
	}
	var controls []string
	for _, a := range acts {
		if a.Type == ledger.ControlRequested {
			controls = append(controls, a.Metadata["op"].Str()+" ("+a.Metadata["role"].Str()+", "+a.Metadata["via"].Str()+")")
		}
	}
	if got := strings.Join(controls, "; "); got != "pause (owner, socket); resume (owner, socket)" {
		t.Errorf("controls on the chain: %q, want the page's pause and resume, by the owner through the socket", got)
	}
}})
