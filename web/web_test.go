package web

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/runsource"
	"github.com/ralphloop/ralph/serve"
)

const testToken = "0123456789abcdef0123456789abcdef"

// fixture is the quickstart loop run to its end on an in-memory store, as
// `ralph run` wires it (assemble.NewRun).
type fixture struct {
	st    *ledger.Store
	runID string
}

var (
	fixOnce sync.Once
	fix     fixture
	fixErr  error
)

func quickstart(t testing.TB) fixture {
	t.Helper()
	fixOnce.Do(func() {
		cfg, err := config.Load("../examples/quickstart/ralph.toml", func(string) string { return "" })
		if err != nil {
			fixErr = err
			return
		}
		run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: assemble.InMemory})
		if err != nil {
			fixErr = err
			return
		}
		run.Options.Logger = slog.New(slog.DiscardHandler)
		r, err := run.NewRunner()
		if err != nil {
			fixErr = err
			return
		}
		if _, err := r.Run(context.Background()); err != nil {
			fixErr = err
			return
		}
		fix = fixture{st: run.Store, runID: r.RunID()}
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

// testSource reads the fixture's store; live makes its run live, its
// events coming from events.
type testSource struct {
	st     *ledger.Store
	live   bool
	events chan loop.Event
	steers chan string
}

type noClose struct{ serve.LocalReader }

func (noClose) Close() error { return nil }

func (s *testSource) reader() serve.Reader { return noClose{serve.LocalReader{Store: s.st}} }

func (s *testSource) Open(context.Context) (serve.Reader, error)      { return s.reader(), nil }
func (s *testSource) Store(context.Context) (mcpserver.Reader, error) { return s.reader(), nil }
func (s *testSource) Runs(context.Context) ([]loop.RunRecord, error)  { return loop.ListRuns(s.st) }
func (s *testSource) Control(ctx context.Context, r *mcpserver.Run, do string) error {
	return s.Steer(ctx, r, do, 0)
}
func (s *testSource) Run(_ context.Context, id string) (*mcpserver.Run, error) {
	r, err := runsource.RunOf(s.reader(), id, "the runs page lists the ids")
	if err == nil {
		r.Live = s.live
	}
	return r, err
}
func (s *testSource) Steer(_ context.Context, r *mcpserver.Run, do string, _ int) error {
	if !s.live {
		return io.ErrUnexpectedEOF
	}
	s.steers <- do
	return nil
}
func (s *testSource) Steerable(*mcpserver.Run) bool { return s.live }
func (s *testSource) Approves(*mcpserver.Run) bool  { return s.live }
func (s *testSource) Events(context.Context, *mcpserver.Run, uint64) (<-chan loop.Event, error) {
	return s.events, nil
}
func (s *testSource) Diff(context.Context, *mcpserver.Run, []ledger.Action, int) ([]gitx.FileStat, string, string) {
	return nil, "", "run recorded no checkpoints"
}

// newTest serves src on an httptest server as ralph web would.
func newTest(t *testing.T, src Source) (*httptest.Server, *Server) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	srv, err := New(Options{Source: src, Token: testToken, Addr: ts.Listener.Addr().String(), Where: "the store test",
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }, SSEBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, srv
}

// client does not follow redirects: the tests look at them.
func client() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, u string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	setHeaders(req, hdr)
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const bearer = "Bearer " + testToken

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, srv := newTest(t, &testSource{st: f.st})
	for _, c := range []struct {
		name, path string
		hdr        []string
		code       int
	}{
		{"page without token", "/", nil, 401},
		{"stream without token", "/runs/latest/events", nil, 401},
		{"wrong bearer", "/", []string{"Authorization", "Bearer nope-nope-nope-nope"}, 401},
		{"not bearer", "/", []string{"Authorization", "Basic " + testToken}, 401},
		{"bearer", "/", []string{"Authorization", bearer}, 200},
		{"wrong token in URL", "/?token=nope", nil, 401},
		{"unknown cookie", "/", []string{"Cookie", srv.cookie + "=" + testToken}, 401},
		{"another host", "/", []string{"Authorization", bearer, "Host", "rebound.example:80"}, 421},
		{"asset without token", "/assets/style.css", nil, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := get(t, ts.URL+c.path, c.hdr...)
			if resp.StatusCode != c.code {
				t.Fatalf("GET %s: %d, want %d: %s", c.path, resp.StatusCode, c.code, body)
			}
		})
	}
}

