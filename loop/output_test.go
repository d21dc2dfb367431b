package loop

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/agent"
)

func TestOutputFileNames(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	o := &Orchestrator{o: OrchestratorOptions{LogDir: filepath.Join(store, LogsDir), Secrets: []string{"sk-secret-value"}}, storeDir: store}
	r := o.newRun(PlanInput{RunID: "run-1", PlanID: "plan-1"})
	first, ok := r.outputFile("step-a")
	second, _ := r.outputFile("step-a")
	other, _ := r.outputFile("step-b")
	if !ok || first.Path != filepath.Join(store, "logs", "run-1", "step-a.out") || first.Rel != "logs/run-1/step-a.out" {
		t.Errorf("first call: %+v", first)
	}
	if second.Rel != "logs/run-1/step-a.2.out" || other.Rel != "logs/run-1/step-b.out" {
		t.Errorf("second call in the step %q, another step %q", second.Rel, other.Rel)
	}
	if len(first.Redact) != 1 || first.Redact[0] != "sk-secret-value" {
		t.Errorf("redact %v, want the orchestrator's secrets", first.Redact)
	}
	// A plan run alone is named by its plan; a log directory outside the store is recorded whole.
	alone := (&Orchestrator{o: OrchestratorOptions{LogDir: "/var/log/ralph"}}).newRun(PlanInput{PlanID: "plan-1"})
	if f, _ := alone.outputFile("s"); f.Path != "/var/log/ralph/plan-1/s.out" || f.Rel != f.Path {
		t.Errorf("outside a run: %+v", f)
	}
	if _, ok := (&Orchestrator{}).newRun(PlanInput{}).outputFile("s"); ok {
		t.Error("an orchestrator without a log directory gave an output file")
	}
}

func TestStreamCut(t *testing.T) {
	t.Parallel()
	if s := streamCut("short"); s != "short" {
		t.Errorf("streamCut(short) = %q", s)
	}
	long := strings.Repeat("é", MaxStreamText) // 2 bytes each: the cut falls inside one
	s := streamCut(long)
	if !utf8.ValidString(s) || len(s) > MaxStreamText+64 || !strings.Contains(s, "bytes more in the call's output file") {
		t.Errorf("streamCut: %d bytes, valid %v, ends %q", len(s), utf8.ValidString(s), s[len(s)-60:])
	}
}

// A consumer that lags behind an agent's flood holds at most
// subscriberQueueBytes of its text; the rest is counted as dropped.
func TestBusBoundsTheTextItQueues(t *testing.T) {
	t.Parallel()
	_, fx := newRunner(t, `
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	b := NewBus(fx.store, "run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Subscribe(ctx, fx.store.Head().Seq+1) // read by nobody
	text := strings.Repeat("x", MaxStreamText)
	const n = 2000 // 16 MiB of text
	for range n {
		b.publish(Event{Kind: EventAgent, Agent: &agent.Event{Kind: agent.EventText, Text: text}})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.mu.Lock()
		queued, bytes, dropped := len(s.queue), s.bytes, s.dropped
		s.mu.Unlock()
		// The subscription's pump moves what it can into its channel, as
		// fast as the machine lets it: how many were dropped depends on
		// that, but some must have been, and the queue never holds more
		// than its bound.
		if bytes > subscriberQueueBytes || queued > subscriberQueueBytes/MaxStreamText || dropped == 0 {
			t.Errorf("queued %d events holding %d bytes, dropped %d; want at most %d bytes", queued, bytes, dropped, subscriberQueueBytes)
		}
	}
}

// What an agent streams reaches the UI and the printer bounded and valid
// UTF-8, whatever it printed.
func TestStreamAgentBoundedAndReadable(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	stream := r.streamAgent(1)
	stream(CallStream{CallID: "c", Event: &agent.Event{Kind: agent.EventText, Text: "bin\xff\xfe ary"}})
	stream(CallStream{CallID: "c", Event: &agent.Event{Kind: agent.EventText, Text: strings.Repeat("y", 1<<20)}})
	var got []string
	for len(got) < 2 {
		select {
		case e := <-events:
			if e.Kind == EventAgent {
				got = append(got, e.Agent.Text)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("streamed events did not arrive: %q", got)
		}
	}
	if got[0] != "bin\uFFFD ary" { // a run of invalid bytes becomes one U+FFFD
		t.Errorf("binary text streamed as %q", got[0])
	}
	if len(got[1]) > MaxStreamText+64 || !strings.HasSuffix(got[1], "bytes more in the call's output file]") {
		t.Errorf("a 1 MiB line streamed as %d bytes", len(got[1]))
	}
}
