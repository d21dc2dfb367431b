package notify

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// BenchmarkNotify/storm runs the same loop twice in one run, b.N
// iterations each: with no sink, then with a webhook that never answers
// and a storm of 1,000 notifications queued for it as the run starts. It
// reports each loop's time per iteration and added-ms/iter, the
// difference (target ≤ 1 ms): the loop never waits for a sink.
func BenchmarkNotify(b *testing.B) {
	b.Run("storm", func(b *testing.B) {
		hang, addr := neverAnswers(b)
		defer close(hang)
		n, err := New(Options{Sinks: []config.Notify{sinkCfg("webhook", func(c *config.Notify) { c.URL = addr })},
			Logger: discardLogger(), Grace: time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		storming := func(ctx context.Context, events <-chan loop.Event) <-chan struct{} {
			merged := make(chan loop.Event)
			go func() {
				defer close(merged)
				for i := range 1000 {
					e := loop.Event{Kind: loop.EventWait, RunID: "storm", Until: time.Now().Add(time.Hour), Text: "limit"}
					if i%2 == 1 {
						e = loop.Event{Kind: loop.EventApprove, RunID: "storm", Iteration: i}
					}
					merged <- e
				}
				for e := range events {
					merged <- e
				}
			}()
			return n.Follow(ctx, merged)
		}
		runLoop(b, b.N, nil) // warm up; then ABBA, so neither loop gains from going second
		none := runLoop(b, b.N, nil)
		storm := runLoop(b, b.N, storming)
		storm += runLoop(b, b.N, storming)
		none += runLoop(b, b.N, nil)
		none, storm = none/2, storm/2
		b.ReportMetric(float64(none.Nanoseconds())/float64(b.N), "ns/iter-none")
		b.ReportMetric(float64(storm.Nanoseconds())/float64(b.N), "ns/iter-storm")
		b.ReportMetric(float64((storm-none).Nanoseconds())/float64(b.N)/1e6, "added-ms/iter")
	})
}

// runLoop runs iterations iterations of a one-step loop on an in-memory
// store, with follow as its Follow, and returns how long Run took.
func runLoop(b *testing.B, iterations int, follow func(context.Context, <-chan loop.Event) <-chan struct{}) time.Duration {
	b.Helper()
	dir := b.TempDir()
	src := fmt.Sprintf("[plan]\nrtfs = '(step \"Echo\" (call :ccos.echo {:message \"hi\"}))'\n[store]\nsync_writes = false\n[[stop]]\nkind = \"max_iterations\"\nmax = %d\n", iterations)
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	store, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Workdir: dir, KV: store.KV()}); err != nil {
		b.Fatal(err)
	}
	orch, err := loop.NewOrchestrator(loop.OrchestratorOptions{Registry: reg, Governance: governance.New(governance.Constitution{}, reg, nil), Ledger: store, KV: store.KV()})
	if err != nil {
		b.Fatal(err)
	}
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		b.Fatal(err)
	}
	r, err := loop.NewRunner(loop.RunnerOptions{Config: cfg, Store: store, Orchestrator: orch, Provider: arbiter.StaticProvider{Source: cfg.Plan.RTFS},
		Conditions: conds, Intent: arbiter.Intent{Goal: "bench", Params: rtfs.MapValue(rtfs.NewMap())}, Follow: follow, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	out, err := r.Run(context.Background())
	took := time.Since(start)
	b.StopTimer()
	if err != nil || out.Iterations != iterations {
		b.Fatalf("run: %+v %v", out, err)
	}
	return took
}
