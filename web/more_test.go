package web

import (
	"context"
	"net/http"
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
// through the real handler: events/s is what every browser received.
func BenchmarkSSEFanout(b *testing.B) {
	const browsers = 50
	f := quickstart(b)
	acts, err := f.st.ByRun(f.runID)
	if err != nil {
		b.Fatal(err)
	}
	srcs := make([]*testSource, browsers)
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		// One source per browser: each stream has its own event channel,
		// as each socket stream has its own subscription.
		for i := range srcs {
			srcs[i] = &testSource{st: f.st, live: true, events: make(chan loop.Event, 64)}
		}
		i := 0
		srv, err := New(Options{Source: multiSource{srcs[0], srcs, &i, &sync.Mutex{}}, Token: testToken, Addr: "127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		h := srv.Handler()
		for range browsers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/runs/"+f.runID+"/events?from=1", nil)
				req.Header.Set("Authorization", bearer)
				h.ServeHTTP(discardWriter{h: http.Header{}}, req)
			}()
		}
		for _, s := range srcs {
			go func() {
				for k := range acts {
					s.events <- loop.Event{Kind: loop.EventAction, Action: &acts[k]}
				}
				close(s.events)
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(len(acts)*browsers*b.N)/b.Elapsed().Seconds(), "events/s")
}

// multiSource hands each stream the next source's events.
type multiSource struct {
	*testSource
	srcs []*testSource
	next *int
	mu   *sync.Mutex
}

func (m multiSource) pick() *testSource {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.srcs[*m.next%len(m.srcs)]
	*m.next++
	return s
}

func (m multiSource) Events(context.Context, *mcpserver.Run, uint64) (<-chan loop.Event, error) {
	return m.pick().events, nil
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}
func (d discardWriter) Flush()                      {}
