package web

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/rtfs"
)

// fleetSource is testSource with a fleet's overview.
type fleetSource struct {
	*testSource
	states  []fleet.RunState
	workers []fleet.WorkerState
}

func (f fleetSource) Overview(context.Context) ([]fleet.RunState, []fleet.WorkerState, error) {
	return f.states, f.workers, nil
}

func TestFleetPage(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	src := fleetSource{testSource: &testSource{st: f.st},
		states: []fleet.RunState{
			{RunID: "run-q", State: fleet.StateQueued, Goal: "waits"},
			{RunID: "run-r", State: fleet.StateRunning, Worker: "w1", SubmittedBy: "alice", Deliveries: 2},
			{RunID: "run-d", State: fleet.StateSucceeded, Worker: "w1", Deliveries: 1},
		},
		workers: []fleet.WorkerState{{ID: "w1", Host: "box", Slots: 2, Runs: []string{"run-r"}, Heartbeat: time.Now()}},
	}
	ts, _ := newTest(t, src)
	resp, body := get(t, ts.URL+"/fleet", "Authorization", bearer)
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
	section := func(id string) string {
		_, rest, _ := strings.Cut(body, `<section id="`+id+`"`)
		s, _, _ := strings.Cut(rest, "</section>")
		return s
	}
	for _, c := range []struct{ section, want string }{
		{"workers", `data-worker="w1"`}, {"workers", "1 of 2 busy"},
		{"running", `data-run="run-r"`}, {"queued", `data-run="run-q"`}, {"failovers", `data-run="run-r"`},
	} {
		if !strings.Contains(section(c.section), c.want) {
			t.Errorf("#%s lacks %q", c.section, c.want)
		}
	}
	if strings.Contains(section("queued"), "run-d") || strings.Contains(section("running"), "run-d") {
		t.Error("an ended run is listed as queued or running")
	}
}

func TestApproveForm(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, _ := newTest(t, &testSource{st: f.st, live: true, events: make(chan loop.Event)})
	_, body := get(t, ts.URL+"/runs/"+f.runID, "Authorization", bearer)
	for _, w := range []string{`button type="submit" name="do" value="pause"`, `id="approve" hidden`, `value="approve"`} {
		if !strings.Contains(body, w) {
			t.Errorf("a live run's page lacks %q", w)
		}
	}
	plan := func(it int) []ledger.Action {
		return []ledger.Action{
			{Type: ledger.IterationStarted, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it))}},
			{Type: ledger.PlanGenerated},
		}
	}
	if got := awaitingApproval(plan(4)); got != 4 {
		t.Errorf("a plan last: %d, want iteration 4", got)
	}
	if got := awaitingApproval(append(plan(4), ledger.Action{Type: ledger.PlanStarted})); got != 0 {
		t.Errorf("a plan started: %d, want 0", got)
	}
}

// BenchmarkSSEFanout streams a live run's events to 50 browsers at once
// through the real handler and one shared stream: events/s is what all
// the browsers received together.
func BenchmarkSSEFanout(b *testing.B) {
	const browsers, events = 50, 200
	f := quickstart(b)
	acts, err := f.st.ByRun(f.runID)
	if err != nil {
		b.Fatal(err)
	}
	head := acts[len(acts)-1].Seq
	live := make([]ledger.Action, events)
	for i := range live {
		live[i] = ledger.Action{Seq: head + 1 + uint64(i), RunID: f.runID, Type: ledger.CapabilityCall, FunctionName: "ccos.echo", Success: true, DurationMS: 3}
	}
	live[events-1].Type = ledger.RunCompleted
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		src := &testSource{st: f.st, live: true, events: make(chan loop.Event, 64)}
		srv, err := New(Options{Source: src, Token: testToken, Addr: "127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		h := srv.Handler()
		for range browsers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/runs/"+f.runID+"/events", nil)
				req.Header.Set("Authorization", bearer)
				h.ServeHTTP(discardWriter{h: http.Header{}}, req)
			}()
		}
		for srv.following(f.runID) < browsers { // every browser has joined
			runtime.Gosched()
		}
		for k := range live {
			src.events <- loop.Event{Kind: loop.EventAction, Action: &live[k]}
		}
		wg.Wait()
	}
	b.ReportMetric(float64(events*browsers*b.N)/b.Elapsed().Seconds(), "events/s")
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}
func (d discardWriter) Flush()                      {}

// refusingSource is a live run whose process gives no stream.
type refusingSource struct{ *testSource }

func (refusingSource) Events(context.Context, *mcpserver.Run, uint64) (<-chan loop.Event, error) {
	return nil, errors.New("the ralph process holding the store serves at most 64 streams.")
}

func TestLiveStreamRefused(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	ts, _ := newTest(t, refusingSource{&testSource{st: f.st, live: true}})
	resp, body := get(t, ts.URL+"/runs/"+f.runID+"/events", "Authorization", bearer)
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "event: unavailable\ndata: {\"why\":\"the ralph process holding the store serves at most 64 streams.\"}\n\n") || strings.Contains(body, "event: end") {
		t.Fatalf("a refused live stream: %d %q, want one unavailable event and no end", resp.StatusCode, body)
	}
}

// countingSource counts the streams asked of the run's process.
type countingSource struct {
	*testSource
	mu    sync.Mutex
	calls int
}

func (c *countingSource) Events(ctx context.Context, r *mcpserver.Run, from uint64) (<-chan loop.Event, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.testSource.Events(ctx, r, from)
}

func TestBrowsersShareOneStream(t *testing.T) {
	t.Parallel()
	f := quickstart(t)
	acts, _ := f.st.ByRun(f.runID)
	src := &countingSource{testSource: &testSource{st: f.st, live: true, events: make(chan loop.Event, 8)}}
	ts, _ := newTest(t, src)
	open := func() *http.Response {
		resp, err := client().Do(mustReq(t, ts.URL+"/runs/"+f.runID+"/events", "Authorization", bearer))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := open()
	src.events <- loop.Event{Kind: loop.EventState, State: "paused"}
	if names, _ := sse(t, first.Body, 2); strings.Join(names, ",") != "hello,state" {
		t.Fatalf("first browser: %v", names)
	}
	second := open() // joins late: told the state first
	head := acts[len(acts)-1].Seq
	src.events <- loop.Event{Kind: loop.EventAction, Action: &ledger.Action{Seq: head + 1, RunID: f.runID, Type: ledger.RunCompleted}}
	if names, _ := sse(t, second.Body, 10); strings.Join(names, ",") != "hello,state,action,end" {
		t.Fatalf("second browser: %v, want hello,state,action,end", names)
	}
	if names, _ := sse(t, first.Body, 10); strings.Join(names, ",") != "action,end" {
		t.Fatalf("first browser after: %v, want action,end", names)
	}
	if src.calls != 1 {
		t.Fatalf("%d streams asked of the run's process for two browsers, want 1", src.calls)
	}
}

// following is how many browsers follow run id now.
func (s *Server) following(id string) int {
	s.hubs.mu.Lock()
	h := s.hubs.by[id]
	s.hubs.mu.Unlock()
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
