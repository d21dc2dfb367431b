package fleet_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/ledger"
)

// BenchmarkFleet measures the fleet's figures (DESIGN §15,
// docs/benchmarks.md) against an embedded single node.
func BenchmarkFleet(b *testing.B) {
	b.Run("replication-lag", benchReplicationLag)
}

type ack struct {
	seq uint64
	at  time.Time
}

// benchReplicationLag: an action appended to a run's store on disk, until
// the stream acknowledges the checkpoint that covers it — the action and
// its signature are then in the stream. One append at a time; p50 and p99
// of the lag.
func benchReplicationLag(b *testing.B) {
	js, _ := newFleet(b)
	ctx := context.Background()
	st, err := ledger.Open(ledger.Options{Dir: b.TempDir(), KeyDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	acks := make(chan ack, 1024)
	r, err := fleet.Replicate(ctx, js, st, "bench", 1, 0, fleet.WithAckHook(func(kind string, seq uint64, at time.Time) {
		if kind == ledger.BundleCheckpoint {
			acks <- ack{seq, at}
		}
	}))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	var lags []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		rc, err := st.Append(ctx, action("bench", i))
		if err != nil {
			b.Fatal(err)
		}
		i++
		for a := range acks {
			if a.seq >= rc.Seq {
				lags = append(lags, a.at.Sub(start))
				break
			}
		}
	}
	b.StopTimer()
	slices.Sort(lags)
	pct := func(p float64) float64 {
		return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
