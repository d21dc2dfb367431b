package bench

// ralph web's figures (issue 36, docs/benchmarks.md "ralph web"), each
// against the real binary, a real store and, for the first paint, Debian's
// Chromium headless:
//
//   - BenchmarkWebFirstPaint: the first contentful paint of a run's page
//     whose run recorded about 100k actions (the Performance API's paint
//     entry), a fresh tab each time; target ≤ 500 ms.
//   - BenchmarkWebLive/browsers=N: a live loop followed by N Go SSE clients
//     on /runs/{id}/events (the stream a page's EventSource reads):
//     ns/iteration of the loop while they are all connected (compare 0 and
//     50 with benchstat; target within 5%), the p99 from an action's record
//     to its event in a client (target ≤ 50 ms), and ralph web's resident
//     memory per connected client (target ≤ 1 MiB).
//
// Each builds the binary from the repository once per test process and
// works in directories of its own (XDG_* too); they skip when Chromium is
// missing (internal/e2e.Chromium).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ralphloop/ralph/internal/e2e"
)

// ralphBin builds ralph once per test process.
var ralphBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(webRoot, "bin", "ralph")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// home is a benchmark's ralph: the binary and an environment of its own.
type home struct {
	bin, dir string
	env      []string
}

func newHome(tb testing.TB, dir string) *home {
	tb.Helper()
	bin, err := ralphBin()
	if err != nil {
		tb.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"), "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
	return &home{bin: bin, dir: dir, env: slices.DeleteFunc(env, func(kv string) bool {
		return strings.HasPrefix(kv, "RALPH_STORE=") || strings.HasPrefix(kv, "RALPH_NATS")
	})}
}

func (h *home) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(h.bin, args...)
	cmd.Dir, cmd.Env = h.dir, h.env
	return cmd
}

// loopConfig is a loop of iters iterations as quick as ralph makes them
// (the static provider, no delay), each plan calls echo calls, recording
// into store; it succeeds (exit 0) once its step has succeeded iters times.
func loopConfig(store string, iters, calls int) string {
	var plan strings.Builder
	for i := range calls {
		fmt.Fprintf(&plan, `(call :ccos.echo {:message "hi %d"}) `, i)
	}
	return fmt.Sprintf(`[intent]
goal = "a loop ralph web follows"
[model]
provider = "static"
[plan]
rtfs = '(do (step "Echo" (do %s)))'
[governance]
allow = ["ccos.*"]
[loop]
checkpoints = false
[[stop]]
name = "done"
kind = "predicate"
rtfs = '(>= (audit.count "Echo" :succeeded) %d)'
[[stop]]
kind = "max_iterations"
max = %d
[store]
dir = %q
sync_writes = false
`, plan.String(), iters, iters+1, store)
}

var runIDLine = regexp.MustCompile(`run ([0-9a-f-]{36}) `)

// record runs cfg to its end and returns the run's id.
func (h *home) record(tb testing.TB, name, cfg string) string {
	tb.Helper()
	path := filepath.Join(h.dir, name)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	out, err := h.cmd("run", path, "--no-tui").CombinedOutput()
	m := runIDLine.FindSubmatch(out)
	if err != nil || m == nil {
		tb.Fatalf("ralph run %s: %v\n%s", name, err, out)
	}
	return string(m[1])
}

// web is a running `ralph web`: its base URL and token.
type web struct {
	cmd   *exec.Cmd
	base  string
	token string
}

// startWeb starts `ralph web --store store` on a free loopback port and
// reads the URL it prints first.
func (h *home) startWeb(tb testing.TB, store string) *web {
	tb.Helper()
	cmd := h.cmd("web", "--store", store, "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("ralph web printed no URL: %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(line))
	if err != nil || u.Query().Get("token") == "" {
		tb.Fatalf("ralph web's first line is no URL with a token: %q", line)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(discard{}) }() // keep its stdout drained
	return &web{cmd: cmd, base: u.Scheme + "://" + u.Host, token: u.Query().Get("token")}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// rss is the process's resident set in bytes (VmRSS).
func rss(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kib << 10
		}
	}
	tb.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// chainTimes is when each action of run was recorded, by seq, and the
// times its iterations started, in order.
func (h *home) chainTimes(tb testing.TB, store, run string) (bySeq map[uint64]time.Time, iterations []time.Time) {
	tb.Helper()
	cmd := h.cmd("chain", "show", "--json", "--run", run, "--store", store)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	bySeq = map[uint64]time.Time{}
	dec := json.NewDecoder(out)
	for {
		var a struct {
			Seq  uint64    `json:"seq"`
			Type string    `json:"action_type"`
			At   time.Time `json:"timestamp"`
		}
		if err := dec.Decode(&a); err != nil {
			break
		}
		bySeq[a.Seq] = a.At
		if a.Type == "IterationStarted" {
			iterations = append(iterations, a.At)
		}
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("ralph chain show --json: %v", err)
	}
	return bySeq, iterations
}

