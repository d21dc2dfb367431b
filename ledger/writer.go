package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/uuid"
	"github.com/transparency-dev/merkle/compact"
)

// Room kept in every transaction for the head and the checkpoint, in
// Badger's accounting (key + value + 12 bytes of overhead per entry).
const (
	txnReserveBytes = 1024
	txnReserveCount = 4
	entryOverhead   = 12 // 2 meta bytes + 10 for the version Badger adds to each key

	// maxBatchItems bounds how many actions the writer takes in one pass;
	// more wait for the next commit.
	maxBatchItems = 16384
)

// TooLargeError refuses an action that cannot fit in one transaction.
type TooLargeError struct {
	ActionID string
	Size     int64 // bytes the action and its index entries take in a transaction
	Limit    int64 // bytes one transaction can hold
	// What names the action (its type and function) and Part its largest
	// part with that part's size ("its result, 6000012 bytes"), for the
	// sentence.
	What, Part string
}

func (e *TooLargeError) Error() string {
	what := "action " + e.ActionID
	if e.What != "" {
		what = e.What + " (action " + e.ActionID + ")"
	}
	part := ""
	if e.Part != "" {
		part = " (" + e.Part + ")"
	}
	return fmt.Sprintf("%s is too large for the ledger: it takes %d bytes%s and one action holds at most %d; have it return or record a summary (a smaller result, a file's path instead of its text) or raise the store's MemTableSize",
		what, e.Size, part, e.Limit)
}

// tooLarge is the TooLargeError of a, which takes size bytes against limit.
func tooLarge(a *Action, size, limit int64) *TooLargeError {
	e := &TooLargeError{ActionID: a.ActionID, Size: size, Limit: limit, What: a.Type.String() + " " + a.FunctionName}
	parts := []struct {
		name string
		n    int
	}{{"its result", len(appendValue(nil, a.Result))}, {"its arguments", 0}, {"its error message", len(a.ErrorMessage)}}
	for _, v := range a.Arguments {
		parts[1].n += len(appendValue(nil, v))
	}
	for k, v := range a.Metadata {
		if n := len(appendValue(nil, v)); n > parts[0].n && n > parts[1].n && n > parts[2].n {
			parts = append(parts, struct {
				name string
				n    int
			}{"its metadata " + k, n})
		}
	}
	best := parts[0]
	for _, p := range parts[1:] {
		if p.n > best.n {
			best = p
		}
	}
	if best.n > 0 {
		e.Part = fmt.Sprintf("%s alone is %d bytes", best.name, best.n)
	}
	return e
}

// DuplicateError refuses an action whose action_id is already recorded.
type DuplicateError struct{ ActionID string }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("action_id %s is already in the ledger; every action needs its own id", e.ActionID)
}

// treeCount bounds the tree nodes of level storedLevel and up that n new
// leaves complete (n/16 + n/32 + … plus one per level where they join
// the nodes before them); treeBytes is what they take in a transaction.
func treeCount(n int64) int64 { return n/8 + 64 }
func treeBytes(n int64) int64 {
	return treeCount(n) * (int64(treeKeyLen) + 32 + entryOverhead)
}

// pending is an action on its way to the writer.
type pending struct {
	a     *Action     // the store's own copy
	rec   []byte      // record header (filled by the writer) + canonical encoding
	bytes int64       // what its entries take in a transaction
	count int64       // how many entries it writes
	kv    [][2][]byte // the action's kv writes: key (with prefixKV), value text
	req   *request
	idx   int // position in req.items
	// fresh is set when Append generated the action_id: a new UUIDv7
	// cannot already be stored, so the writer skips looking it up.
	fresh bool
}

// request is one Append (one item) or one Import (many).
type request struct {
	items []*pending
	res   []Receipt
	err   error
	done  chan struct{}
	// deferred: nobody waits on it (AppendDeferred); a Sync request has
	// no items.
	deferred bool
}

