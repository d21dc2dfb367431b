package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

func sinkCfg(kind string, mod func(*config.Notify)) config.Notify {
	r := 0
	c := config.Notify{Name: kind, Kind: kind, Timeout: config.Duration{Duration: 2 * time.Second}, Retries: &r}
	if mod != nil {
		mod(&c)
	}
	return c
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func runEnd(runID string) loop.Event {
	return loop.Event{Kind: loop.EventAction, RunID: runID, Time: time.Now(), Action: &ledger.Action{Type: ledger.RunFailed, Cost: 0.25,
		Metadata: map[string]rtfs.Value{"class": rtfs.String("failure"), "condition": rtfs.String("tests"),
			"reason": rtfs.String("go test exited 1"), "iterations": rtfs.Int(4)}}}
}

// A webhook gets the JSON body with a Slack-compatible text, the event
// header and, with secret_env, the HMAC-SHA256 of the body.
func TestWebhookBodyAndSignature(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies [][]byte
	var sigs, events []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, sigs, events = append(bodies, b), append(sigs, r.Header.Get(SignatureHeader)), append(events, r.Header.Get(EventHeader))
		mu.Unlock()
	}))
	defer srv.Close()
	n, err := New(Options{Sinks: []config.Notify{sinkCfg("webhook", func(c *config.Notify) { c.URLEnv, c.SecretEnv = "HOOK_URL", "HOOK_KEY" })},
		Env: envOf(map[string]string{"HOOK_URL": srv.URL, "HOOK_KEY": "k3y"})})
	if err != nil {
		t.Fatal(err)
	}
	events2 := make(chan loop.Event, 2)
	events2 <- loop.Event{Kind: loop.EventApprove, RunID: "run-1", Iteration: 3, Time: time.Now()}
	events2 <- runEnd("run-1")
	<-n.Follow(context.Background(), events2)
	if len(bodies) != 2 {
		t.Fatalf("%d bodies", len(bodies))
	}
	var got Event
	if err := json.Unmarshal(bodies[1], &got); err != nil {
		t.Fatal(err)
	}
	want := "ralph: run run-1 failed after 4 iteration(s) ($0.2500): failure by tests — go test exited 1"
	if got.Event != RunEnded || got.Text != want || got.State != "failed" || got.Class != "failure" || got.Condition != "tests" || got.CostUSD != 0.25 {
		t.Errorf("body %s", bodies[1])
	}
	if sigs[1] != Sign([]byte("k3y"), bodies[1]) || !strings.HasPrefix(sigs[1], "sha256=") || events[0] != ApprovalNeeded || events[1] != RunEnded {
		t.Errorf("headers %q %q", sigs, events)
	}
}

// 5xx answers are retried with backoff; a 4xx is not.
func TestWebhookRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	three := 3
	w, err := newWebhook(config.Notify{URL: srv.URL, Timeout: config.Duration{Duration: time.Second}, Retries: &three}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	w.backoff = time.Millisecond
	if err := w.Send(context.Background(), Event{Event: RunEnded}); err != nil || calls.Load() != 3 {
		t.Fatalf("err %v after %d calls, want success on the third", err, calls.Load())
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); w.WriteHeader(http.StatusNotFound) }))
	defer bad.Close()
	calls.Store(0)
	w.url = bad.URL
	if err := w.Send(context.Background(), Event{Event: RunEnded}); err == nil || calls.Load() != 1 || !strings.Contains(err.Error(), "answered 404 Not Found; check the URL") {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
}

// A server that never answers costs each attempt its timeout; the failure
// says so, after every attempt.
func TestWebhookTimeout(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	one := 1
	w, err := newWebhook(config.Notify{URL: srv.URL, Timeout: config.Duration{Duration: 50 * time.Millisecond}, Retries: &one}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	w.backoff = time.Millisecond
	err = w.Send(context.Background(), Event{Event: RunEnded})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 50ms (after 2 attempts)") {
		t.Fatalf("err %v", err)
	}
}

