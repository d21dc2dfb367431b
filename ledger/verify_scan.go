package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"hash/maphash"
	"math"
	"sort"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sync/errgroup"
)

// The action scan splits the a/ keys into one seq range per CPU. Each range
// is read, hashed and checked by its own goroutine straight from Badger's
// buffers, with nothing handed between goroutines; every chain link inside
// a range is checked there, from the stored chain hash before it, and the
// links across range boundaries are checked once all ranges are done.

// minScanRange is the fewest actions worth a range of their own.
const minScanRange = 4096

// actionState is what the checker carries from one action to the next.
type actionState struct {
	seq   uint64
	chain Hash // the stored chain hash; zero after an unreadable record
	n     uint64
}

// vresult is what Verify learns from one stored action on its own.
type vresult struct {
	rec      record // without its encoding, which lives in Badger's buffer
	err      error  // record or encoding malformed
	computed Hash   // SHA-256 of the encoding
	encSeq   uint64
}

// actionRange is one goroutine's share of the a/ keys: from the key of seq
// from (or the first a/ key, if from is 0) up to the key of seq to (or the
// last a/ key, if to is 0).
type actionRange struct {
	from, to uint64

	sum      [2]uint64 // index keys the actions imply, as scanIndexes sums them
	firstSeq uint64
	first    vresult     // the first action, whose link is checked by the caller
	last     actionState // state after the last action; n counts the range's actions
}

// progressCounter adds up the actions checked by all ranges and calls
// progress under its lock, so calls never overlap and done never shrinks.
type progressCounter struct {
	mu       sync.Mutex
	fn       func(done, total uint64)
	done     uint64
	total    uint64
	reported uint64
}

func (p *progressCounter) add(n uint64) {
	if p.fn == nil || n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.done-p.reported >= progressEvery {
		p.reported = p.done
		p.fn(p.done, max(p.total, p.done))
	}
}

// splitActions divides seqs 1–headSeq into at most scanParts ranges of at
// least minRange actions each.
func (v *verifier) splitActions(headSeq uint64) []actionRange {
	parts := max(1, min(uint64(v.scanParts), headSeq/v.minRange))
	ranges := make([]actionRange, parts)
	for i := range ranges {
		ranges[i].from = uint64(i) * headSeq / parts
		if i > 0 {
			ranges[i-1].to = ranges[i].from
		}
	}
	return ranges
}

// leafFeed lets the tree rebuild follow the action scan: each range says
// how far it has stored leaf hashes, so the tree is built while the scan
// runs rather than after it.
type leafFeed struct {
	mu   sync.Mutex
	cond sync.Cond
	from []uint64 // each range's first seq (0 for the first range)
	seen []uint64 // each range's last seq with its leaf stored; math.MaxUint64 once it is done
}

func newLeafFeed(ranges []actionRange) *leafFeed {
	f := &leafFeed{from: make([]uint64, len(ranges)), seen: make([]uint64, len(ranges))}
	f.cond.L = &f.mu
	for i, r := range ranges {
		f.from[i] = r.from
	}
	return f
}

// advance records that range i has stored the leaves up to seq.
func (f *leafFeed) advance(i int, seq uint64) {
	f.mu.Lock()
	f.seen[i] = seq
	f.mu.Unlock()
	f.cond.Broadcast()
}

// finish records that range i will store no more leaves.
func (f *leafFeed) finish(i int) { f.advance(i, math.MaxUint64) }