func TestTokenSetsSessionCookie(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, srv := newTest(t, &testSource{st: f.st})
	resp, _ := get(t, ts.URL+"/?state=done&token="+testToken)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?state=done" {
		t.Fatalf("first visit: %d to %q, want 303 to /?state=done", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 {
		t.Fatalf("cookies %v, want one", cs)
	}
	c := cs[0]
	_, port, _ := strings.Cut(strings.TrimPrefix(ts.URL, "http://"), ":")
	if c.Name != "ralph_web_"+port || c.Name != srv.cookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Value == testToken || len(c.Value) < 32 {
		t.Fatalf("cookie %+v: want ralph_web_%s, HttpOnly, SameSite=Strict, a session id that is not the token", c, port)
	}
	resp, body := get(t, ts.URL+"/", "Cookie", c.Name+"="+c.Value)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-run="`+f.runID+`"`) {
		t.Fatalf("with the cookie: %d, want the runs page", resp.StatusCode)
	}
}

// signedIn signs in and returns the cookie and the CSRF token of its forms.
func signedIn(t *testing.T, ts *httptest.Server, runID string) (*http.Cookie, string) {
	t.Helper()
	resp, _ := get(t, ts.URL+"/?token="+testToken)
	c := resp.Cookies()[0]
	_, body := get(t, ts.URL+"/runs/"+runID, "Cookie", c.Name+"="+c.Value)
	_, rest, ok := strings.Cut(body, `name="csrf" value="`)
	if !ok {
		t.Fatal("the run page has no CSRF field")
	}
	tok, _, _ := strings.Cut(rest, `"`)
	return c, tok
}

func post(t *testing.T, u string, form url.Values, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	setHeaders(req, hdr)
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestControlsNeedCSRFAndSameOrigin(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	src := &testSource{st: f.st, live: true, events: make(chan loop.Event), steers: make(chan string, 4)}
	ts, _ := newTest(t, src)
	c, csrf := signedIn(t, ts, f.runID)
	ck := c.Name + "=" + c.Value
	u := ts.URL + "/runs/" + f.runID + "/control"
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  []string
		code int
	}{
		{"cookie without csrf", url.Values{"do": {"pause"}}, []string{"Cookie", ck}, 403},
		{"cookie with a wrong csrf", url.Values{"do": {"pause"}, "csrf": {"x"}}, []string{"Cookie", ck}, 403},
		{"cookie from another site", url.Values{"do": {"pause"}, "csrf": {csrf}}, []string{"Cookie", ck, "Sec-Fetch-Site", "cross-site"}, 403},
		{"cookie from another origin", url.Values{"do": {"pause"}, "csrf": {csrf}}, []string{"Cookie", ck, "Origin", "http://evil.example"}, 403},
		{"cookie, same origin, csrf", url.Values{"do": {"pause"}, "csrf": {csrf}}, []string{"Cookie", ck, "Sec-Fetch-Site", "same-origin"}, 303},
		{"bearer needs no csrf", url.Values{"do": {"resume"}}, []string{"Authorization", bearer}, 303},
		{"not a control", url.Values{"do": {"explode"}}, []string{"Authorization", bearer}, 400},
		{"no token", url.Values{"do": {"abort"}}, nil, 401},
	} {
		resp, body := post(t, u, tc.form, tc.hdr...)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.name, resp.StatusCode, tc.code, body)
		}
	}
	if got := []string{<-src.steers, <-src.steers}; got[0] != "pause" || got[1] != "resume" {
		t.Fatalf("steered %v, want pause then resume", got)
	}
	if len(src.steers) != 0 {
		t.Fatalf("a refused request steered the run: %v", <-src.steers)
	}
}