// prepare validates and encodes a copy of a. It runs in the caller's
// goroutine so that the writer only hashes and writes.
func (s *Store) prepare(a *Action) (*pending, error) {
	c := a.clone()
	if err := Validate(c); err != nil {
		return nil, fmt.Errorf("action %s: %w", c.ActionID, err)
	}
	c.Timestamp = c.Timestamp.UTC()
	rec := make([]byte, recordHeaderLen, recordHeaderLen+256)
	rec = AppendCanonical(rec, c)
	p := &pending{a: c, rec: rec}
	for _, w := range c.KV {
		text, err := kvText(w.Key, w.Value)
		if err != nil {
			return nil, fmt.Errorf("action %s: kv %q: %w", c.ActionID, w.Key, err)
		}
		p.kv = append(p.kv, [2][]byte{kvKey(w.Key), []byte(text)})
	}
	c.KV = nil // not part of the record, nor of what is read back
	s.size(p)
	if p.bytes+treeBytes(1) >= s.txnBytes || p.count+treeCount(1) >= s.txnCount {
		return nil, tooLarge(c, p.bytes, s.txnBytes)
	}
	if int64(len(rec)) > s.maxValue {
		return nil, tooLarge(c, int64(len(rec)), s.maxValue)
	}
	return p, nil
}

// prepareEncoded is prepare for an action read with its canonical encoding
// enc (a bundle): the record keeps enc byte for byte.
func (s *Store) prepareEncoded(a *Action, enc []byte) (*pending, error) {
	c := a.clone()
	rec := make([]byte, recordHeaderLen, recordHeaderLen+len(enc))
	rec = append(rec, enc...)
	p := &pending{a: c, rec: rec}
	s.size(p)
	if p.bytes+treeBytes(1) >= s.txnBytes || p.count+treeCount(1) >= s.txnCount {
		return nil, &TooLargeError{ActionID: c.ActionID, Size: p.bytes, Limit: s.txnBytes}
	}
	if int64(len(rec)) > s.maxValue {
		return nil, &TooLargeError{ActionID: c.ActionID, Size: int64(len(rec)), Limit: s.maxValue}
	}
	return p, nil
}

// size sets what p's entries take in a transaction.
func (s *Store) size(p *pending) {
	p.bytes = int64(actionKeyLen+len(p.rec)) + entryOverhead
	p.count = 1
	for _, kv := range p.kv {
		p.bytes += int64(len(kv[0])+len(kv[1])) + entryOverhead
		p.count++
	}
	for i, v := range p.a.indexIDs() {
		if v != "" {
			p.bytes += int64(indexKeyLen(indexFields[i], v)) + entryOverhead
			p.count++
		}
	}
}

// fillDefaults gives a an id (UUIDv7) and a timestamp when it has none.
func fillDefaults(a *Action) error {
	if a.ActionID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("generate action id: %w", err)
		}
		a.ActionID = id.String()
	}
	if a.Timestamp.IsZero() {
		a.Timestamp = time.Now().UTC()
	}
	return nil
}

// Append records a and blocks until it is committed (and fsynced when
// SyncWrites is on). It fills in a.ActionID (a UUIDv7) and a.Timestamp when
// they are empty, and a.Seq, the hashes and a.CheckpointSeq on success.
//
// ctx bounds the wait for the writer to accept the action; once accepted,
// Append waits for the commit so that its answer is never ambiguous.
func (s *Store) Append(ctx context.Context, a *Action) (Receipt, error) {
	s.appending.Add(1)
	defer s.appending.Add(-1)
	fresh := a.ActionID == ""
	if err := fillDefaults(a); err != nil {
		return Receipt{}, err
	}
	p, err := s.prepare(a)
	if err != nil {
		return Receipt{}, err
	}
	p.fresh = fresh
	req := &request{items: []*pending{p}, done: make(chan struct{})}
	if err := s.submit(ctx, req); err != nil {
		return Receipt{}, err
	}
	r := req.res[0]
	a.Seq, a.ActionHash, a.ChainHash, a.CheckpointSeq = r.Seq, r.ActionHash, r.ChainHash, r.CheckpointSeq
	return r, nil
}

// submit hands req to the writer and waits for its result.
func (s *Store) submit(ctx context.Context, req *request) error {
	if err := s.send(ctx, req); err != nil {
		return err
	}
	t := time.NewTimer(s.commitLim)
	defer t.Stop()
	select {
	case <-req.done:
		return req.err
	case <-t.C:
		e := s.stuck(true, s.commitLim)
		if s.stalled.CompareAndSwap(nil, e) {
			s.log.Error("ledger store takes no commits", "store", s.describe(), "waited", s.commitLim)
		}
		return s.stalled.Load()
	}
}

// writable refuses a write to a store open read-only or damaged.
func (s *Store) writable() error {
	if s.behind != nil {
		return fmt.Errorf("ledger store %s is open read-only and refuses to write, because %w", s.describe(), s.behind)
	}
	if s.tail != nil {
		return s.tail
	}
	if s.readOnly {
		return fmt.Errorf("ledger store %s is open read-only", s.describe())
	}
	if e := s.stalled.Load(); e != nil {
		return e
	}
	return s.damaged
}

