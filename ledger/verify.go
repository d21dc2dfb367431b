package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sync/errgroup"
)

// IntegrityError says where the stored chain stops agreeing with itself.
type IntegrityError struct {
	Seq    uint64
	Reason string
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("ledger verification failed at seq %d: %s", e.Seq, e.Reason)
}

// Problem is one disagreement Verify found.
type Problem struct {
	Seq    uint64
	Reason string
	rank   int // orders problems at the same seq: records, chain, checkpoints, indexes
}

// VerifyReport summarises a verification.
type VerifyReport struct {
	Actions      uint64 // actions read
	Checkpoints  uint64 // checkpoints read (each signature checked)
	IndexEntries uint64 // index entries read
	Head         Head   // the head record
	// TrustedKey is the verifier key every signature was checked with, and
	// Pinned says whether the caller gave it (VerifyOptions.Key) rather
	// than the store recording it.
	TrustedKey string
	Pinned     bool
	// Root is the Merkle root of every action, as the latest tree
	// checkpoint signs it (zero for a store without one).
	Root Hash
	// Consistent lists the saved checkpoints (VerifyOptions.Since) the
	// store was proved consistent with.
	Consistent []SavedCheckpoint
	// Problems in seq order, at most maxProblems of them; the first is the
	// one Verify returns as an *IntegrityError.
	Problems []Problem
}

// OK reports whether verification found nothing wrong.
func (r VerifyReport) OK() bool { return len(r.Problems) == 0 }

const (
	maxProblems    = 100
	progressEvery  = 4096
	rankRecord     = 0
	rankChain      = 1
	rankCheckpoint = 2
	rankIndex      = 3
)

// Verify re-derives the whole chain from one snapshot: it recomputes every
// action hash and chain link, checks that seq is gap-free and that the head
// is the last action, checks every checkpoint's Ed25519 signature (in
// parallel batches, see sigChecker) and the checkpoint each action names,
// and checks that the indexes hold exactly the entries a full scan implies.
// progress, if not nil, is called with the actions checked so far; calls
// never overlap and done never decreases.
//
// A chain that does not verify returns the report and an *IntegrityError
// naming the first bad seq and what broke; other errors mean verification
// could not run (context ended, store closed, read failure).
func (s *Store) Verify(ctx context.Context, progress func(done, total uint64)) (VerifyReport, error) {
	return s.VerifyWith(ctx, VerifyOptions{Progress: progress})
}

// VerifyOptions refine Verify.
type VerifyOptions struct {
	// Progress, if not nil, is called with the actions checked so far.
	Progress func(done, total uint64)
	// Key is the verifier key to trust (as `ralph chain key` prints it):
	// every checkpoint must be signed by it. Empty trusts the key the store
	// records, which anyone who can write the store can replace.
	Key string
	// Since are checkpoints saved outside the store (the witness, a file):
	// the store must hold at least as many actions as each and be
	// consistent with it (an RFC 6962 consistency proof).
	Since []SavedCheckpoint
}

// SavedCheckpoint is a signed checkpoint note kept outside the store, and
// where it came from (a file name, for messages).
type SavedCheckpoint struct {
	Name string
	Note []byte
}

// VerifyWith is Verify with options: a pinned key and saved checkpoints to
// prove the store consistent with.
func (s *Store) VerifyWith(ctx context.Context, opts VerifyOptions) (VerifyReport, error) {
	return s.verify(ctx, opts, scanRangesPerCPU*runtime.GOMAXPROCS(0), minScanRange)
}

// verify is Verify with the action scan split into at most parts ranges
// of at least minRange actions each, which GOMAXPROCS workers share out.
func (s *Store) verify(ctx context.Context, opts VerifyOptions, parts int, minRange uint64) (rep VerifyReport, err error) {
	s.readMu.RLock()
	defer s.readMu.RUnlock()
	if s.closed {
		return VerifyReport{}, ErrClosed
	}
	// Every table's block checksums, beside the scans; a failure is the
	// answer even when a scan tripped over the same damage first, since it
	// names the file.
	sums := make(chan error, 1)
	if s.inMemory() {
		sums <- nil
	} else {
		go func() { sums <- s.verifyChecksums() }()
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.corrupt(r)
		}
		if cerr := <-sums; cerr != nil {
			rep, err = VerifyReport{}, cerr
		}
	}()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	v := &verifier{
		txn: txn, pub: s, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		scanParts: max(parts, 1), minRange: max(minRange, 1), workers: max(runtime.GOMAXPROCS(0), 1),
	}
	if err := v.trust(opts.Key); err != nil {
		return v.report, err
	}
	return v.run(ctx, opts.Progress, opts.Since)
}

