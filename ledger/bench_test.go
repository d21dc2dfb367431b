package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// BenchmarkLedger measures the ledger against raw Badger doing the same
// work in the same run. Every sub-benchmark reports actions/s.
//
//   - append-durable-N: N goroutines Append ~500-byte actions, SyncWrites on.
//   - append-nosync-16: the same without fsync.
//   - verify: Verify over a store built by 16 concurrent durable appenders
//     (it reports how many actions each checkpoint signs: every checkpoint
//     costs one Ed25519 verification, ~70µs here).
//   - verify-action: VerifyAction of one action of the verify store (seqs
//     spread over the whole store): the proof the UI's detail view asks
//     for, against a checkpoint about 16 actions away. It reports time per
//     proof and the links each walked.
//   - raw-batch-durable: Badger WriteBatches of 16 ~500-byte values, each
//     flushed (one fsync) before the next, SyncWrites on: the best 16
//     waiting writers could get from bare Badger with a perfect group
//     commit, without encoding, hashing, indexes or signatures.
//   - raw-batch-durable-bulk: one WriteBatch of b.N values, flushed once:
//     Badger's ceiling when nobody waits for an acknowledgement.
//   - raw-scan-hash: a raw Badger scan of the verify store's actions with
//     SHA-256 of each value.
func BenchmarkLedger(b *testing.B) {
	b.Run("append-durable-1", func(b *testing.B) { benchAppend(b, true, 1) })
	b.Run("append-durable-16", func(b *testing.B) { benchAppend(b, true, 16) })
	b.Run("append-nosync-16", func(b *testing.B) { benchAppend(b, false, 16) })
	verifyStore := sync.OnceValue(func() *Store { return newVerifyStore(b) })
	b.Run("verify", func(b *testing.B) { benchVerify(b, verifyStore()) })
	b.Run("verify-action", func(b *testing.B) { benchVerifyAction(b, verifyStore()) })
	b.Run("raw-batch-durable", func(b *testing.B) { benchRawBatch(b, 16) })
	b.Run("raw-batch-durable-bulk", func(b *testing.B) { benchRawBatch(b, b.N) }) // one batch, one fsync
	b.Run("raw-scan-hash", func(b *testing.B) { benchRawScan(b, verifyStore()) })
}

func reportRate(b *testing.B, actions int, elapsed time.Duration) {
	b.ReportMetric(float64(actions)/elapsed.Seconds(), "actions/s")
}

// benchTemplate is a ~500-byte action (encoded) without an id, so Append
// gives each copy its own.
func benchTemplate() Action {
	a := *sample(7)
	a.ActionID, a.ParentActionID = "", ""
	return a
}

func benchAppend(b *testing.B, sync bool, workers int) {
	s, err := Open(Options{Dir: filepath.Join(b.TempDir(), "store"), SyncWrites: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tmpl := benchTemplate()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	runWorkers(b.N, workers, func(int) {
		a := tmpl
		if _, err := s.Append(context.Background(), &a); err != nil {
			b.Error(err)
		}
	})
	reportRate(b, b.N, time.Since(start))
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(countCheckpoints(b, s)), "actions/commit")
}

func countCheckpoints(b *testing.B, s *Store) int {
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixCheckpoint)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return max(n, 1)
}

// runWorkers runs fn n times spread over workers goroutines.
func runWorkers(n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

const verifyStoreActions = 50_000

// newVerifyStore builds a store the way a busy loop with the default
// sync_writes = true would: 16 concurrent durable appenders, so each
// checkpoint signs the group of actions one fsync made durable.
func newVerifyStore(b *testing.B) *Store {
	s, err := Open(Options{Dir: filepath.Join(b.TempDir(), "verify"), SyncWrites: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	tmpl := benchTemplate()
	runWorkers(verifyStoreActions, 16, func(int) {
		a := tmpl
		if _, err := s.Append(context.Background(), &a); err != nil {
			b.Error(err)
		}
	})
	return s
}

func benchVerify(b *testing.B, s *Store) {
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var rep VerifyReport
	for range b.N {
		var err error
		if rep, err = s.Verify(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N*verifyStoreActions, time.Since(start))
	b.ReportMetric(float64(rep.Actions)/float64(rep.Checkpoints), "actions/checkpoint")
}

func benchVerifyAction(b *testing.B, s *Store) {
	n := s.Head().Seq
	ctx := context.Background()
	links := uint64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// A stride prime to n visits the store's actions in a scattered
		// order, so the proofs are not served from one cached block.
		seq := 1 + uint64(i)*7919%n
		p, err := s.VerifyAction(ctx, seq)
		if err != nil {
			b.Fatal(err)
		}
		if !p.OK() {
			b.Fatalf("proof of %d: %q", seq, p.Problems)
		}
		links += p.Links
	}
	b.ReportMetric(float64(links)/float64(b.N), "links/proof")
}

func benchValue() []byte {
	v := make([]byte, 500)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	return v
}

func openRaw(b *testing.B) *badger.DB {
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(b.TempDir(), "raw")).
		WithSyncWrites(true).WithLogger(nil).WithMemTableSize(defaultMemTableSize).
		WithNumMemtables(2).WithBlockCacheSize(defaultBlockCacheSize).WithValueLogFileSize(valueLogFileSize).
		WithNumCompactors(2).WithMetricsEnabled(false))
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// benchRawBatch writes perFlush values per WriteBatch and flushes each
// batch (one fsync) before the next: an ideal group commit of perFlush
// writers with no work besides Badger's.
func benchRawBatch(b *testing.B, perFlush int) {
	db := openRaw(b)
	defer db.Close()
	val := benchValue()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += perFlush {
		wb := db.NewWriteBatch()
		for j := i; j < min(i+perFlush, b.N); j++ {
			if err := wb.Set(binary.BigEndian.AppendUint64([]byte("a/"), uint64(j)), val); err != nil {
				b.Fatal(err)
			}
		}
		if err := wb.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N, time.Since(start))
}

func benchRawScan(b *testing.B, s *Store) {
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	n := 0
	for range b.N {
		err := s.db.View(func(txn *badger.Txn) error {
			// No value prefetch, as in Verify: the values live in the LSM
			// tree, and prefetching only copies each one once more on a
			// goroutine of its own (it makes this scan about a third
			// slower here).
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction)})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				if err := it.Item().Value(func(v []byte) error {
					sha256.Sum256(v)
					return nil
				}); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, n, time.Since(start))
}