func (s *Store) send(ctx context.Context, req *request) error {
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.sendClosed {
		return ErrClosed
	}
	if err := s.writable(); err != nil {
		return err
	}
	select {
	case s.reqCh <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeLoop is the one writer: it takes every request waiting, commits them
// together and answers them, until Close closes reqCh.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	defer s.bgWG.Done()
	var (
		batch   []*request
		lastDur time.Duration // how long the last commit took
	)
	for {
		r, ok := <-s.reqCh
		if !ok {
			return
		}
		batch = append(batch[:0], r)
		n := len(r.items)
		n, ok = s.drain(&batch, n)
		if ok && allDeferred(batch) {
			s.lingerDeferred(&batch, n)
		} else if ok && int64(len(batch)) < s.appending.Load() {
			s.linger(&batch, n, lastDur)
		}
		start := time.Now()
		s.commitBatch(batch)
		lastDur = time.Since(start)
		clear(batch)
	}
}

// linger waits briefly for the appenders that are inside Append but not
// yet in the batch — typically those the last commit just answered, about
// to send again. Taking them now shares one checkpoint and one fsync
// instead of alternating half-full commits. It waits at most a quarter of
// the last commit's duration (capped at 250µs), so it costs a fraction of
// what it saves.
func (s *Store) linger(batch *[]*request, n int, lastDur time.Duration) {
	wait := min(lastDur/4, 250*time.Microsecond)
	if wait < 5*time.Microsecond {
		runtime.Gosched()
		s.drain(batch, n)
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for int64(len(*batch)) < s.appending.Load() && n < maxBatchItems {
		select {
		case r, ok := <-s.reqCh:
			if !ok {
				return
			}
			*batch = append(*batch, r)
			n += len(r.items)
		case <-t.C:
			return
		}
	}
}

// drain moves every request already waiting into batch, up to
// maxBatchItems actions. ok is false once reqCh is closed.
func (s *Store) drain(batch *[]*request, n int) (int, bool) {
	for n < maxBatchItems {
		select {
		case r, ok := <-s.reqCh:
			if !ok {
				return n, false
			}
			*batch = append(*batch, r)
			n += len(r.items)
		default:
			return n, true
		}
	}
	return n, true
}

// commitBatch commits every request of batch, splitting into as many
// transactions as Badger's limits require, and answers each request once
// all of its items are durable.
func (s *Store) commitBatch(batch []*request) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("ledger writer panicked", "panic", r)
			for _, req := range batch {
				s.finish(req, fmt.Errorf("ledger writer failed: %v", r))
			}
		}
	}()
	batch = s.rejectDuplicates(batch)
	var (
		txnItems     []*pending
		bytes, count int64
	)
	flush := func() error {
		if len(txnItems) == 0 {
			return nil
		}
		if err := s.checkSpace(bytes+treeBytes(int64(len(txnItems))), closingOnly(txnItems)); err != nil {
			return err
		}
		if err := s.commitTxn(txnItems); err != nil {
			return s.lostOnWrite(err)
		}
		if n := s.witnessDue; n != nil {
			s.witnessDue = nil
			s.queueWitness(n)
		}
		for _, p := range txnItems {
			p.req.res[p.idx] = Receipt{Seq: p.a.Seq, ActionHash: p.a.ActionHash, ChainHash: p.a.ChainHash, CheckpointSeq: p.a.CheckpointSeq}
			if p.idx == len(p.req.items)-1 {
				s.finish(p.req, nil)
			}
		}
		txnItems, bytes, count = txnItems[:0], 0, 0
		return nil
	}
	for _, req := range batch {
		for i, p := range req.items {
			p.req, p.idx = req, i
			n := int64(len(txnItems)) + 1
			if bytes+p.bytes+treeBytes(n) >= s.txnBytes || count+p.count+treeCount(n) >= s.txnCount {
				if err := flush(); err != nil {
					s.failAll(batch, err)
					return
				}
			}
			txnItems = append(txnItems, p)
			bytes += p.bytes
			count += p.count
		}
	}
	if err := flush(); err != nil {
		s.failAll(batch, err)
		return
	}
	for _, req := range batch { // Sync requests: everything before them is committed
		s.finish(req, nil)
	}
}

// failAll answers every unanswered request of batch with err.
func (s *Store) failAll(batch []*request, err error) {
	for _, req := range batch {
		s.finish(req, err)
	}
}