func TestPages(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, _ := newTest(t, &testSource{st: f.st})
	auth := []string{"Authorization", bearer}
	for _, c := range []struct {
		name, path string
		code       int
		want       []string
		not        []string
	}{
		{"runs", "/", 200, []string{`<table id="runs">`, `data-run="` + f.runID + `"`, `data-state="done"`, "success by counted-to-three"}, nil},
		{"runs filtered out", "/?state=failed", 200, []string{`id="no-runs"`}, []string{`data-run="`}},
		{"runs by text", "/?q=COUNTED", 200, []string{`data-run="` + f.runID + `"`}, nil},
		{"run", "/runs/" + f.runID, 200, []string{`data-condition="counted-to-three" data-met="true"`, `class="why"`, `id="chain"`,
			`data-iteration="3"`, `id="budgets"`, `id="whatif-config"`, `name = &#34;counted-to-three&#34;`, `href="/runs/` + f.runID + `/diff?iteration=1"`}, []string{`name="do"`, "max = 0"}},
		{"diff", "/runs/" + f.runID + "/diff?iteration=2", 200, []string{`id="diff-note"`, "run recorded no checkpoints"}, nil},
		{"diff of no iteration", "/runs/" + f.runID + "/diff?iteration=9", 400, []string{"it has 3"}, nil},
		{"fleet of a store", "/fleet", 200, []string{`id="no-fleet"`}, nil},
		{"no such run", "/runs/ffffffff", 404, []string{`id="error"`, "no run ffffffff"}, nil},
		{"no such page", "/nope", 404, []string{`id="error"`}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := get(t, ts.URL+c.path, auth...)
			if resp.StatusCode != c.code {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, c.code, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(body, n) {
					t.Errorf("the page has %q", n)
				}
			}
		})
	}
}

