package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"hash/maphash"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sync/errgroup"
)

// The scan divides the a/ keys into seq ranges and the i/ keys into one
// part per indexed field, and GOMAXPROCS workers take them in turn. Each
// action range is read, hashed and checked straight from Badger's
// buffers, with nothing handed between goroutines; every chain link inside
// a range is checked there, from the stored chain hash before it, and the
// links across range boundaries are checked once all ranges are done. The
// ranges are several per worker, so that the workers finish together, and
// the Merkle tree is rebuilt by whichever worker completes the range it
// waits for (treeFollower).

// minScanRange is the fewest actions worth a range of their own.
const minScanRange = 2048

// scanRangesPerCPU is how many action ranges each worker gets, at most.
const scanRangesPerCPU = 8

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

// actionRange is one share of the a/ keys: from the key of seq from (or
// the first a/ key, if from is 0) up to the key of seq to (or the last a/
// key, if to is 0).
type actionRange struct {
	from, to uint64

	sum      [2]uint64 // index keys the actions imply, as scanIndexRange sums them
	firstSeq uint64
	first    vresult     // the first action, whose link is checked by the caller
	last     actionState // state after the last action; n counts the range's actions
}

// indexPart is one share of the i/ keys, from from up to (not including)
// to, or to the end of the index if to is empty.
type indexPart struct {
	from, to string
	sum      [2]uint64
	n        uint64
}

// indexParts divides the index keys at the key prefixes of the indexed
// fields (i/<field>/, in key order); the first part starts at i/ itself
// and the last runs to the end, so that every key under i/ is in a part.
func indexParts() []indexPart {
	names := indexFields
	slices.Sort(names[:])
	parts := make([]indexPart, len(names))
	parts[0].from = prefixIndex
	for i := 1; i < len(names); i++ {
		parts[i].from = prefixIndex + names[i] + "/"
		parts[i-1].to = parts[i].from
	}
	return parts
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

// scanTask is one piece of the scan: an index part (index ≥ 0) or an
// action range.
type scanTask struct{ index, action int }

// scanOrder lists the tasks in the order the workers take them: two index
// parts first (the action ranges wait for the checkpoints), the others one
// after every second action range, and the action ranges in seq order, so
// that the tree follows them closely and the workers end on ranges, the
// smaller pieces of work.
func scanOrder(indexes, actions int) []scanTask {
	tasks := make([]scanTask, 0, indexes+actions)
	ix, ac := 0, 0
	for ; ix < min(indexes, 2); ix++ {
		tasks = append(tasks, scanTask{index: ix, action: -1})
	}
	for ix < indexes || ac < actions {
		if ac < actions {
			tasks = append(tasks, scanTask{index: -1, action: ac})
			ac++
		}
		if ix < indexes && (ac >= actions || ac%2 == 0) {
			tasks = append(tasks, scanTask{index: ix, action: -1})
			ix++
		}
	}
	return tasks
}

// scan checks every index key and every action: it returns the sum of the
// index keys' hashes, the sum of those a correct index would hold (equal
// sums, with random seeds, mean equal sets), and the state after the last
// action. The action ranges start once cpsRead is closed.
func (v *verifier) scan(ctx context.Context, headSeq uint64, ranges []actionRange, cpsRead <-chan struct{}, progress func(done, total uint64)) (indexSum, expectSum [2]uint64, last actionState, err error) {
	parts := indexParts()
	tasks := scanOrder(len(parts), len(ranges))
	tree := newTreeFollower(v, ranges)
	prog := &progressCounter{fn: progress, total: headSeq}
	var next atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for range min(v.workers, len(tasks)) {
		v.goSafe(g, func() error {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(tasks) {
					return nil
				}
				if t := tasks[k]; t.index >= 0 {
					p := &parts[t.index]
					var err error
					if p.sum, p.n, err = v.scanIndexRange(ctx, p.from, p.to); err != nil {
						return err
					}
					continue
				}
				select {
				case <-cpsRead:
				case <-ctx.Done():
					return ctx.Err()
				}
				r := tasks[k].action
				if err := v.scanRange(ctx, &ranges[r], prog); err != nil {
					return err
				}
				tree.finish(r)
			}
		})
	}
	if err := g.Wait(); err != nil {
		return indexSum, expectSum, last, err
	}
	var entries uint64
	for _, p := range parts {
		indexSum[0] += p.sum[0]
		indexSum[1] += p.sum[1]
		entries += p.n
	}
	v.report.IndexEntries = entries
	// Stitch the ranges: each one's first action links to the state the
	// ranges before it left.
	for i := range ranges {
		r := &ranges[i]
		expectSum[0] += r.sum[0]
		expectSum[1] += r.sum[1]
		if r.last.n == 0 {
			continue
		}
		v.checkLink(last, r.firstSeq, &r.first)
		last = actionState{seq: r.last.seq, chain: r.last.chain, n: last.n + r.last.n}
	}
	v.report.Actions = last.n
	if progress != nil {
		progress(last.n, max(headSeq, last.n))
	}
	return indexSum, expectSum, last, nil
}

// scanRange checks the actions of r: each one on its own, and each link
// but the first, which needs the range before.
func (v *verifier) scanRange(ctx context.Context, r *actionRange, prog *progressCounter) error {
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction), AllVersions: true})
	defer it.Close()
	var newest newestVersions
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
	// The first checkpoint that can cover the range's first action.
	ci := sort.Search(len(v.cps), func(i int) bool { return v.cps[i].key >= r.from })
	unreported := uint64(0)
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if end != nil && bytes.Compare(k, end) >= 0 {
			break
		}
		if newest.skip(item) {
			continue
		}
		seq, ok := parseActionKey(k)
		if !ok {
			v.add(0, rankRecord, "stored key %q is not a/<be64 seq>", k)
			continue
		}
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
		}
	}
	prog.add(unreported)
	r.last = st
	return nil
}

// newestVersions filters the items of an iterator opened with AllVersions
// down to what one opened without it yields: the newest version of each key
// (at the transaction's read timestamp), and nothing for a key whose newest
// version is a deletion or has expired. It is Badger's own filter, without
// the second read of each entry's value struct and the key copy into a
// fresh item it costs there (about a tenth of a scan of index keys).
type newestVersions struct {
	last []byte
	seen bool
}

// skip reports whether item is not the newest live version of its key.
// Versions come newest first.
func (n *newestVersions) skip(item *badger.Item) bool {
	k := item.Key()
	if n.seen && bytes.Equal(k, n.last) {
		return true // an older version
	}
	n.last = append(n.last[:0], k...)
	n.seen = true
	return item.IsDeletedOrExpired()
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