// finish answers req once; later calls do nothing.
func (s *Store) finish(req *request, err error) {
	select {
	case <-req.done:
		return
	default:
	}
	if err != nil {
		done := 0
		for _, r := range req.res {
			if r.Seq != 0 {
				done++
			}
		}
		if done > 0 {
			err = fmt.Errorf("%d of %d actions were committed before the failure: %w", done, len(req.items), err)
		}
		req.err = err
		s.noteDeferred(req, err)
	}
	close(req.done)
}

// rejectDuplicates fails every request holding an action_id that is already
// stored or that appears earlier in the batch.
func (s *Store) rejectDuplicates(batch []*request) []*request {
	seen := make(map[string]struct{}, len(batch))
	var ids []string
	for _, req := range batch {
		for _, p := range req.items {
			if !p.fresh {
				ids = append(ids, p.a.ActionID)
			}
		}
	}
	stored := make(map[string]struct{})
	var err error
	if len(ids) > 0 {
		err = s.lookupIDs(ids, stored)
	}
	out := batch[:0]
	for _, req := range batch {
		if err != nil {
			s.finish(req, fmt.Errorf("check for duplicate action ids: %w", err))
			continue
		}
		if dup := firstDuplicate(req, stored, seen); dup != "" {
			s.finish(req, &DuplicateError{ActionID: dup})
			continue
		}
		req.res = make([]Receipt, len(req.items))
		out = append(out, req)
	}
	return out
}

// firstDuplicate returns the first action_id of req that is stored, seen
// earlier in the batch or repeated within req. A request without one has
// its ids added to seen.
func firstDuplicate(req *request, stored, seen map[string]struct{}) string {
	mine := make(map[string]struct{}, len(req.items))
	for _, p := range req.items {
		id := p.a.ActionID
		_, inStore := stored[id]
		_, inBatch := seen[id]
		_, inReq := mine[id]
		if inStore || inBatch || inReq {
			return id
		}
		mine[id] = struct{}{}
	}
	for id := range mine {
		seen[id] = struct{}{}
	}
	return ""
}

// lookupIDs adds to stored each of ids that already has an action_id
// index entry. The writer is the only writer, so the snapshot it reads is
// the state the batch commits onto.
//
// Each id is looked up by an iterator bounded to its own prefix. One
// iterator seeking from id to id would be one pass over a clean index, but
// Badger's iterator reads ahead to the next two live keys: after an import
// was rolled back, every seek would walk all the deleted entries of the
// ids after it, and re-importing the same ids took time quadratic in their
// number (12,000 actions: 4 s became 100 s under the race detector).
func (s *Store) lookupIDs(ids []string, stored map[string]struct{}) error {
	slices.Sort(ids)
	return s.db.View(func(txn *badger.Txn) error {
		for i, id := range ids {
			if i > 0 && ids[i-1] == id {
				continue
			}
			p := indexPrefix(IndexActionID, id)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
			for it.Seek(p); it.Valid(); it.Next() {
				if len(it.Item().Key()) == len(p)+8 {
					stored[id] = struct{}{}
					break
				}
			}
			it.Close()
		}
		return nil
	})
}

// commitTxn writes items as seqs head+1… in one transaction together with
// their index entries, the new head and one signed checkpoint.
func (s *Store) commitTxn(items []*pending) error {
	head := *s.head.Load()
	last := head.Seq + uint64(len(items))
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	tree := cloneRange(s.rf, s.tree)
	chain, err := s.stageActions(txn, items, head, last, tree)
	if err != nil {
		return err
	}
	newHead := Head{Seq: last, ChainHash: chain}
	cp, err := s.stageCheckpoint(txn, tree, newHead)
	if err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("commit to ledger store %s: %w", s.describe(), err)
	}
	s.publish(items, head, newHead, tree, cp)
	return nil
}

