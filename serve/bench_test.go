package serve

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// BenchmarkServe measures the socket against the store it serves:
//   - event-latency: one Append to the run's chain until a client
//     subscribed through the socket receives its event (p50 and p99 in ms);
//   - actions-stream: actions/s a client reads from GET /v1/actions
//     (NDJSON) over a 100k-action store;
//   - range-inprocess: actions/s of ledger Range over the same store in
//     this process, the baseline actions-stream is compared with.
func BenchmarkServe(b *testing.B) {
	b.Run("event-latency", benchEventLatency)
	big := sync.OnceValue(func() *ledger.Store { return bigStore(b, 100_000) })
	b.Run("actions-stream", func(b *testing.B) { benchActionsStream(b, big()) })
	b.Run("range-inprocess", func(b *testing.B) { benchRangeInProcess(b, big()) })
}

func benchEventLatency(b *testing.B) {
	st, err := ledger.Open(ledger.Options{Dir: filepath.Join(b.TempDir(), "store")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	srv, err := Start(Options{Store: st, Runner: &fakeRunner{bus: loop.NewBus(st, "r1"), id: "r1"}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c, err := Dial(context.Background(), st.Dir())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := c.Events(ctx, 1, false)
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r, err := st.Append(ctx, action("r1", i, "payload"))
		if err != nil {
			b.Fatal(err)
		}
		for e := range events {
			if e.Kind == loop.EventAction && e.Action.Seq == r.Seq {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// bigStore imports n ~500-byte actions into a new on-disk store.
func bigStore(b *testing.B, n int) *ledger.Store {
	dir := filepath.Join(b.TempDir(), "store")
	st, err := ledger.Open(ledger.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var buf bytes.Buffer
	payload := fmt.Sprintf("%0400d", 7)
	for i := 0; i < n; i++ {
		buf.Write(ledger.AppendJSON(nil, action("r1", i, payload)))
		buf.WriteByte('\n')
	}
	if _, err := st.Import(context.Background(), &buf); err != nil {
		b.Fatal(err)
	}
	return st
}

func benchActionsStream(b *testing.B, st *ledger.Store) {
	srv, err := Start(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c, err := Dial(context.Background(), st.Dir())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if err := c.Range(1, func(a ledger.Action) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "actions/s")
}

func benchRangeInProcess(b *testing.B, st *ledger.Store) {
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if err := st.Range(1, func(a ledger.Action) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "actions/s")
}
