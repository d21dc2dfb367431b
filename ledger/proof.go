package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// maxProofWalk bounds how many chain links VerifyAction recomputes between
// an action and the checkpoint that signs it. A group commit holds a few
// dozen actions and an import a few thousand, so a checkpoint farther away
// than this is not one a healthy store makes; the proof then says so
// instead of reading that much of the store.
const maxProofWalk = 1 << 16

// ActionProof is what VerifyAction found about one action. Each fact
// relates stored values to their neighbours, so a failure points at the
// part that changed:
//
//   - ActionHashOK: the stored record is readable, its canonical encoding is
//     the encoding of seq Seq, and SHA-256 of it equals the stored
//     action_hash. A changed byte of content fails this alone.
//   - LinkOK: the stored chain_hash equals SHA-256(chain_hash of the
//     previous stored action ‖ stored action_hash ‖ be64(Seq)), with 32 zero
//     bytes before seq 1.
//   - CheckpointSeqOK: the checkpoint_seq the action records names the
//     checkpoint that covers it (the first at or after Seq).
//   - SignatureOK: that checkpoint's Ed25519 signature verifies with the
//     store's public key (the check Verify makes for one signature).
//   - ReachesCheckpoint: starting from the action's stored chain_hash and
//     recomputing each link with the stored action_hash of every action
//     after it, the chain arrives at the chain_hash the checkpoint signs.
//
// Together they prove the action's content is what the store's key signed.
// Problems lists what failed, each naming its seq, in the order above.
type ActionProof struct {
	Seq        uint64
	ActionHash Hash // as stored
	ChainHash  Hash // as stored
	PrevSeq    uint64

	ActionHashOK bool
	LinkOK       bool

	CheckpointSeq       uint64    // the covering checkpoint; 0 if there is none
	CheckpointTime      time.Time // when it was signed
	CheckpointChainHash Hash      // the chain hash it signs
	CheckpointSeqOK     bool
	SignatureOK         bool

	ReachesCheckpoint bool
	// Links is how many links after Seq the walk recomputed (CheckpointSeq
	// − Seq when it ran).
	Links uint64
	// TooFar is set when the checkpoint lies more than maxProofWalk
	// actions after Seq: the walk was not made and ReachesCheckpoint is
	// false; only a whole-store Verify settles it.
	TooFar bool

	Problems []string
}

// OK reports whether every fact holds: the action is proved.
func (p *ActionProof) OK() bool { return len(p.Problems) == 0 }

// Problem returns the first of Problems, "" when the action is proved.
func (p *ActionProof) Problem() string {
	if len(p.Problems) == 0 {
		return ""
	}
	return p.Problems[0]
}

func (p *ActionProof) fail(format string, args ...any) {
	p.Problems = append(p.Problems, fmt.Sprintf(format, args...))
}

// VerifyAction proves the one action at seq against the checkpoint that
// signs it, from one snapshot, without verifying the rest of the store: it
// reads the action, the one before it, the covering checkpoint and the
// actions between them (a group commit: usually a handful, at most
// maxProofWalk). See ActionProof for what it checks.
//
// A proof that fails is not an error: the ActionProof says which fact
// failed. The error is for a proof that could not be made: no action at
// seq (ErrNotFound), the store closed, ctx ended, a read failed.
func (s *Store) VerifyAction(ctx context.Context, seq uint64) (ActionProof, error) {
	return s.verifyAction(ctx, seq, maxProofWalk)
}

func (s *Store) verifyAction(ctx context.Context, seq uint64, maxWalk uint64) (ActionProof, error) {
	p := ActionProof{Seq: seq}
	err := s.view(func(txn *badger.Txn) error {
		return s.prove(ctx, txn, &p, maxWalk)
	})
	return p, err
}