// stageActions sets each item's record (its seq, action hash, chain hash
// and checkpoint seq last filled in), the kv writes that ride on it, its
// index keys and the Merkle tree nodes it completes, in txn; it extends
// tree and returns the chain hash after the last item.
func (s *Store) stageActions(txn *badger.Txn, items []*pending, head Head, last uint64, tree *compact.Range) (Hash, error) {
	seq, chain := head.Seq, head.ChainHash
	var nodes []compact.NodeID
	var nodeHashes [][]byte
	visit := func(id compact.NodeID, h []byte) {
		if id.Level >= storedLevel {
			nodes = append(nodes, id)
			nodeHashes = append(nodeHashes, h)
		}
	}
	var keys [][]byte
	for _, p := range items {
		seq++
		enc := p.rec[recordHeaderLen:]
		binary.BigEndian.PutUint64(enc[seqOffset:], seq)
		ah := Hash(sha256.Sum256(enc))
		chain = ChainLink(chain, ah, seq)
		p.rec[0] = recordVersion
		copy(p.rec[1:33], ah[:])
		copy(p.rec[33:65], chain[:])
		binary.BigEndian.PutUint64(p.rec[65:73], last)
		if err := txn.SetEntry(badger.NewEntry(actionKey(seq), p.rec)); err != nil {
			return chain, s.txnErr(err)
		}
		for _, kv := range p.kv {
			if err := txn.SetEntry(badger.NewEntry(kv[0], kv[1])); err != nil {
				return chain, s.txnErr(err)
			}
		}
		keys = appendIndexKeys(keys[:0], p.a, seq)
		for _, k := range keys {
			if err := txn.SetEntry(badger.NewEntry(k, nil)); err != nil {
				return chain, s.txnErr(err)
			}
		}
		lh := LeafHash(ah)
		if err := tree.Append(lh[:], visit); err != nil {
			return chain, fmt.Errorf("extend the Merkle tree: %w", err)
		}
	}
	for i, id := range nodes {
		if err := txn.SetEntry(badger.NewEntry(treeKey(id.Level, id.Index), nodeHashes[i])); err != nil {
			return chain, s.txnErr(err)
		}
	}
	return chain, nil
}

// stageCheckpoint signs the checkpoint of tree at newHead and sets it, the
// new head and the tree's size in txn.
func (s *Store) stageCheckpoint(txn *badger.Txn, tree *compact.Range, newHead Head) (Checkpoint, error) {
	root, err := tree.GetRootHash(nil)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("Merkle root: %w", err)
	}
	last := newHead.Seq
	cp, err := signTreeCheckpoint(s.signer, last, Hash(root), newHead.ChainHash, time.Now())
	if err != nil {
		return Checkpoint{}, err
	}
	if err := txn.SetEntry(badger.NewEntry([]byte(keyHead), encodeHead(newHead))); err != nil {
		return Checkpoint{}, s.txnErr(err)
	}
	if err := txn.SetEntry(badger.NewEntry(checkpointKey(last), encodeCheckpoint(cp))); err != nil {
		return Checkpoint{}, s.txnErr(err)
	}
	if err := txn.SetEntry(badger.NewEntry([]byte(keyTreeSize), binary.BigEndian.AppendUint64(nil, last))); err != nil {
		return Checkpoint{}, s.txnErr(err)
	}
	return cp, nil
}

// publish makes a durable commit visible: each item's action gets its
// seq and hashes, the store its new tree and head, the witness its due
// note, and the commit's waiters their wake-up.
func (s *Store) publish(items []*pending, head, newHead Head, tree *compact.Range, cp Checkpoint) {
	seq, last := head.Seq, newHead.Seq
	for _, p := range items {
		seq++
		p.a.Seq = seq
		copy(p.a.ActionHash[:], p.rec[1:33])
		copy(p.a.ChainHash[:], p.rec[33:65])
		p.a.CheckpointSeq = last
	}
	s.tree = tree
	s.wrote.Store(true)
	if s.witnessDir != "" {
		if end, ok := witnessWorthy(items); ok {
			s.witnessDue = &witnessNote{seq: last, note: cp.Note, runEnd: end}
		}
	}
	s.head.Store(&newHead)
	s.recent.add(items)
	s.commitMu.Lock()
	close(s.commitCh)
	s.commitCh = make(chan struct{})
	s.commitMu.Unlock()
}

func (s *Store) txnErr(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		// prepare and commitBatch budget below Badger's limit; reaching it
		// means the accounting is wrong, not the caller.
		return fmt.Errorf("ledger transaction exceeded Badger's limit (%d bytes, %d entries): %w", s.txnBytes, s.txnCount, err)
	}
	return fmt.Errorf("write to ledger store %s: %w", s.describe(), err)
}

// closingOnly reports whether items are all actions that close a run,
// which may use the room ordinary commits leave (diskspace.go).
func closingOnly(items []*pending) bool {
	for _, p := range items {
		switch p.a.Type {
		case RunCompleted, RunFailed, RunStopped, RunAborted:
		default:
			return false
		}
	}
	return true
}
