package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"

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
	// Problems in seq order, at most maxProblems of them; the first is the
	// one Verify returns as an *IntegrityError.
	Problems []Problem
}

// OK reports whether verification found nothing wrong.
func (r VerifyReport) OK() bool { return len(r.Problems) == 0 }

const (
	maxProblems    = 100
	verifyBatch    = 512
	progressEvery  = 4096
	rankRecord     = 0
	rankChain      = 1
	rankCheckpoint = 2
	rankIndex      = 3
)

// Verify re-derives the whole chain from one snapshot: it recomputes every
// action hash and chain link, checks that seq is gap-free and that the head
// is the last action, checks every checkpoint's Ed25519 signature (in
// parallel) and the checkpoint each action names, and checks that the
// indexes hold exactly the entries a full scan implies. progress, if not
// nil, is called from one goroutine with the actions checked so far.
//
// A chain that does not verify returns the report and an *IntegrityError
// naming the first bad seq and what broke; other errors mean verification
// could not run (context ended, store closed, read failure).
func (s *Store) Verify(ctx context.Context, progress func(done, total uint64)) (VerifyReport, error) {
	s.readMu.RLock()
	defer s.readMu.RUnlock()
	if s.closed {
		return VerifyReport{}, ErrClosed
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	v := &verifier{txn: txn, pub: s, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	return v.run(ctx, progress)
}

type verifier struct {
	txn   *badger.Txn
	pub   *Store
	seeds [2]maphash.Seed

	mu       sync.Mutex
	problems []Problem

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

func (v *verifier) run(ctx context.Context, progress func(done, total uint64)) (VerifyReport, error) {
	headSeq, hasHead, err := v.readHead()
	if err != nil {
		return v.report, err
	}
	if err := v.readCheckpoints(); err != nil {
		return v.report, err
	}
	g, gctx := errgroup.WithContext(ctx)
	var indexSum [2]uint64
	g.Go(func() error { return v.checkSignatures(gctx) })
	g.Go(func() error {
		var err error
		indexSum, err = v.scanIndexes(gctx)
		return err
	})
	var expectSum [2]uint64
	var last actionState
	g.Go(func() error {
		var err error
		expectSum, last, err = v.scanActions(gctx, headSeq, progress)
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
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixCheckpoint), PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(prefixCheckpoint)+8 {
			v.add(0, rankCheckpoint, "stored key %q is not c/<be64 seq>", k)
			continue
		}
		e := cpEntry{key: seqOf(k)}
		if err := item.Value(func(b []byte) error {
			cp, derr := decodeCheckpoint(b)
			switch {
			case derr != nil:
				v.add(e.key, rankCheckpoint, "checkpoint %d: %v", e.key, derr)
			case cp.Seq != e.key:
				v.add(e.key, rankCheckpoint, "the checkpoint stored under seq %d is for seq %d", e.key, cp.Seq)
			default:
				e.cp, e.ok = cp, true
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

// checkSignatures verifies every checkpoint signature, spread over the CPUs.
func (v *verifier) checkSignatures(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	workers := runtime.GOMAXPROCS(0)
	per := (len(v.cps) + workers - 1) / max(workers, 1)
	for start := 0; start < len(v.cps); start += per {
		part := v.cps[start:min(start+per, len(v.cps))]
		g.Go(func() error {
			for i, e := range part {
				if i%64 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				if e.ok && !e.cp.VerifySignature(v.pub.pub) {
					v.add(e.key, rankCheckpoint, "checkpoint %d: the Ed25519 signature does not verify with this store's public key", e.key)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// scanIndexes sums a hash of every index key; scanActions sums the keys a
// correct index would hold. Equal sums (with random seeds) mean equal sets.
func (v *verifier) scanIndexes(ctx context.Context) ([2]uint64, error) {
	var sum [2]uint64
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixIndex)})
	defer it.Close()
	var n uint64
	for it.Rewind(); it.Valid(); it.Next() {
		if n%4096 == 0 && ctx.Err() != nil {
			return sum, ctx.Err()
		}
		item := it.Item()
		k := item.Key()
		sum[0] += maphash.Bytes(v.seeds[0], k)
		sum[1] += maphash.Bytes(v.seeds[1], k)
		if item.ValueSize() != 0 {
			v.add(indexKeySeq(k), rankIndex, "index entry %q holds a value; index entries are empty", k)
		}
		n++
	}
	v.mu.Lock()
	v.report.IndexEntries = n
	v.mu.Unlock()
	return sum, nil
}

func indexKeySeq(k []byte) uint64 {
	if len(k) < len(prefixIndex)+8 {
		return 0
	}
	return seqOf(k)
}

// vbatch is a run of stored actions travelling from the scanner through a
// hashing worker to the in-order checker.
type vbatch struct {
	seqs []uint64
	ends []int  // value i is buf[ends[i-1]:ends[i]]
	buf  []byte // the values, copied out of Badger
	res  []vresult
	sum  [2]uint64
	done chan struct{}
}

type vresult struct {
	rec      record
	err      error // record or encoding malformed
	computed Hash  // SHA-256 of the encoding
	encSeq   uint64
}

// actionState is what the in-order checker carries from one action to the next.
type actionState struct {
	seq   uint64
	chain Hash
	n     uint64 // actions seen
}

func (v *verifier) scanActions(ctx context.Context, headSeq uint64, progress func(done, total uint64)) ([2]uint64, actionState, error) {
	g, ctx := errgroup.WithContext(ctx)
	workers := max(runtime.GOMAXPROCS(0), 1)
	jobs := make(chan *vbatch, workers*2)
	order := make(chan *vbatch, workers*2)
	// Batches go back to free once checked, so a verification allocates a
	// few of them however long the chain is.
	free := make(chan *vbatch, workers*4+2)
	g.Go(func() error { return v.readActions(ctx, jobs, order, free) })
	for range workers {
		g.Go(func() error {
			for b := range jobs {
				v.hashBatch(b)
				close(b.done)
			}
			return nil
		})
	}
	var sum [2]uint64
	var st actionState
	g.Go(func() error { // in-order checker
		ci := 0
		for b := range order {
			select {
			case <-b.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			sum[0] += b.sum[0]
			sum[1] += b.sum[1]
			for i, seq := range b.seqs {
				ci = v.checkAction(&st, seq, &b.res[i], ci)
				if progress != nil && st.n%progressEvery == 0 {
					progress(st.n, max(headSeq, st.n))
				}
			}
			select {
			case free <- b:
			default:
			}
		}
		if progress != nil {
			progress(st.n, max(headSeq, st.n))
		}
		return nil
	})
	err := g.Wait()
	v.report.Actions = st.n
	return sum, st, err
}

// readActions copies the stored actions out of Badger in batches, sending
// each batch to the in-order checker (order) and to a hashing worker (jobs).
func (v *verifier) readActions(ctx context.Context, jobs, order chan<- *vbatch, free chan *vbatch) error {
	defer close(jobs)
	defer close(order)
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction), PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	b := newVBatch(free)
	send := func() error {
		for _, ch := range [...]chan<- *vbatch{order, jobs} {
			select {
			case ch <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		b = newVBatch(free)
		return nil
	}
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(prefixAction)+8 {
			v.add(0, rankRecord, "stored key %q is not a/<be64 seq>", k)
			continue
		}
		if err := item.Value(func(val []byte) error {
			b.buf = append(b.buf, val...)
			return nil
		}); err != nil {
			return err
		}
		b.seqs = append(b.seqs, seqOf(k))
		b.ends = append(b.ends, len(b.buf))
		if len(b.seqs) == verifyBatch {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if len(b.seqs) > 0 {
		return send()
	}
	return nil
}

// newVBatch reuses a checked batch from free, or makes one.
func newVBatch(free chan *vbatch) *vbatch {
	select {
	case b := <-free:
		b.seqs, b.ends, b.buf = b.seqs[:0], b.ends[:0], b.buf[:0]
		b.sum = [2]uint64{}
		b.done = make(chan struct{})
		return b
	default:
	}
	return &vbatch{
		seqs: make([]uint64, 0, verifyBatch),
		ends: make([]int, 0, verifyBatch),
		buf:  make([]byte, 0, verifyBatch*640),
		done: make(chan struct{}),
	}
}

// hashBatch checks each record on its own: shape, action hash, encoded seq,
// and adds the index keys it implies to the batch's sum.
func (v *verifier) hashBatch(b *vbatch) {
	if cap(b.res) < len(b.seqs) {
		b.res = make([]vresult, len(b.seqs))
	}
	b.res = b.res[:len(b.seqs)]
	clear(b.res)
	var h0, h1 maphash.Hash
	h0.SetSeed(v.seeds[0])
	h1.SetSeed(v.seeds[1])
	start := 0
	for i, end := range b.ends {
		r := &b.res[i]
		val := b.buf[start:end]
		start = end
		r.rec, r.err = parseRecord(val)
		if r.err != nil {
			continue
		}
		r.computed = sha256.Sum256(r.rec.encoding)
		hd, err := decodeRawHeader(r.rec.encoding)
		if err != nil {
			r.err = err
			continue
		}
		r.encSeq = hd.seq
		// The keys an index would hold for this position.
		for fi, val := range hd.ids {
			if len(val) == 0 {
				continue
			}
			b.sum[0] += indexKeyHash(&h0, indexFields[fi], val, b.seqs[i])
			b.sum[1] += indexKeyHash(&h1, indexFields[fi], val, b.seqs[i])
		}
	}
}

func indexKeyHash(h *maphash.Hash, field string, value []byte, seq uint64) uint64 {
	h.Reset()
	h.WriteString(prefixIndex)
	h.WriteString(field)
	h.WriteByte('/')
	h.Write(value)
	h.WriteByte('/')
	var s [8]byte
	for i := 7; i >= 0; i-- {
		s[i] = byte(seq)
		seq >>= 8
	}
	h.Write(s[:])
	return h.Sum64()
}

// checkAction checks one action against the previous one and the
// checkpoints; ci is the index of the first checkpoint not below the
// previous action. It returns the new ci.
func (v *verifier) checkAction(st *actionState, seq uint64, r *vresult, ci int) int {
	st.n++
	prevSeq, prevChain := st.seq, st.chain
	st.seq = seq
	if seq != prevSeq+1 {
		v.add(prevSeq+1, rankRecord, "action %d is missing: the next stored action is %d", prevSeq+1, seq)
	}
	if r.err != nil {
		v.add(seq, rankRecord, "action %d cannot be read: %v", seq, r.err)
		st.chain = Hash{}
		return ci
	}
	st.chain = r.rec.chainHash
	if r.computed != r.rec.actionHash {
		v.add(seq, rankRecord, "action %d was altered: its content hashes to %s but its stored action_hash is %s", seq, short(r.computed), short(r.rec.actionHash))
	}
	if r.encSeq != seq {
		v.add(seq, rankRecord, "the action stored under seq %d encodes seq %d (actions were moved or swapped)", seq, r.encSeq)
	}
	if seq == prevSeq+1 && (prevSeq == 0 || !prevChain.IsZero()) {
		if want := ChainLink(prevChain, r.computed, seq); want != r.rec.chainHash {
			v.add(seq, rankChain, "chain_hash of action %d does not link to action %d", seq, prevSeq)
		}
	}
	for ci < len(v.cps) && v.cps[ci].key < seq {
		ci++
	}
	switch {
	case ci == len(v.cps):
		v.add(seq, rankCheckpoint, "action %d is not covered by any checkpoint", seq)
	case r.rec.checkpointSeq != v.cps[ci].key:
		v.add(seq, rankCheckpoint, "action %d names checkpoint %d but the checkpoint covering it is %d", seq, r.rec.checkpointSeq, v.cps[ci].key)
	}
	if ci < len(v.cps) && v.cps[ci].key == seq && v.cps[ci].ok && v.cps[ci].cp.ChainHash != r.rec.chainHash {
		v.add(seq, rankCheckpoint, "checkpoint %d signs chain hash %s but action %d has %s", seq, short(v.cps[ci].cp.ChainHash), seq, short(r.rec.chainHash))
	}
	return ci
}

func short(h Hash) string { return h.String()[:16] }

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
	var keys [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != len(prefixAction)+8 {
			continue
		}
		seq := seqOf(k)
		if err := it.Item().Value(func(b []byte) error {
			r, err := parseRecord(b)
			if err != nil {
				return nil // reported by the scan
			}
			hd, err := decodeHeader(r.encoding)
			if err != nil {
				return nil
			}
			hd.seq = seq
			keys = appendIndexKeys(keys[:0], &hd)
			for _, k := range keys {
				want[string(k)] = seq
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