func (s *Store) prove(ctx context.Context, txn *badger.Txn, p *ActionProof, maxWalk uint64) error {
	seq := p.Seq
	if err := ctx.Err(); err != nil {
		return err
	}
	val, err := rawValue(txn, actionKey(seq))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("seq %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return err
	}
	rec, err := parseRecord(val)
	readable := err == nil
	if !readable {
		p.fail("action %d cannot be read: %v", seq, err)
	} else {
		p.ActionHash, p.ChainHash = rec.actionHash, rec.chainHash
		p.ActionHashOK = checkContent(p, &rec)
	}

	// The link from the action before.
	var prev Hash
	prevOK := true
	if seq > 1 {
		p.PrevSeq = seq - 1
		prev, prevOK = s.prevChain(txn, p)
	}
	if readable && prevOK {
		p.LinkOK = ChainLink(prev, rec.actionHash, seq) == rec.chainHash
		if !p.LinkOK {
			what := "the genesis hash (32 zero bytes)"
			if seq > 1 {
				what = fmt.Sprintf("action %d", seq-1)
			}
			p.fail("chain_hash of action %d does not link to %s", seq, what)
		}
	}

	// The checkpoint that covers it: the first at or after seq.
	cp, found, cpErr, err := coveringCheckpoint(txn, seq)
	if err != nil {
		return err
	}
	if !found {
		p.fail("action %d is not covered by any checkpoint", seq)
		return nil
	}
	p.CheckpointSeq = cp.Seq
	if readable {
		p.CheckpointSeqOK = rec.checkpointSeq == cp.Seq
		if !p.CheckpointSeqOK {
			p.fail("action %d names checkpoint %d but the checkpoint covering it is %d", seq, rec.checkpointSeq, cp.Seq)
		}
	}
	if cpErr != nil {
		p.fail("checkpoint %d cannot be read: %v", cp.Seq, cpErr)
		return nil // no signature to check, no chain hash to reach
	}
	p.CheckpointTime, p.CheckpointChainHash = cp.Time, cp.ChainHash
	p.SignatureOK = newSigChecker(s.pub).verify(&cp)
	if !p.SignatureOK {
		p.fail("checkpoint %d: the Ed25519 signature does not verify with this store's public key", cp.Seq)
	}
	if !readable {
		return nil // no chain hash to walk from
	}
	return walkToCheckpoint(ctx, txn, p, &cp, maxWalk)
}

// checkContent checks that rec's encoding is action p.Seq's and hashes to
// its stored action_hash.
func checkContent(p *ActionProof, rec *record) bool {
	ok := true
	if computed := sha256.Sum256(rec.encoding); computed != rec.actionHash {
		p.fail("action %d was altered: its content hashes to %s but its stored action_hash is %s", p.Seq, computed, rec.actionHash)
		ok = false
	}
	hd, err := decodeRawHeader(rec.encoding)
	switch {
	case err != nil:
		p.fail("action %d cannot be read: %v", p.Seq, err)
		ok = false
	case hd.seq != p.Seq:
		p.fail("the action stored under seq %d encodes seq %d (actions were moved or swapped)", p.Seq, hd.seq)
		ok = false
	}
	return ok
}

// prevChain returns the stored chain hash of the action before p.Seq.
func (s *Store) prevChain(txn *badger.Txn, p *ActionProof) (Hash, bool) {
	val, err := rawValue(txn, actionKey(p.Seq-1))
	if err != nil {
		if errors.Is(err, badger.ErrKeyNotFound) {
			p.fail("action %d is missing, so the link to action %d cannot be checked", p.Seq-1, p.Seq)
		} else {
			p.fail("action %d cannot be read (%v), so the link to action %d cannot be checked", p.Seq-1, err, p.Seq)
		}
		return Hash{}, false
	}
	r, err := parseRecord(val)
	if err != nil {
		p.fail("action %d cannot be read (%v), so the link to action %d cannot be checked", p.Seq-1, err, p.Seq)
		return Hash{}, false
	}
	return r.chainHash, true
}

