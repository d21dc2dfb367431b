package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/ledger"
)

// BenchmarkFleet measures the fleet's figures (DESIGN §15,
// docs/benchmarks.md) against an embedded single node.
func BenchmarkFleet(b *testing.B) {
	b.Run("replication-lag", func(b *testing.B) { benchReplicationLag(b, 1) })
	b.Run("replication-lag-16-runs", func(b *testing.B) { benchReplicationLag(b, 16) })
}

type ack struct {
	seq uint64
	at  time.Time
}

// lagRun is one replicated run store of the benchmark.
type lagRun struct {
	id   string
	st   *ledger.Store
	acks chan ack
	i    int
}

func newLagRun(b *testing.B, js jetstream.JetStream, id string) *lagRun {
	st, err := ledger.Open(ledger.Options{Dir: b.TempDir(), KeyDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	run := &lagRun{id: id, st: st, acks: make(chan ack, 1024)}
	r, err := fleet.Replicate(context.Background(), js, st, id, 1, 0, fleet.WithAckHook(func(kind string, seq uint64, at time.Time) {
		if kind == ledger.BundleCheckpoint {
			run.acks <- ack{seq, at}
		}
	}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close(context.Background()) })
	return run
}

// lag appends one action and waits until the stream acknowledges the
// checkpoint that covers it: the action and its signature are then in
// the stream.
func (run *lagRun) lag(b *testing.B) time.Duration {
	start := time.Now()
	rc, err := run.st.Append(context.Background(), action(run.id, run.i))
	if err != nil {
		b.Fatal(err)
	}
	run.i++
	for a := range run.acks {
		if a.seq >= rc.Seq {
			return a.at.Sub(start)
		}
	}
	return 0
}

// benchReplicationLag: the lag from an append to a run's store on disk
// until the stream acknowledges it, p50 and p99, with runs stores
// appending one action at a time each, all at once.
func benchReplicationLag(b *testing.B, runs int) {
	js, _ := newFleet(b)
	pool := make([]*lagRun, runs)
	for i := range pool {
		pool[i] = newLagRun(b, js, fmt.Sprintf("bench%d", i))
	}
	var (
		mu   sync.Mutex
		lags []time.Duration
		next atomic.Int64
	)
	b.ResetTimer()
	if runs == 1 {
		for b.Loop() {
			lags = append(lags, pool[0].lag(b))
		}
	} else {
		b.SetParallelism((runs + 1) / 2)
		b.RunParallel(func(pb *testing.PB) {
			run := pool[int(next.Add(1)-1)%runs]
			var mine []time.Duration
			for pb.Next() {
				mine = append(mine, run.lag(b))
			}
			mu.Lock()
			lags = append(lags, mine...)
			mu.Unlock()
		})
	}
	b.StopTimer()
	slices.Sort(lags)
	pct := func(p float64) float64 {
		return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