func TestRunPrefixAndLatestRedirect(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, _ := newTest(t, &testSource{st: f.st})
	for _, p := range []string{"latest", f.runID[:8]} {
		resp, _ := get(t, ts.URL+"/runs/"+p+"/diff?iteration=1", "Authorization", bearer)
		if want := "/runs/" + f.runID + "/diff?iteration=1"; resp.StatusCode != 303 || resp.Header.Get("Location") != want {
			t.Errorf("%s: %d to %q, want 303 to %s", p, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}

func TestWhatIf(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, _ := newTest(t, &testSource{st: f.st})
	u := ts.URL + "/runs/" + f.runID + "/whatif"
	resp, body := post(t, u, url.Values{"config": {"[[stop]]\nname = \"two\"\nkind = \"max_iterations\"\nmax = 2\n"}}, "Authorization", bearer)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-stopped="true" data-iteration="2" data-condition="two" data-class="limit"`) {
		t.Fatalf("what-if max 2: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, u, url.Values{"config": {"[[stop]]\nname = 3\n"}}, "Authorization", bearer, "Accept", "application/json")
	if resp.StatusCode != 400 || !strings.Contains(body, `{"error":"what-if:2`) {
		t.Fatalf("bad TOML: %d %s, want 400 naming what-if:2", resp.StatusCode, body)
	}
}

// sse reads a stream's events (name and id) until it ends or n are read.
func sse(t *testing.T, body io.Reader, n int) (names, ids []string) {
	t.Helper()
	sc := bufio.NewScanner(body)
	var name, id string
	for len(names) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case line == "" && name != "":
			names, ids = append(names, name), append(ids, id)
			name, id = "", ""
		}
	}
	return names, ids
}

func TestEndedRunStreamReplaysAndCloses(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, _ := newTest(t, &testSource{st: f.st})
	acts, err := f.st.ByRun(f.runID)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client().Do(mustReq(t, ts.URL+"/runs/"+f.runID+"/events", "Authorization", bearer, "Last-Event-ID", "10"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	names, ids := sse(t, resp.Body, 1<<20)
	if len(names) == 0 || names[len(names)-1] != "end" {
		t.Fatalf("the stream did not end with end: %v", names)
	}
	if ids[0] != "11" || ids[len(ids)-2] != strconv.FormatUint(acts[len(acts)-1].Seq, 10) {
		t.Fatalf("ids %s … %s, want 11 … %d (resumed after Last-Event-ID 10)", ids[0], ids[len(ids)-2], acts[len(acts)-1].Seq)
	}
}

func mustReq(t *testing.T, u string, hdr ...string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	setHeaders(req, hdr)
	return req
}

func TestLiveStream(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	acts, _ := f.st.ByRun(f.runID)
	src := &testSource{st: f.st, live: true, events: make(chan loop.Event, 8)}
	ts, _ := newTest(t, src)
	resp, err := client().Do(mustReq(t, ts.URL+"/runs/"+f.runID+"/events", "Authorization", bearer))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := acts[len(acts)-1].Seq
	call := ledger.Action{Seq: head + 1, RunID: f.runID, Type: ledger.CapabilityCall, FunctionName: "ccos.echo", Success: true}
	end := ledger.Action{Seq: head + 2, RunID: f.runID, Type: ledger.RunCompleted, Success: true}
	other := ledger.Action{Seq: head + 2, RunID: "another-run", Type: ledger.CapabilityCall}
	src.events <- loop.Event{Kind: loop.EventState, State: "paused"}
	src.events <- loop.Event{Kind: loop.EventAction, Action: &acts[1]} // recorded before the page: sent already
	src.events <- loop.Event{Kind: loop.EventAction, Action: &call}
	src.events <- loop.Event{Kind: loop.EventAction, Action: &other}
	src.events <- loop.Event{Kind: loop.EventAction, Action: &end} // the run's end
	names, ids := sse(t, resp.Body, 10)
	want := []string{"hello", "state", "action", "action", "end"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", names, want)
	}
	if ids[2] != strconv.FormatUint(head+1, 10) || ids[3] != strconv.FormatUint(head+2, 10) {
		t.Fatalf("action ids %q %q, want their seqs %d %d", ids[2], ids[3], head+1, head+2)
	}
}

func TestSlowClientGetsSnapshot(t *testing.T) {
	t.Parallel()
	q := newQueue(3)
	for i := 1; i <= 10; i++ {
		q.push(sseEvent{name: "action", id: strconv.Itoa(i)})
	}
	evs, ended := q.take()
	if ended || len(evs) != 1 || evs[0].name != "snapshot" || evs[0].id != "10" {
		t.Fatalf("after falling behind: %+v, want one snapshot with id 10", evs)
	}
	q.push(sseEvent{name: "action", id: "11"})
	if evs, _ := q.take(); len(evs) != 1 || evs[0].id != "11" {
		t.Fatalf("after the snapshot: %+v, want event 11", evs)
	}
	if len(q.evs) != 0 || cap(q.evs) > 3 {
		t.Fatalf("the queue keeps %d (cap %d)", len(q.evs), cap(q.evs))
	}
}

func TestListenRefusesPlainOffLoopback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o    ListenOptions
		want string
	}{
		{ListenOptions{Addr: "0.0.0.0:0"}, "needs TLS"},
		{ListenOptions{Addr: "127.0.0.1:0", TLSCert: "c.pem"}, "both a certificate and its key"},
		{ListenOptions{Addr: "nonsense"}, "not HOST:PORT"},
		{ListenOptions{Addr: "127.0.0.1:0", TLSCert: "/nonexistent/c.pem", TLSKey: "/nonexistent/k.pem"}, "load the TLS certificate"},
	} {
		ln, _, err := Listen(c.o)
		if err == nil {
			ln.Close()
			t.Errorf("%+v: listened, want an error saying %q", c.o, c.want)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	ln, u, err := Listen(ListenOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("URL %q", u)
	}
}

func TestStopSection(t *testing.T) {
	t.Parallel()
	src := "[loop]\nmax = 1\n[[stop]]\n  name = \"a\"\n  class = \"\"\n  max = 0\n  [[stop.conditions]]\n  kind = \"x\"\n[agent]\ncli = \"claude\"\n"
	want := "[[stop]]\nname = \"a\"\n[[stop.conditions]]\nkind = \"x\"\n"
	if got := stopSection(src); got != want {
		t.Fatalf("stopSection:\n%s\nwant:\n%s", got, want)
	}
}

func FuzzStopSection(f *testing.F) {
	for _, s := range []string{"", "[[stop]]\nname = \"a\"\n", "[stop.x]\n[x]\n", "[[stop]] # c\n  max = 0\n[", "[[stopper]]\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := stopSection(s)
		if len(out) > len(s) {
			t.Fatalf("stopSection grew %q to %q", s, out)
		}
	})
}

func BenchmarkSSEQueue(b *testing.B) {
	q := newQueue(256)
	e := sseEvent{name: "action", id: "1", data: []byte(`{"seq":1}`)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.push(e)
		if i%8 == 0 {
			q.take()
		}
	}
}

// setHeaders sets hdr's name, value pairs on req (Host as its host).
func setHeaders(req *http.Request, hdr []string) {
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
}
