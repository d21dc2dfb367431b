package notify_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/notify"
)

// BenchmarkNotify/storm runs the same loop twice in one run, b.N
// iterations each: with no sink, then with a webhook that never answers
// and a storm of 1,000 notifications queued for it as the run starts. It
// reports each loop's time per iteration and added-ms/iter, the
// difference (target ≤ 1 ms): the loop never waits for a sink.
func BenchmarkNotify(b *testing.B) {
	b.Run("storm", func(b *testing.B) {
		hang, addr := notify.NeverAnswers(b)
		defer close(hang)
		n, err := notify.New(notify.Options{Sinks: []config.Notify{notify.SinkCfg("webhook", func(c *config.Notify) { c.URL = addr })},
			Logger: notify.DiscardLogger(), Grace: time.Millisecond})
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
// store, built as ralph run builds it (assemble.NewRun), with follow as its
// Follow, and returns how long Run took.
func runLoop(b *testing.B, iterations int, follow func(context.Context, <-chan loop.Event) <-chan struct{}) time.Duration {
	b.Helper()
	dir := b.TempDir()
	src := fmt.Sprintf("[plan]\nrtfs = '(step \"Echo\" (call :ccos.echo {:message \"hi\"}))'\n[store]\nsync_writes = false\n[[stop]]\nkind = \"max_iterations\"\nmax = %d\n", iterations)
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: assemble.InMemory})
	if err != nil {
		b.Fatal(err)
	}
	defer run.Store.Close()
	run.Options.Follow, run.Options.Logger = follow, notify.DiscardLogger()
	r, err := run.NewRunner()
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