type verifier struct {
	txn   *badger.Txn
	pub   *Store
	seeds [2]maphash.Seed

	key      ed25519.PublicKey // the trusted key
	vkey     string            // its verifier key ("" for a store of the first format)
	name     string            // the origin tree checkpoints must name
	keyHash  uint32
	hasNotes bool   // some checkpoint is a signed note
	leaves   []Hash // leaf hashes, by seq − 1, for the tree checks

	scanParts int    // most ranges the action scan is split into
	minRange  uint64 // fewest actions in a range
	workers   int    // scan workers

	mu       sync.Mutex
	problems []Problem
	// tailNamed: a problem already names the logs Badger cuts (checkSince).
	tailNamed bool
	// covered is the highest saved checkpoint the store was proved
	// consistent with (checkSince).
	covered uint64

	report VerifyReport
	cps    []cpEntry
}

type cpEntry struct {
	key uint64
	cp  Checkpoint
	ok  bool // decoded
}

func (v *verifier) add(seq uint64, rank int, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.problems = append(v.problems, Problem{Seq: seq, Reason: fmt.Sprintf(format, args...), rank: rank})
}

func (v *verifier) run(ctx context.Context, progress func(done, total uint64), since []SavedCheckpoint) (VerifyReport, error) {
	headSeq, hasHead, err := v.readHead()
	if err != nil {
		return v.report, err
	}
	v.leaves = make([]Hash, headSeq)
	ranges := v.splitActions(headSeq)
	g, gctx := errgroup.WithContext(ctx)
	// The scan workers start on the index at once; the signature checks
	// and the action ranges, which check each action against its
	// checkpoint, start once the checkpoints are read (a few ms for
	// thousands). The tree is rebuilt by the scan workers as the action
	// ranges complete.
	cpsRead := make(chan struct{})
	v.goSafe(g, func() error {
		if err := v.readCheckpoints(); err != nil {
			return err
		}
		close(cpsRead)
		return v.checkSignatures(gctx)
	})
	var indexSum, expectSum [2]uint64
	var last actionState
	v.goSafe(g, func() error {
		var err error
		indexSum, expectSum, last, err = v.scan(gctx, headSeq, ranges, cpsRead, progress)
		return err
	})
	if err := g.Wait(); err != nil {
		return v.report, err
	}
	v.checkEnds(headSeq, hasHead, last)
	if indexSum != expectSum {
		if err := v.diffIndexes(ctx); err != nil {
			return v.report, err
		}
	}
	if err := v.checkSince(ctx, since, last.seq); err != nil {
		return v.report, err
	}
	v.checkTails(last.seq)
	v.checkWitnessFailure()
	slices.SortStableFunc(v.problems, func(a, b Problem) int {
		if a.Seq != b.Seq {
			return cmpU64(a.Seq, b.Seq)
		}
		return a.rank - b.rank
	})
	if len(v.problems) > maxProblems {
		v.problems = v.problems[:maxProblems]
	}
	v.report.Problems = v.problems
	if len(v.problems) > 0 {
		p := v.problems[0]
		return v.report, &IntegrityError{Seq: p.Seq, Reason: p.Reason}
	}
	return v.report, nil
}

// goSafe runs fn in g and turns a panic in it (Badger panics on some
// corrupt data) into an error naming the store.
func (v *verifier) goSafe(g *errgroup.Group, fn func() error) {
	g.Go(func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = v.pub.corrupt(r)
			}
		}()
		return fn()
	})
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (v *verifier) readHead() (seq uint64, ok bool, err error) {
	item, err := v.txn.Get([]byte(keyHead))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	err = item.Value(func(b []byte) error {
		h, derr := decodeHead(b)
		if derr != nil {
			v.add(0, rankRecord, "the head record is malformed: %v", derr)
			return nil
		}
		v.report.Head = h
		seq, ok = h.Seq, true
		return nil
	})
	return seq, ok, err
}

func (v *verifier) readCheckpoints() error {
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixCheckpoint), AllVersions: true})
	defer it.Close()
	var newest newestVersions
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if newest.skip(item) {
			continue
		}
		k := item.Key()
		cseq, ok := parseCheckpointKey(k)
		if !ok {
			v.add(0, rankCheckpoint, "stored key %q is not c/<be64 seq>", k)
			continue
		}
		e := cpEntry{key: cseq}
		if err := item.Value(func(b []byte) error {
			cp, derr := decodeCheckpoint(b)
			switch {
			case derr != nil:
				v.add(e.key, rankCheckpoint, "checkpoint %d: %v", e.key, derr)
			case cp.Seq != e.key:
				v.add(e.key, rankCheckpoint, "the checkpoint stored under seq %d is for seq %d", e.key, cp.Seq)
			case cp.IsNote() && (cp.Origin != v.name || cp.SigName != v.name):
				v.add(e.key, rankCheckpoint, "checkpoint %d is for log %q, signed as %q, but this store's checkpoints are for %q", e.key, cp.Origin, cp.SigName, v.name)
			case cp.IsNote() && cp.KeyHash != v.keyHash:
				v.add(e.key, rankCheckpoint, "checkpoint %d is signed by key hash %08x, not by the %s", e.key, cp.KeyHash, v.keyDesc())
				e.cp, e.ok = cp, true
			default:
				e.cp, e.ok = cp, true
			}
			if cp.IsNote() {
				v.hasNotes = true
			}
			return nil
		}); err != nil {
			return err
		}
		v.cps = append(v.cps, e)
	}
	v.report.Checkpoints = uint64(len(v.cps))
	return nil
}

