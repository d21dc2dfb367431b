package ledger

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/ralphloop/ralph/rtfs"
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
//   - prove-1M: one RFC 6962 inclusion proof (ProveInclusion, checked
//     against the checkpoint's root) in a store of 1M actions.
//   - consistency-1M: one consistency proof from a random earlier size to
//     the 1M-action tree, checked.
//   - import-1M: ImportStream of 1M JSON lines into a new store in a child
//     process; it reports the child's peak RSS.
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
	millionStore := sync.OnceValue(func() *Store { return newMillionStore(b) })
	b.Run("prove-1M", func(b *testing.B) { benchProve(b, millionStore()) })
	b.Run("consistency-1M", func(b *testing.B) { benchConsistency(b, millionStore()) })
	b.Run("import-1M", benchImportRSS)
}

const millionActions = 1_000_000

// millionAction is a small action (about 130 bytes encoded): proof costs
// do not depend on the size of an action.
func millionAction(i int) Action {
	return Action{ActionID: fmt.Sprintf("m-%07d", i), RunID: "run-m", Type: CapabilityCall, FunctionName: "shell.exec",
		Success: true, Timestamp: baseTime.Add(time.Duration(i) * time.Microsecond)}
}

// newMillionStore appends 1M actions in commits of 4096 (as an import
// does) without fsync.
func newMillionStore(b *testing.B) *Store {
	s, err := Open(Options{Dir: filepath.Join(b.TempDir(), "million")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for start := 0; start < millionActions; start += importChunk {
		req := &request{done: make(chan struct{})}
		for i := start; i < min(start+importChunk, millionActions); i++ {
			a := millionAction(i)
			p, err := s.prepare(&a)
			if err != nil {
				b.Fatal(err)
			}
			p.fresh = true // ids are unique by construction
			req.items = append(req.items, p)
		}
		if err := s.submit(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	// Reopen, so that the proofs read a settled LSM tree, not one that
	// compactions are still rewriting (as a store is when ralph chain
	// prove runs).
	dir := s.Dir()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	s, err = Open(Options{Dir: dir, ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchProve(b *testing.B, s *Store) {
	ctx := context.Background()
	n := s.Head().Seq
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		seq := 1 + uint64(i)*7919%n
		p, err := s.ProveInclusion(ctx, seq)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchConsistency(b *testing.B, s *Store) {
	ctx := context.Background()
	n := s.Head().Seq
	cp, err := s.LatestCheckpoint()
	if err != nil {
		b.Fatal(err)
	}
	// The roots of the earlier sizes, as a witness would hold them.
	sizes := make([]uint64, 64)
	roots := make([]Hash, len(sizes))
	err = s.view(func(txn *badger.Txn) error {
		r := newTreeReader(ctx, txn)
		defer r.close()
		for i := range sizes {
			sizes[i] = 1 + uint64(i)*104729%(n-1)
			cr, err := r.compactRange(s.rf, sizes[i])
			if err != nil {
				return err
			}
			root, err := cr.GetRootHash(nil)
			if err != nil {
				return err
			}
			copy(roots[i][:], root)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % len(sizes)
		hs, err := s.ProveConsistency(ctx, sizes[k], n)
		if err != nil {
			b.Fatal(err)
		}
		if err := VerifyConsistency(sizes[k], n, hs, roots[k], cp.Root); err != nil {
			b.Fatal(err)
		}
	}
}

const importChildEnv = "RALPH_LEDGER_IMPORT_CHILD_DIR"

// TestImportChild is the child process of import-1M: it streams 1M JSON
// lines into ImportStream on a new store and exits.
func TestImportChild(t *testing.T) {
	dir := os.Getenv(importChildEnv)
	if dir == "" {
		t.Skip("runs only as the child of BenchmarkLedger/import-1M")
	}
	debug.SetMemoryLimit(ImportMemoryLimit) // as ralph chain import does
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 64<<10)
		var buf []byte
		for i := range millionActions {
			a := millionAction(i)
			a.Arguments = []rtfs.Value{rtfs.String(strings.Repeat("x", 200))}
			buf = append(AppendJSON(buf[:0], &a), '\n')
			bw.Write(buf)
		}
		pw.CloseWithError(bw.Flush())
	}()
	s, err := Open(Options{Dir: dir, KeyDir: filepath.Join(dir, "..", "keys"), SyncWrites: true, LowMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.ImportStream(context.Background(), pr)
	if err != nil || rep.Actions != millionActions {
		t.Fatalf("import: %+v %v", rep, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// benchImportRSS runs the import in a child process and reports its peak
// resident set size (getrusage's ru_maxrss).
func benchImportRSS(b *testing.B) {
	var peak int64
	start := time.Now()
	for range b.N {
		dir := filepath.Join(b.TempDir(), "store")
		cmd := exec.Command(os.Args[0], "-test.run=^TestImportChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), importChildEnv+"="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("import child: %v\n%s", err, out)
		}
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			b.Skip("no rusage on this platform")
		}
		peak = max(peak, ru.Maxrss) // KiB on Linux
	}
	reportRate(b, b.N*millionActions, time.Since(start))
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
}

func reportRate(b *testing.B, actions int, elapsed time.Duration) {
	b.ReportMetric(float64(actions)/elapsed.Seconds(), "actions/s")
}

// cpuTime is the CPU time (user + system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per action since start: unlike the rate,
// it does not depend on how much of the machine other processes take.
func reportCPU(b *testing.B, actions int, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(actions), "cpu-ns/action")
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
	start, cpu := time.Now(), cpuTime()
	var rep VerifyReport
	for range b.N {
		var err error
		if rep, err = s.Verify(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N*verifyStoreActions, time.Since(start))
	reportCPU(b, b.N*verifyStoreActions, cpu)
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
	start, cpu := time.Now(), cpuTime()
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
	reportCPU(b, n, cpu)
}