// coveringCheckpoint reads the first checkpoint at or after seq. cpErr
// says why a checkpoint that is there cannot be read (its Seq is then
// the key's); err is a read failure.
func coveringCheckpoint(txn *badger.Txn, seq uint64) (cp Checkpoint, found bool, cpErr, err error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixCheckpoint)})
	defer it.Close()
	for it.Seek(checkpointKey(seq)); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		key, ok := parseCheckpointKey(k)
		if !ok {
			continue // a malformed key; Verify names it
		}
		if err := item.Value(func(b []byte) error {
			cp, cpErr = decodeCheckpoint(b)
			return nil
		}); err != nil {
			return Checkpoint{}, false, nil, err
		}
		if cpErr == nil && cp.Seq != key {
			cpErr = fmt.Errorf("it is stored under seq %d but is for seq %d", key, cp.Seq)
		}
		if cpErr != nil {
			return Checkpoint{Seq: key}, true, cpErr, nil
		}
		return cp, true, nil, nil
	}
	return Checkpoint{}, false, nil, nil
}

// walkToCheckpoint recomputes the chain from p's stored chain hash through
// the stored action hashes of the actions after it, up to cp.
func walkToCheckpoint(ctx context.Context, txn *badger.Txn, p *ActionProof, cp *Checkpoint, maxWalk uint64) error {
	seq := p.Seq
	if cp.Seq-seq > maxWalk {
		p.TooFar = true
		p.fail("checkpoint %d is %d actions after action %d, more than the %d a proof walks; verify the whole store", cp.Seq, cp.Seq-seq, seq, maxWalk)
		return nil
	}
	h := p.ChainHash
	var breakAt uint64 // first seq whose stored chain hash the walk does not reproduce
	if cp.Seq > seq {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction)})
		defer it.Close()
		end := actionKey(cp.Seq)
		next := seq + 1
		for it.Seek(actionKey(next)); it.Valid() && next <= cp.Seq; it.Next() {
			item := it.Item()
			k := item.Key()
			if bytes.Compare(k, end) > 0 {
				break
			}
			got, ok := parseActionKey(k)
			if !ok {
				continue
			}
			if got != next {
				p.fail("the chain from action %d to checkpoint %d cannot be followed: action %d is missing", seq, cp.Seq, next)
				return nil
			}
			var r record
			var perr error
			if err := item.Value(func(b []byte) error {
				r, perr = parseRecord(b)
				r.encoding = nil // Badger's buffer
				return nil
			}); err != nil {
				return err
			}
			if perr != nil {
				p.fail("the chain from action %d to checkpoint %d cannot be followed: action %d cannot be read: %v", seq, cp.Seq, next, perr)
				return nil
			}
			h = ChainLink(h, r.actionHash, next)
			if breakAt == 0 && h != r.chainHash {
				breakAt = next
			}
			p.Links++
			if next++; p.Links%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if next <= cp.Seq {
			p.fail("the chain from action %d to checkpoint %d cannot be followed: action %d is missing", seq, cp.Seq, next)
			return nil
		}
	}
	p.ReachesCheckpoint = h == cp.ChainHash
	switch {
	case p.ReachesCheckpoint:
	case breakAt != 0:
		p.fail("the chain from action %d does not reach checkpoint %d: the stored chain_hash of action %d does not follow from action %d's", seq, cp.Seq, breakAt, breakAt-1)
	case cp.Seq == seq:
		p.fail("checkpoint %d signs chain hash %s but action %d has %s: the chain was changed after it was signed", cp.Seq, cp.ChainHash, seq, h)
	default:
		p.fail("the chain from action %d recomputes to %s at seq %d but checkpoint %d signs %s: the chain was changed after it was signed", seq, h, cp.Seq, cp.Seq, cp.ChainHash)
	}
	return nil
}

// rawValue returns a copy of the value under key.
func rawValue(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}