// A url_env that is unset, or holds no URL, is refused with the place.
func TestWebhookURLFromEnv(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"":             "ralph.toml:7: [[notify]] webhook: url_env names HOOK_URL, which is not set; export it with the webhook's URL",
		"hooks.local/": `ralph.toml:7: [[notify]] webhook: HOOK_URL holds "hooks.local/" is not an http(s) URL; write it like https://example.com/hook`,
	} {
		_, err := New(Options{File: "ralph.toml", Sinks: []config.Notify{sinkCfg("webhook", func(c *config.Notify) { c.URLEnv, c.Line = "HOOK_URL", 7 })},
			Env: envOf(map[string]string{"HOOK_URL": env})})
		if err == nil || err.Error() != want {
			t.Errorf("HOOK_URL=%q: got %v", env, err)
		}
	}
}

// The command sink gets the event as JSON on stdin; its failure is
// recorded on the chain as NotifyFailed, and `on` filters events.
func TestCommandSinkAndFailureRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	var recorded []*ledger.Action
	n, err := New(Options{Workdir: dir, Sinks: []config.Notify{
		sinkCfg("command", func(c *config.Notify) {
			c.Name, c.Cmd, c.On = "save", []string{"sh", "-c", "cat >> got.jsonl"}, []string{RunEnded}
		}),
		sinkCfg("command", func(c *config.Notify) { c.Name, c.Cmd = "broken", []string{"sh", "-c", "echo no route >&2; exit 7"} }),
	}, Record: func(_ context.Context, a *ledger.Action) error {
		mu.Lock()
		recorded = append(recorded, a)
		mu.Unlock()
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan loop.Event, 2)
	events <- loop.Event{Kind: loop.EventApprove, RunID: "run-2", Iteration: 1}
	events <- runEnd("run-2")
	<-n.Follow(context.Background(), events)
	data, err := os.ReadFile(filepath.Join(dir, "got.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got Event
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &got) != nil || got.Event != RunEnded {
		t.Fatalf("command got %q", data)
	}
	if len(recorded) != 2 {
		t.Fatalf("%d NotifyFailed, want 2 (one per event to the broken sink)", len(recorded))
	}
	for _, a := range recorded {
		if a.Type != ledger.NotifyFailed || a.RunID != "run-2" || a.FunctionName != "broken" || a.ErrorMessage != "sh exited with status 7: no route" {
			t.Errorf("recorded %+v", a)
		}
	}
}

// A full queue drops events with a count, never blocking Follow's reader;
// the next notification delivered carries the count, and the end records it.
func TestQueueDropsWhenFull(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var got []Event
	var mu sync.Mutex
	s := &sink{cfg: config.Notify{Name: "slow", Kind: "command"}, send: senderFunc(func(ctx context.Context, e Event) error {
		<-release
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
		return nil
	})}
	var recorded []*ledger.Action
	n := &Notifier{o: Options{Queue: 2, Grace: 5 * time.Second, Logger: discardLogger(),
		Record: func(_ context.Context, a *ledger.Action) error { recorded = append(recorded, a); return nil }}, sinks: []*sink{s}}
	events := make(chan loop.Event)
	done := n.Follow(context.Background(), events)
	for i := range 50 { // unbuffered: each send returns only once Follow's reader took it
		events <- loop.Event{Kind: loop.EventWait, RunID: "run-3", Until: time.Now().Add(time.Hour), Text: "limit"}
		events <- loop.Event{Kind: loop.EventAction, RunID: "run-3", Action: &ledger.Action{Type: ledger.IterationStarted, Timestamp: time.Now().Add(2 * time.Hour)}}
		_ = i
	}
	events <- runEnd("run-3")
	close(release)
	<-done
	total := 0
	for _, e := range got {
		total += 1 + e.Dropped
	}
	if s.q != nil {
		t.Error("Follow used the Notifier's sink, not a queue of its own")
	}
	var last int
	if len(recorded) == 1 {
		_, _ = fmtSscanf(recorded[0].ErrorMessage, &last)
	}
	if total+last != 101 || len(got) > 4 {
		t.Fatalf("%d delivered, %d counted as dropped on them, %d at the end (%v); want 101 in all", len(got), total-len(got), last, recorded)
	}
}

// The translator warns once per no_progress streak one iteration from the
// stop, and notifies each budget threshold once.
func TestTranslatorConditions(t *testing.T) {
	t.Parallel()
	var tr translator
	eval := func(it int, np string, cost float64) []Event {
		ev := &stop.Evaluation{Iteration: it, Results: []stop.Result{
			{Name: "stuck", Kind: "no_progress", Detail: np},
			{Name: "budget", Kind: "max_cost", Progress: cost / 5, Detail: fmt.Sprintf("$%.2f/$5.00", cost)},
		}}
		return tr.next(&loop.Event{Kind: loop.EventConditions, RunID: "r", Evaluation: ev})
	}
	names := func(es []Event) string {
		var s []string
		for _, e := range es {
			s = append(s, fmt.Sprintf("%s:%d", e.Event, e.Percent))
		}
		return strings.Join(s, ",")
	}
	steps := []struct {
		np   string
		cost float64
		want string
	}{
		{"no progress 1/3", 1, ""},
		{"no progress 2/3", 2.6, "no_progress_warning:0,budget:50"},
		{"no progress 2/3", 2.7, ""},
		{"no progress 0/3", 4.5, "budget:80"},
		{"no progress 2/3", 4.9, "no_progress_warning:0"},
		{"no progress 3/3", 5, "budget:100"},
	}
	for i, s := range steps {
		if got := names(eval(i+1, s.np, s.cost)); got != s.want {
			t.Errorf("iteration %d: got %q, want %q", i+1, got, s.want)
		}
	}
}

// A usage-limit wait is notified once, from the RateLimitWait action or
// from the provider's wait event, and its end with the first action after it.
func TestTranslatorRateLimit(t *testing.T) {
	t.Parallel()
	var tr translator
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wait := &ledger.Action{Type: ledger.RateLimitWait, FunctionName: "usage_limit", Metadata: map[string]rtfs.Value{
		"until": rtfs.String(until.Format(time.RFC3339Nano)), "message": rtfs.String("5-hour limit reached"), "iteration": rtfs.Int(3)}}
	steps := []struct {
		e    loop.Event
		want string
	}{
		{loop.Event{Kind: loop.EventAction, RunID: "r", Action: wait}, RateLimitWait},
		{loop.Event{Kind: loop.EventWait, RunID: "r", Until: until, Text: "agent usage_limit"}, ""}, // the same wait
		{loop.Event{Kind: loop.EventAction, RunID: "r", Action: &ledger.Action{Type: ledger.StopConditionsEvaluated, Timestamp: until.Add(-time.Minute)}}, ""},
		{loop.Event{Kind: loop.EventAction, RunID: "r", Action: &ledger.Action{Type: ledger.IterationStarted, Timestamp: until.Add(time.Second)}}, RateLimitOver},
		{loop.Event{Kind: loop.EventWait, RunID: "r", Until: until.Add(time.Hour), Text: "429 Too Many Requests"}, RateLimitWait},
		{runEnd("r"), RateLimitOver + "," + RunEnded}, // a run that ends during a wait
	}
	for i, s := range steps {
		var got []string
		for _, n := range tr.next(&s.e) {
			got = append(got, n.Event)
			if n.Event == RateLimitWait && i == 0 && (n.Iteration != 3 || !n.Until.Equal(until) || n.Reason != "5-hour limit reached" ||
				!strings.Contains(n.Text, "waits for the agent's usage_limit until")) {
				t.Errorf("wait notification %+v", n)
			}
		}
		if g := strings.Join(got, ","); g != s.want {
			t.Errorf("step %d: got %q, want %q", i, g, s.want)
		}
	}
}
