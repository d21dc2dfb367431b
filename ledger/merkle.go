package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// The chain is also an RFC 6962 Merkle tree whose leaves are the action
// hashes in seq order: action n is leaf n−1, its leaf hash is
// SHA-256(0x00 ‖ action_hash) and an interior node is
// SHA-256(0x01 ‖ left ‖ right). The writer keeps the tree's compact range
// (one hash per perfect subtree on its right edge) and stores every
// perfect subtree of at least 2^storedLevel leaves under
// t/ ‖ u8 level ‖ be64 index as it completes, in the commit that completes
// it. A proof reads those nodes; the lower levels are hashed again from the
// stored action hashes (at most 2^storedLevel of them per level).

// storedLevel is the lowest tree level stored: nodes of 16 leaves and up,
// about one stored node per 8 actions.
const storedLevel = 4

var hasher = rfc6962.DefaultHasher

func newRangeFactory() *compact.RangeFactory {
	return &compact.RangeFactory{Hash: hasher.HashChildren}
}

// LeafHash returns the RFC 6962 leaf hash of an action hash:
// SHA-256(0x00 ‖ action_hash).
func LeafHash(actionHash Hash) Hash {
	var b [1 + len(Hash{})]byte
	copy(b[1:], actionHash[:])
	return sha256.Sum256(b[:])
}

