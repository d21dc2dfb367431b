package ledger

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/dgraph-io/badger/v4"
	"github.com/transparency-dev/merkle/compact"
)

// A bundle is a whole store as text, self-verifying and lossless: every
// action's exact canonical encoding, every checkpoint and the verifier
// key, one item per line (docs/ledger.md §15):
//
//	ralph-bundle 1
//	key <signed-note verifier key>
//	a <base64 canonical encoding of action 1>
//	…
//	c <base64 signed checkpoint note>        after the last action it covers
//	c1 <base64 113-byte first-format record>  (a store made by an earlier ralph)
//	key <another verifier key>               the checkpoints after it are signed by that key
//	end <actions> <hex chain_hash of the last> <hex Merkle root of all>
const bundleMagic = "ralph-bundle 1"

// maxBundleLine bounds one line: an action of the largest size, in base64.
const maxBundleLine = 96 << 20

// Bundle line kinds, as BundleLines names them.
const (
	BundleAct          = "a"
	BundleCheckpoint   = "c"
	BundleCheckpointV1 = "c1"
	BundleKey          = "key"
	BundleEnd          = "end"
)

// bundleTally follows the actions of a bundle to write its end line: their
// count, the last chain hash and the Merkle tree of all.
type bundleTally struct {
	tree  *compact.Range
	chain Hash
	n     uint64
}

func newBundleTally() *bundleTally {
	return &bundleTally{tree: newRangeFactory().NewEmptyRange(0)}
}

func (t *bundleTally) add(actionHash, chain Hash) error {
	lh := LeafHash(actionHash)
	if err := t.tree.Append(lh[:], nil); err != nil {
		return err
	}
	t.chain = chain
	t.n++
	return nil
}

// endLine returns "end <n> <chain> <root>" without its newline.
func (t *bundleTally) endLine() ([]byte, error) {
	root, err := t.tree.GetRootHash(nil)
	if err != nil {
		return nil, err
	}
	var r Hash
	copy(r[:], root)
	return BundleEndLine(t.n, t.chain, r), nil
}

// BundleEndLine is a bundle's end line without its newline: the number of
// actions, the chain hash of the last and the Merkle root of all.
func BundleEndLine(actions uint64, chain, root Hash) []byte {
	return fmt.Appendf(nil, "end %d %s %s", actions, chain, root)
}

// ExportBundle writes the whole store as a bundle, from one snapshot.
func (s *Store) ExportBundle(w io.Writer) (int, error) {
	if s.vkey == "" && s.pub == nil {
		return 0, fmt.Errorf("ledger store %s records no key; it cannot be bundled", s.describe())
	}
	vkey := s.vkey
	if vkey == "" {
		// A store of the first format that was not written since: its key
		// under the name it will have.
		var err error
		if vkey, err = VerifierKey(OriginPrefix+"legacy", s.pub); err != nil {
			return 0, err
		}
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	fmt.Fprintf(bw, "%s\nkey %s\n", bundleMagic, vkey)
	tally := newBundleTally()
	err := s.view(func(txn *badger.Txn) error {
		_, err := eachBundleLine(context.Background(), txn, 1, ^uint64(0), func(line []byte, kind string, _ uint64, rec *record) error {
			if kind == BundleAct {
				if err := tally.add(rec.actionHash, rec.chainHash); err != nil {
					return err
				}
			}
			bw.Write(line)
			return bw.WriteByte('\n')
		})
		if err != nil {
			return err
		}
		end, err := tally.endLine()
		if err != nil {
			return err
		}
		bw.Write(end)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return int(tally.n), err
	}
	return int(tally.n), bw.Flush()
}

// BundleLines calls fn with the a and c lines (c1 for a first-format
// checkpoint) of whole commits, from action fromSeq (1 when 0) up to the
// latest checkpoint, exactly as ExportBundle writes them but without the
// newline, read from one snapshot. line is valid only during the call; seq
// is the action's seq, or the last seq a checkpoint covers. It returns the
// last action seq it emitted, fromSeq−1 when there was none. It reads only
// what is new, so a follower calls it after each commit with fromSeq one
// past what it returned last time.
func (s *Store) BundleLines(ctx context.Context, fromSeq uint64, fn func(line []byte, kind string, seq uint64) error) (last uint64, err error) {
	if fromSeq == 0 {
		fromSeq = 1
	}
	last = fromSeq - 1
	if s.Head().Seq < fromSeq {
		return last, nil
	}
	err = s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(prefixCheckpoint)})
		it.Seek(checkpointKey(^uint64(0)))
		var to uint64
		if it.Valid() {
			to = seqOf(it.Item().Key())
		}
		it.Close()
		if to < fromSeq {
			return nil
		}
		var err error
		last, err = eachBundleLine(ctx, txn, fromSeq, to, func(line []byte, kind string, seq uint64, _ *record) error {
			return fn(line, kind, seq)
		})
		return err
	})
	return last, err
}