// webRoot holds what the benchmarks of a test process make (the binary,
// the 100k-action store), removed once they end.
var webRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ralph-bench-web-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	webRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// bigRun records, once per test process, a store whose one run has about
// 100k actions (1000 iterations of 100 calls: 109,002), and returns its
// home, store and run.
var bigRun = sync.OnceValues(func() (*bigStore, error) {
	dir := filepath.Join(webRoot, "big")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &bigStore{dir: dir, store: filepath.Join(dir, "store")}, nil
})

type bigStore struct {
	once       sync.Once
	dir, store string
	run        string
}

// BenchmarkWebFirstPaint is the first contentful paint of the page of a
// run with about 100k actions, in a new tab of one headless Chromium
// that has signed in once (its cookie), as the Performance API's
// "first-contentful-paint" entry gives it (from the navigation's start:
// the server's answer, the parse, the first paint).
func BenchmarkWebFirstPaint(b *testing.B) {
	if _, err := os.Stat(e2e.ChromiumPath); err != nil {
		b.Skipf("needs Debian's chromium at %s: %v", e2e.ChromiumPath, err)
	}
	big, err := bigRun()
	if err != nil {
		b.Fatal(err)
	}
	h := newHome(b, big.dir)
	big.once.Do(func() { big.run = h.record(b, "big.toml", loopConfig(big.store, 1000, 100)) })
	w := h.startWeb(b, big.store)

	actx, acancel := chromedp.NewExecAllocator(context.Background(), e2e.BrowserOptions(b.TempDir())...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(w.base+"/?token="+url.QueryEscape(w.token))); err != nil {
		b.Fatal(err)
	}
	page := w.base + "/runs/" + big.run
	var fcp, load float64
	b.ResetTimer()
	for range b.N {
		tctx, tcancel := chromedp.NewContext(bctx) // a new tab, same cookie
		if err := chromedp.Do(tctx, chromedp.Navigate(page)); err != nil {
			b.Fatal(err)
		}
		t, err := chromedp.Run(tctx, chromedp.Evaluate[[2]float64](`new Promise(ok => {
			const read = () => {
				const p = performance.getEntriesByName("first-contentful-paint")[0];
				const n = performance.getEntriesByType("navigation")[0];
				if (p && n && n.loadEventEnd > 0) ok([p.startTime, n.loadEventEnd]); else setTimeout(read, 5);
			};
			read();
		})`, chromedp.EvalAwaitPromise))
		tcancel()
		if err != nil {
			b.Fatal(err)
		}
		fcp += t[0]
		load += t[1]
	}
	b.ReportMetric(fcp/float64(b.N), "fcp-ms")
	b.ReportMetric(load/float64(b.N), "load-ms")
}

// liveIterations is how long each followed loop runs: long enough that
// the clients' connecting is a small part of it.
const liveIterations = 400

// BenchmarkWebLive runs a loop of liveIterations iterations per op while
// N Go clients follow its /runs/{id}/events as a page's EventSource does
// (Bearer token, Last-Event-ID not needed: each connects once). Its
// figures: ns/iteration of the loop while every client was connected (from
// the chain's IterationStarted times), p99-ms from an action's record to
// its event in a client, and ralph web's RSS growth per connected client.
func BenchmarkWebLive(b *testing.B) {
	for _, n := range []int{0, 50} {
		b.Run(fmt.Sprintf("browsers=%d", n), func(b *testing.B) { benchLive(b, n) })
	}
}