// nodeHash is RFC 6962's interior node hash, SHA-256(0x01 ‖ l ‖ r).
func nodeHash(l, r *Hash) Hash {
	var b [1 + 2*len(Hash{})]byte
	b[0] = 1
	copy(b[1:33], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// rootStack is the compact range [0, size) of a tree being rebuilt: the
// roots of its perfect subtrees, largest first. Verify uses it to check
// every checkpoint's root without allocating per leaf; the writer and the
// proofs use transparency-dev/merkle, and the tests check both against an
// RFC 6962 reference.
type rootStack struct {
	nodes []Hash
	size  uint64
}

func (s *rootStack) push(leaf Hash) {
	s.nodes = append(s.nodes, leaf)
	s.size++
	for n := s.size; n&1 == 0; n >>= 1 {
		k := len(s.nodes)
		s.nodes[k-2] = nodeHash(&s.nodes[k-2], &s.nodes[k-1])
		s.nodes = s.nodes[:k-1]
	}
}

// root is the Merkle root of the leaves pushed so far.
func (s *rootStack) root() Hash {
	if len(s.nodes) == 0 {
		return sha256.Sum256(nil)
	}
	r := s.nodes[len(s.nodes)-1]
	for i := len(s.nodes) - 2; i >= 0; i-- {
		r = nodeHash(&s.nodes[i], &r)
	}
	return r
}

func cloneRange(f *compact.RangeFactory, r *compact.Range) *compact.Range {
	hs := make([][]byte, len(r.Hashes()))
	copy(hs, r.Hashes())
	c, err := f.NewRange(r.Begin(), r.End(), hs)
	if err != nil {
		// The hashes come from a valid range of the same bounds.
		panic(err)
	}
	return c
}

// treeReader reads tree nodes from one snapshot, with a cache of the
// 16-leaf blocks read.
type treeReader struct {
	txn *badger.Txn
	ctx context.Context
	// blocks holds the leaf hashes of the blocks of 2^storedLevel leaves
	// read so far, by block index (a block at the right edge may be short).
	blocks map[uint64][][]byte
}

func newTreeReader(ctx context.Context, txn *badger.Txn) *treeReader {
	return &treeReader{txn: txn, ctx: ctx, blocks: make(map[uint64][][]byte)}
}

// close releases what the reader holds.
func (r *treeReader) close() { clear(r.blocks) }

// node returns the hash of the perfect subtree id: stored, or hashed
// from the stored action hashes below it.
func (r *treeReader) node(id compact.NodeID) ([]byte, error) {
	if id.Level >= storedLevel {
		item, err := r.txn.Get(treeKey(id.Level, id.Index))
		if err == nil {
			h, err := item.ValueCopy(nil)
			if err == nil && len(h) != 32 {
				err = fmt.Errorf("stored tree node %d/%d is %d bytes, not 32", id.Level, id.Index, len(h))
			}
			return h, err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return nil, err
		}
		// Not stored (a store of the first format): hash the children.
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		l, err := r.node(compact.NewNodeID(id.Level-1, id.Index*2))
		if err != nil {
			return nil, err
		}
		rt, err := r.node(compact.NewNodeID(id.Level-1, id.Index*2+1))
		if err != nil {
			return nil, err
		}
		return hasher.HashChildren(l, rt), nil
	}
	begin, end := id.Coverage()
	blk := begin >> storedLevel
	block, ok := r.blocks[blk]
	if !ok || uint64(len(block)) < end-blk<<storedLevel {
		var err error
		if block, err = r.leaves(blk<<storedLevel, end); err != nil {
			return nil, err
		}
		r.blocks[blk] = block
	}
	off := begin - blk<<storedLevel
	leaves := make([][]byte, end-begin)
	copy(leaves, block[off:off+(end-begin)])
	for len(leaves) > 1 {
		for i := 0; i < len(leaves); i += 2 {
			leaves[i/2] = hasher.HashChildren(leaves[i], leaves[i+1])
		}
		leaves = leaves[:len(leaves)/2]
	}
	return leaves[0], nil
}

// leaves returns the leaf hashes of leaves [begin, end): actions begin+1…end.
func (r *treeReader) leaves(begin, end uint64) ([][]byte, error) {
	out := make([][]byte, 0, end-begin)
	// The prefix the keys of actions begin+1…end share: Badger then opens
	// only the tables that can hold them, not every table of a/.
	first, last := actionKey(begin+1), actionKey(end)
	n := 0
	for n < len(first) && first[n] == last[n] {
		n++
	}
	it := r.txn.NewIterator(badger.IteratorOptions{Prefix: first[:n]})
	defer it.Close()
	want := begin + 1
	for it.Seek(actionKey(want)); it.Valid() && want <= end; it.Next() {
		k := it.Item().Key()
		if seq, ok := parseActionKey(k); !ok || seq != want {
			return nil, fmt.Errorf("action %d is missing from the store", want)
		}
		err := it.Item().Value(func(v []byte) error {
			rec, err := parseRecord(v)
			if err != nil {
				return fmt.Errorf("action %d cannot be read: %w", want, err)
			}
			lh := LeafHash(rec.actionHash)
			out = append(out, lh[:])
			return nil
		})
		if err != nil {
			return nil, err
		}
		want++
	}
	if want <= end {
		return nil, fmt.Errorf("action %d is missing from the store", want)
	}
	return out, nil
}

// hashes fetches the hashes of ids.
func (r *treeReader) hashes(ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := r.node(id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// compactRange returns the compact range [0, size) from the stored nodes.
func (r *treeReader) compactRange(f *compact.RangeFactory, size uint64) (*compact.Range, error) {
	hs, err := r.hashes(compact.RangeNodes(0, size, nil))
	if err != nil {
		return nil, err
	}
	return f.NewRange(0, size, hs)
}

// inclusion returns the RFC 6962 inclusion proof of leaf index in the tree
// of size leaves.
func (r *treeReader) inclusion(index, size uint64) ([][]byte, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	return r.rehash(nodes)
}

// consistency returns the RFC 6962 consistency proof from size1 to size2.
func (r *treeReader) consistency(size1, size2 uint64) ([][]byte, error) {
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, err
	}
	return r.rehash(nodes)
}

// rehash reads the stored hashes of a proof's nodes and folds them into
// the proof's hashes.
func (r *treeReader) rehash(nodes proof.Nodes) ([][]byte, error) {
	hs, err := r.hashes(nodes.IDs)
	if err != nil {
		return nil, err
	}
	return nodes.Rehash(hs, hasher.HashChildren)
}

// InclusionProof proves that action seq is leaf seq−1 of the tree the
// latest checkpoint signs.
type InclusionProof struct {
	Seq        uint64
	ActionHash Hash
	LeafIndex  uint64
	Checkpoint Checkpoint // the latest tree checkpoint; its Seq is the tree size
	Hashes     []Hash     // the RFC 6962 audit path, from the leaf up
}

// Verify checks the proof against the checkpoint's root with the
// transparency-dev/merkle verifier.
func (p *InclusionProof) Verify() error {
	lh := LeafHash(p.ActionHash)
	return proof.VerifyInclusion(hasher, p.LeafIndex, p.Checkpoint.Seq, lh[:], hashSlices(p.Hashes), p.Checkpoint.Root[:])
}

func hashSlices(hs []Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

func toHashes(bs [][]byte) []Hash {
	out := make([]Hash, len(bs))
	for i, b := range bs {
		copy(out[i][:], b)
	}
	return out
}

// ErrNoTreeCheckpoint reports a store that has no tree checkpoint yet: one
// of the first format that has not been written to since.
var ErrNoTreeCheckpoint = errors.New("the store has no tree checkpoint yet (it was made by an earlier ralph and has not been written to since); the next write signs one")

// LatestCheckpoint returns the store's latest tree checkpoint.
func (s *Store) LatestCheckpoint() (Checkpoint, error) {
	var cp Checkpoint
	err := s.view(func(txn *badger.Txn) error {
		var err error
		cp, err = latestTreeCheckpoint(txn)
		return err
	})
	return cp, err
}

func latestTreeCheckpoint(txn *badger.Txn) (Checkpoint, error) {
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(prefixCheckpoint)})
	defer it.Close()
	it.Seek(checkpointKey(^uint64(0)))
	if !it.Valid() {
		return Checkpoint{}, ErrNoTreeCheckpoint
	}
	var cp Checkpoint
	err := it.Item().Value(func(v []byte) error {
		var err error
		cp, err = decodeCheckpoint(v)
		return err
	})
	if err != nil {
		return cp, fmt.Errorf("latest checkpoint: %w", err)
	}
	if !cp.IsNote() {
		return cp, ErrNoTreeCheckpoint
	}
	return cp, nil
}

// ProveInclusion returns the inclusion proof of action seq in the tree of
// the latest checkpoint.
func (s *Store) ProveInclusion(ctx context.Context, seq uint64) (InclusionProof, error) {
	p := InclusionProof{Seq: seq}
	err := s.view(func(txn *badger.Txn) error {
		cp, err := latestTreeCheckpoint(txn)
		if err != nil {
			return err
		}
		if seq == 0 || seq > cp.Seq {
			return fmt.Errorf("seq %d is not in the latest checkpoint, which covers actions 1–%d: %w", seq, cp.Seq, ErrNotFound)
		}
		val, err := rawValue(txn, actionKey(seq))
		if err != nil {
			return fmt.Errorf("action %d: %w", seq, err)
		}
		rec, err := parseRecord(val)
		if err != nil {
			return fmt.Errorf("action %d cannot be read: %w", seq, err)
		}
		r := newTreeReader(ctx, txn)
		defer r.close()
		hs, err := r.inclusion(seq-1, cp.Seq)
		if err != nil {
			return err
		}
		p.ActionHash, p.LeafIndex, p.Checkpoint, p.Hashes = rec.actionHash, seq-1, cp, toHashes(hs)
		return nil
	})
	return p, err
}

// ProveConsistency returns the RFC 6962 consistency proof from the tree of
// size1 leaves to the tree of size2 leaves (size1 ≤ size2 ≤ head).
func (s *Store) ProveConsistency(ctx context.Context, size1, size2 uint64) ([]Hash, error) {
	var out []Hash
	err := s.view(func(txn *badger.Txn) error {
		r := newTreeReader(ctx, txn)
		defer r.close()
		hs, err := r.consistency(size1, size2)
		out = toHashes(hs)
		return err
	})
	return out, err
}

// VerifyConsistency checks a consistency proof between two roots with the
// transparency-dev/merkle verifier.
func VerifyConsistency(size1, size2 uint64, proofHashes []Hash, root1, root2 Hash) error {
	return proof.VerifyConsistency(hasher, size1, size2, hashSlices(proofHashes), root1[:], root2[:])
}

// rebuildTree stores the tree nodes of every action (a store of the first
// format, opened for writing for the first time since) and returns its
// compact range.
func (s *Store) rebuildTree(size uint64) (*compact.Range, error) {
	tree := s.rf.NewEmptyRange(0)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	var werr error
	visit := func(id compact.NodeID, h []byte) {
		if id.Level >= storedLevel && werr == nil {
			werr = wb.Set(treeKey(id.Level, id.Index), append([]byte(nil), h...))
		}
	}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction)})
		defer it.Close()
		want := uint64(1)
		for it.Rewind(); it.Valid() && want <= size; it.Next() {
			if seqOf(it.Item().Key()) != want {
				return fmt.Errorf("action %d is missing", want)
			}
			err := it.Item().Value(func(v []byte) error {
				rec, err := parseRecord(v)
				if err != nil {
					return fmt.Errorf("action %d cannot be read: %w", want, err)
				}
				lh := LeafHash(rec.actionHash)
				return tree.Append(lh[:], visit)
			})
			if err != nil {
				return err
			}
			want++
		}
		if want <= size {
			return fmt.Errorf("action %d is missing", want)
		}
		return werr
	})
	if err != nil {
		return nil, fmt.Errorf("build the Merkle tree of ledger store %s: %w", s.describe(), err)
	}
	if err := wb.Set([]byte(keyTreeSize), binary.BigEndian.AppendUint64(nil, size)); err != nil {
		return nil, err
	}
	if err := wb.Flush(); err != nil {
		return nil, fmt.Errorf("store the Merkle tree of ledger store %s: %w", s.describe(), err)
	}
	return tree, nil
}