// ready waits until the leaf of seq s is stored, or the range holding s
// is done, and returns the last seq up to which the leaves from s on are
// final.
func (f *leafFeed) ready(s uint64) uint64 {
	r := sort.Search(len(f.from), func(i int) bool { return f.from[i] > s }) - 1
	end := uint64(math.MaxUint64)
	if r+1 < len(f.from) {
		end = f.from[r+1] - 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.seen[r] < s {
		f.cond.Wait()
	}
	return min(f.seen[r], end)
}

// scanActions reads, hashes and checks every action; it checks them
// against the checkpoints once cpsRead is closed.
func (v *verifier) scanActions(ctx context.Context, headSeq uint64, ranges []actionRange, feed *leafFeed, cpsRead <-chan struct{}, progress func(done, total uint64)) ([2]uint64, actionState, error) {
	prog := &progressCounter{fn: progress, total: headSeq}
	g, ctx := errgroup.WithContext(ctx)
	for i := range ranges {
		v.goSafe(g, func() error {
			// However the range ends, the tree rebuild must not wait on it.
			defer feed.finish(i)
			select {
			case <-cpsRead:
			case <-ctx.Done():
				return ctx.Err()
			}
			return v.scanRange(ctx, &ranges[i], prog, func(seq uint64) { feed.advance(i, seq) })
		})
	}
	if err := g.Wait(); err != nil {
		return [2]uint64{}, actionState{}, err
	}
	// Stitch the ranges: each one's first action links to the state the
	// ranges before it left.
	var sum [2]uint64
	var st actionState
	for i := range ranges {
		r := &ranges[i]
		sum[0] += r.sum[0]
		sum[1] += r.sum[1]
		if r.last.n == 0 {
			continue
		}
		v.checkLink(st, r.firstSeq, &r.first)
		st = actionState{seq: r.last.seq, chain: r.last.chain, n: st.n + r.last.n}
	}
	v.report.Actions = st.n
	if progress != nil {
		progress(st.n, max(headSeq, st.n))
	}
	return sum, st, nil
}

// scanRange checks the actions of r: each one on its own, and each link
// but the first, which needs the range before. It calls stored now and
// then with the last seq whose leaf hash it has stored.
func (v *verifier) scanRange(ctx context.Context, r *actionRange, prog *progressCounter, stored func(seq uint64)) error {
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction)})
	defer it.Close()
	start := []byte(prefixAction)
	if r.from > 0 {
		start = actionKey(r.from)
	}
	var end []byte
	if r.to > 0 {
		end = actionKey(r.to)
	}
	key := make([]byte, 0, 128)
	var st actionState
	var res vresult
	ci, unreported := 0, uint64(0)
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if end != nil && bytes.Compare(k, end) >= 0 {
			break
		}
		if len(k) != len(prefixAction)+8 {
			v.add(0, rankRecord, "stored key %q is not a/<be64 seq>", k)
			continue
		}
		seq := seqOf(k)
		// No value prefetch: the value is hashed where Badger holds it;
		// prefetching would copy each one on another goroutine first
		// (about 0.35 µs per action here).
		if err := item.Value(func(val []byte) error {
			key = v.hashAction(&res, &r.sum, val, seq, key)
			return nil
		}); err != nil {
			return err
		}
		if st.n == 0 {
			r.firstSeq, r.first = seq, res
		} else {
			v.checkLink(st, seq, &res)
		}
		st.seq, st.chain = seq, res.rec.chainHash
		if res.err != nil {
			st.chain = Hash{}
		}
		st.n++
		ci = v.checkAction(seq, &res, ci)
		if unreported++; unreported == 1024 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			prog.add(unreported)
			unreported = 0
			stored(seq)
		}
	}
	prog.add(unreported)
	r.last = st
	return nil
}

// hashAction parses one stored action and hashes its encoding where it
// lies, and adds the index keys it implies to sum. It returns key, the
// scratch buffer for those keys.
func (v *verifier) hashAction(r *vresult, sum *[2]uint64, val []byte, seq uint64, key []byte) []byte {
	*r = vresult{}
	r.rec, r.err = parseRecord(val)
	if r.err != nil {
		return key
	}
	enc := r.rec.encoding
	r.rec.encoding = nil // Badger's buffer: not to be kept
	if seq-1 < uint64(len(v.leaves)) {
		v.leaves[seq-1] = LeafHash(r.rec.actionHash)
	}
	r.computed = sha256.Sum256(enc)
	hd, err := decodeRawHeader(enc)
	if err != nil {
		r.err = err
		return key
	}
	r.encSeq = hd.seq
	// The keys an index would hold for this position.
	for fi, id := range hd.ids {
		if len(id) == 0 {
			continue
		}
		key = appendIndexKey(key[:0], indexFields[fi], id, seq)
		sum[0] += maphash.Bytes(v.seeds[0], key)
		sum[1] += maphash.Bytes(v.seeds[1], key)
	}
	return key
}

// checkLink checks that the action at seq follows prev: no seq is skipped
// and its stored chain hash links to prev's.
func (v *verifier) checkLink(prev actionState, seq uint64, r *vresult) {
	if seq != prev.seq+1 {
		v.add(prev.seq+1, rankRecord, "action %d is missing: the next stored action is %d", prev.seq+1, seq)
		return
	}
	if r.err != nil || (prev.seq > 0 && prev.chain.IsZero()) {
		return // nothing to link to or from; the unreadable record is reported
	}
	if want := ChainLink(prev.chain, r.computed, seq); want != r.rec.chainHash {
		v.add(seq, rankChain, "chain_hash of action %d does not link to action %d", seq, prev.seq)
	}
}

// checkAction checks one action on its own and against the checkpoints; ci
// is the index of the first checkpoint not below the previous action of
// the same range. It returns the new ci.
func (v *verifier) checkAction(seq uint64, r *vresult, ci int) int {
	if r.err != nil {
		v.add(seq, rankRecord, "action %d cannot be read: %v", seq, r.err)
		return ci
	}
	if r.computed != r.rec.actionHash {
		v.add(seq, rankRecord, "action %d was altered: its content hashes to %s but its stored action_hash is %s", seq, r.computed, r.rec.actionHash)
	}
	if r.encSeq != seq {
		v.add(seq, rankRecord, "the action stored under seq %d encodes seq %d (actions were moved or swapped)", seq, r.encSeq)
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
		v.add(seq, rankCheckpoint, "checkpoint %d signs chain hash %s but action %d has %s", seq, v.cps[ci].cp.ChainHash, seq, r.rec.chainHash)
	}
	return ci
}