// eachBundleLine calls fn with the bundle lines of the actions from..to
// and of the checkpoints from..to, each checkpoint after the last action
// it covers, and returns the last action seq (from−1 when none).
func eachBundleLine(ctx context.Context, txn *badger.Txn, from, to uint64, fn func(line []byte, kind string, seq uint64, rec *record) error) (uint64, error) {
	ai := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction)})
	defer ai.Close()
	ci := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixCheckpoint)})
	defer ci.Close()
	ci.Seek(checkpointKey(from))
	enc := base64.StdEncoding
	var buf []byte
	last := from - 1
	for ai.Seek(actionKey(from)); ai.Valid(); ai.Next() {
		seq := seqOf(ai.Item().Key())
		if seq > to {
			break
		}
		if err := ctx.Err(); err != nil {
			return last, err
		}
		if err := ai.Item().Value(func(v []byte) error {
			rec, err := parseRecord(v)
			if err != nil {
				return fmt.Errorf("action %d cannot be read: %w", seq, err)
			}
			buf = append(buf[:0], "a "...)
			buf = enc.AppendEncode(buf, rec.encoding)
			return fn(buf, BundleAct, seq, &rec)
		}); err != nil {
			return last, err
		}
		last = seq
		for ; ci.Valid() && seqOf(ci.Item().Key()) <= seq; ci.Next() {
			cseq := seqOf(ci.Item().Key())
			if err := ci.Item().Value(func(v []byte) error {
				kind := BundleCheckpoint
				if len(v) > 0 && v[0] == checkpointNoteVersion {
					buf = append(buf[:0], "c "...)
					buf = enc.AppendEncode(buf, v[1:])
				} else {
					kind = BundleCheckpointV1
					buf = append(buf[:0], "c1 "...)
					buf = enc.AppendEncode(buf, v)
				}
				return fn(buf, kind, cseq, nil)
			}); err != nil {
				return last, err
			}
		}
	}
	return last, nil
}

// BundleWriter writes a bundle from lines read elsewhere (a chain
// replicated line by line): the header, the lines as given, and an end
// line, given or computed from the a lines written. Its output is verified
// by whoever reads it (ReadBundle); BundleWriter checks nothing.
type BundleWriter struct {
	w     *bufio.Writer
	tally *bundleTally
	err   error
}

// NewBundleWriter writes the bundle header to w.
func NewBundleWriter(w io.Writer) *BundleWriter {
	b := &BundleWriter{w: bufio.NewWriterSize(w, 64<<10), tally: newBundleTally()}
	b.w.WriteString(bundleMagic + "\n")
	return b
}

// Line writes one line (without its newline): key, a, c or c1.
func (b *BundleWriter) Line(line []byte) error {
	if b.err != nil {
		return b.err
	}
	if len(line) > 2 && line[0] == 'a' && line[1] == ' ' {
		// An a line that is not base64 counts as its text: ReadBundle
		// names it before it reaches the end line.
		enc, err := base64.StdEncoding.AppendDecode(nil, line[2:])
		if err != nil {
			enc = line
		}
		ah := Hash(sha256.Sum256(enc))
		if err := b.tally.add(ah, ChainLink(b.tally.chain, ah, b.tally.n+1)); err != nil {
			b.err = err
			return err
		}
	}
	b.w.Write(line)
	b.err = b.w.WriteByte('\n')
	return b.err
}

// Actions returns how many a lines were written.
func (b *BundleWriter) Actions() uint64 { return b.tally.n }

// End writes the end line — line when it is not nil, else one computed
// from the a lines — and flushes.
func (b *BundleWriter) End(line []byte) error {
	if b.err != nil {
		return b.err
	}
	if line == nil {
		var err error
		if line, err = b.tally.endLine(); err != nil {
			return err
		}
	}
	b.w.Write(line)
	b.w.WriteByte('\n')
	b.err = b.w.Flush()
	return b.err
}

// Flush writes out the lines buffered so far (a follower's view).
func (b *BundleWriter) Flush() error {
	if b.err != nil {
		return b.err
	}
	b.err = b.w.Flush()
	return b.err
}