func benchLive(b *testing.B, clients int) {
	h := newHome(b, b.TempDir())
	store := filepath.Join(h.dir, "store")
	h.record(b, "warm.toml", loopConfig(store, 1, 1)) // the store exists, ralph web has a run to show
	w := h.startWeb(b, store)
	if _, err := w.get("/"); err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(h.dir, "live.toml")
	if err := os.WriteFile(cfg, []byte(loopConfig(store, liveIterations, 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	var perIter time.Duration
	var lat []time.Duration
	var perClient float64
	b.ResetTimer()
	for range b.N {
		r := followRun(b, h, w, store, cfg, clients)
		perIter += r.perIteration
		lat = append(lat, r.latencies...)
		perClient += r.bytesPerClient
	}
	b.StopTimer()
	b.ReportMetric(float64(perIter.Nanoseconds())/float64(b.N), "ns/iteration")
	if clients > 0 {
		slices.Sort(lat)
		if len(lat) == 0 {
			b.Fatal("no client received an event it was connected for")
		}
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(perClient/float64(b.N), "B/client")
	}
}

// followed is what one followed run measured.
type followed struct {
	perIteration   time.Duration
	latencies      []time.Duration
	bytesPerClient float64
}

// followRun runs cfg's loop with clients following it, and measures.
func followRun(b *testing.B, h *home, w *web, store, cfg string, clients int) followed {
	before := rss(b, w.cmd.Process.Pid)
	known := h.runIDs(b, store)
	run := h.cmd("run", cfg, "--no-tui")
	if err := run.Start(); err != nil {
		b.Fatal(err)
	}
	id := h.newRun(b, store, known)
	cs := make([]*sseClient, clients)
	var wg sync.WaitGroup
	for i := range cs {
		cs[i] = &sseClient{connected: make(chan struct{})}
		wg.Go(func() { cs[i].follow(w, id) })
	}
	for i, c := range cs {
		select {
		case <-c.connected:
		case <-time.After(2 * time.Minute):
			b.Fatalf("client %d of %d had no answer to its GET within two minutes", i+1, clients)
		}
		if c.err != nil {
			b.Fatalf("client %d of %d: %v", i+1, clients, c.err)
		}
	}
	all := time.Now()
	var with int64
	if clients > 0 {
		with = rss(b, w.cmd.Process.Pid)
	}
	if err := run.Wait(); err != nil {
		b.Fatalf("ralph run: %v", err)
	}
	wg.Wait()
	bySeq, iters := h.chainTimes(b, store, id)
	var out followed
	i := slices.IndexFunc(iters, func(t time.Time) bool { return t.After(all) })
	if i < 0 || len(iters)-i < 10 {
		b.Fatalf("only %d of %d iterations started once every client was connected", len(iters)-max(i, 0), len(iters))
	}
	out.perIteration = iters[len(iters)-1].Sub(iters[i]) / time.Duration(len(iters)-1-i)
	for _, c := range cs {
		if c.err != nil {
			b.Fatalf("a client: %v", c.err)
		}
		for _, g := range c.got {
			if at, ok := bySeq[g.seq]; ok && at.After(c.since) {
				out.latencies = append(out.latencies, g.at.Sub(at))
			}
		}
	}
	if clients > 0 {
		out.bytesPerClient = float64(with-before) / float64(clients)
	}
	return out
}

// runIDs are the ids of the store's runs.
func (h *home) runIDs(tb testing.TB, store string) map[string]bool {
	tb.Helper()
	ids, err := h.tryRunIDs(store)
	if err != nil {
		tb.Fatal(err)
	}
	return ids
}

// tryRunIDs is runIDs, or why `ralph runs` could not say.
func (h *home) tryRunIDs(store string) (map[string]bool, error) {
	out, err := h.cmd("runs", "--json", "--store", store).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ralph runs --json: %v\n%s", err, out)
	}
	ids := map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var r struct {
			ID string `json:"id"`
		}
		if err := dec.Decode(&r); err != nil {
			break
		}
		ids[r.ID] = true
	}
	return ids, nil
}

// newRun waits for a run not in known to appear, and returns its id. While
// the run's process starts, `ralph runs` may find the store locked before
// its socket answers: that is tried again.
func (h *home) newRun(tb testing.TB, store string, known map[string]bool) string {
	tb.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var ids map[string]bool
		if ids, err = h.tryRunIDs(store); err != nil {
			continue
		}
		for id := range ids {
			if !known[id] {
				return id
			}
		}
	}
	tb.Fatalf("the run did not appear in ralph runs within a minute (%v)", err)
	return ""
}

// get is path from ralph web with its token as a Bearer.
func (w *web) get(path string) (*http.Response, error) {
	req, err := http.NewRequest("GET", w.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp, err
}

// sseClient follows a run's events as a page's EventSource would, and
// keeps when each action's event came.
type sseClient struct {
	connected chan struct{}
	since     time.Time // when its stream opened
	got       []received
	err       error
}

type received struct {
	seq uint64
	at  time.Time
}

func (c *sseClient) follow(w *web, id string) {
	defer func() {
		select {
		case <-c.connected:
		default:
			close(c.connected)
		}
	}()
	resp, err := w.get("/runs/" + id + "/events")
	if err != nil {
		c.err = err
		return
	}
	defer resp.Body.Close()
	c.since = time.Now()
	close(c.connected)
	c.err = e2e.ReadSSE(resp.Body, func(ev e2e.SSEEvent) bool {
		at := time.Now()
		if ev.Type == "action" {
			var a struct {
				Seq uint64 `json:"seq"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &a); err != nil {
				c.err = fmt.Errorf("an action event's data %q: %w", ev.Data, err)
				return false
			}
			c.got = append(c.got, received{a.Seq, at})
		}
		return ev.Type != "end"
	})
}