// checkSignatures verifies every checkpoint signature in batches, one or
// more per CPU; a batch that fails is checked one signature at a time to
// name the bad ones.
func (v *verifier) checkSignatures(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	workers := max(runtime.GOMAXPROCS(0), 1)
	size := int64(min(maxSigBatch, (len(v.cps)+workers-1)/workers))
	var next atomic.Int64
	for range workers {
		v.goSafe(g, func() error {
			sc := newSigChecker(v.key)
			for {
				if err := ctx.Err(); err != nil {
					return err
				}
				start := int(next.Add(size) - size)
				if start >= len(v.cps) {
					return nil
				}
				part := v.cps[start:min(start+int(size), len(v.cps))]
				if sc.verifyBatch(part) {
					continue
				}
				for i := range part {
					if e := &part[i]; e.ok && !sc.verify(&e.cp) {
						v.add(e.key, rankCheckpoint, "checkpoint %d: the Ed25519 signature does not verify with the %s", e.key, v.keyDesc())
					}
				}
			}
		})
	}
	return g.Wait()
}

// scanIndexRange hashes the index keys from from up to (not including) to,
// or to the end of the index if to is empty.
func (v *verifier) scanIndexRange(ctx context.Context, from, to string) (sum [2]uint64, n uint64, err error) {
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixIndex), AllVersions: true})
	defer it.Close()
	var newest newestVersions
	for it.Seek([]byte(from)); it.Valid(); it.Next() {
		if n%4096 == 0 && ctx.Err() != nil {
			return sum, n, ctx.Err()
		}
		item := it.Item()
		k := item.Key()
		if to != "" && string(k) >= to {
			break
		}
		if newest.skip(item) {
			continue
		}
		sum[0] += maphash.Bytes(v.seeds[0], k)
		sum[1] += maphash.Bytes(v.seeds[1], k)
		if item.ValueSize() != 0 {
			v.add(indexKeySeq(k), rankIndex, "index entry %q holds a value; index entries are empty", k)
		}
		n++
	}
	return sum, n, nil
}

// checkEnds checks the head against the last action and that no
// checkpoint lies beyond it.
func (v *verifier) checkEnds(headSeq uint64, hasHead bool, last actionState) {
	switch {
	case !hasHead && last.seq > 0:
		v.add(last.seq, rankRecord, "there is no head record but actions go up to %d", last.seq)
	case hasHead && headSeq > last.seq:
		v.add(last.seq+1, rankRecord, "action %d is missing: the head is at %d but the last stored action is %d", last.seq+1, headSeq, last.seq)
	case hasHead && headSeq < last.seq:
		v.add(headSeq+1, rankRecord, "action %d lies beyond the head at %d", headSeq+1, headSeq)
	case hasHead && headSeq > 0 && v.report.Head.ChainHash != last.chain:
		v.add(headSeq, rankChain, "the head's chain hash does not match action %d", headSeq)
	}
	for _, e := range v.cps {
		if e.key > last.seq {
			v.add(e.key, rankCheckpoint, "checkpoint %d is beyond the last action %d", e.key, last.seq)
		}
	}
}

// diffIndexes runs only when the index sums disagree: it rebuilds the
// expected index and names each missing or extra entry with its seq.
func (v *verifier) diffIndexes(ctx context.Context) error {
	want := make(map[string]uint64)
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction), PrefetchValues: true})
	var key []byte
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		seq, ok := parseActionKey(k)
		if !ok {
			continue
		}
		if err := it.Item().Value(func(b []byte) error {
			r, err := parseRecord(b)
			if err != nil {
				return nil // reported by the scan
			}
			hd, err := decodeRawHeader(r.encoding)
			if err != nil {
				return nil
			}
			for fi, id := range hd.ids {
				if len(id) != 0 {
					key = appendIndexKey(key[:0], indexFields[fi], id, seq)
					want[string(key)] = seq
				}
			}
			return nil
		}); err != nil {
			it.Close()
			return err
		}
		if ctx.Err() != nil {
			it.Close()
			return ctx.Err()
		}
	}
	it.Close()
	ix := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixIndex)})
	defer ix.Close()
	for ix.Rewind(); ix.Valid(); ix.Next() {
		k := ix.Item().Key()
		if _, ok := want[string(k)]; ok {
			delete(want, string(k))
			continue
		}
		v.add(indexKeySeq(k), rankIndex, "index entry %s points at seq %d, but that action does not have it", printableKey(k), indexKeySeq(k))
	}
	for k, seq := range want {
		v.add(seq, rankIndex, "index entry %s for action %d is missing", printableKey([]byte(k)), seq)
	}
	return nil
}

// printableKey shows an index key with its seq in decimal.
func printableKey(k []byte) string {
	if len(k) < len(prefixIndex)+8 {
		return fmt.Sprintf("%q", k)
	}
	body := k[:len(k)-8]
	return fmt.Sprintf("%q+%d", bytes.TrimSuffix(body, []byte("/")), seqOf(k))
}
