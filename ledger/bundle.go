package ledger

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// A bundle is a whole store as text, self-verifying and lossless: every
// action's exact canonical encoding, every checkpoint and the verifier
// key, one item per line (docs/ledger.md §11):
//
//	ralph-bundle 1
//	key <signed-note verifier key>
//	a <base64 canonical encoding of action 1>
//	…
//	c <base64 signed checkpoint note>        after the last action it covers
//	c1 <base64 113-byte first-format record>  (a store made by an earlier ralph)
//	end <actions> <hex chain_hash of the last> <hex Merkle root of all>
const bundleMagic = "ralph-bundle 1"

// maxBundleLine bounds one line: an action of the largest size, in base64.
const maxBundleLine = 96 << 20

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
	n := 0
	err := s.view(func(txn *badger.Txn) error {
		ai := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction)})
		defer ai.Close()
		ci := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixCheckpoint)})
		defer ci.Close()
		ci.Rewind()
		tree := newRangeFactory().NewEmptyRange(0)
		var chain Hash
		enc := base64.StdEncoding
		var buf []byte
		for ai.Rewind(); ai.Valid(); ai.Next() {
			seq := seqOf(ai.Item().Key())
			if err := ai.Item().Value(func(v []byte) error {
				rec, err := parseRecord(v)
				if err != nil {
					return fmt.Errorf("action %d cannot be read: %w", seq, err)
				}
				chain = rec.chainHash
				lh := LeafHash(rec.actionHash)
				if err := tree.Append(lh[:], nil); err != nil {
					return err
				}
				buf = append(buf[:0], "a "...)
				buf = enc.AppendEncode(buf, rec.encoding)
				buf = append(buf, '\n')
				_, err = bw.Write(buf)
				return err
			}); err != nil {
				return err
			}
			n++
			for ; ci.Valid() && seqOf(ci.Item().Key()) <= seq; ci.Next() {
				if err := ci.Item().Value(func(v []byte) error {
					if len(v) > 0 && v[0] == checkpointNoteVersion {
						buf = append(buf[:0], "c "...)
						buf = enc.AppendEncode(buf, v[1:])
					} else {
						buf = append(buf[:0], "c1 "...)
						buf = enc.AppendEncode(buf, v)
					}
					buf = append(buf, '\n')
					_, err := bw.Write(buf)
					return err
				}); err != nil {
					return err
				}
			}
		}
		root, err := tree.GetRootHash(nil)
		if err != nil {
			return err
		}
		var r Hash
		copy(r[:], root)
		_, err = fmt.Fprintf(bw, "end %d %s %s\n", n, chain, r)
		return err
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// BundleReport says what a bundle holds and which key verified it.
type BundleReport struct {
	Actions     uint64
	Checkpoints uint64
	Key         string // the verifier key every checkpoint was checked with
	Pinned      bool   // the caller gave Key rather than the bundle
	Head        Head
	Root        Hash
}

// BundleError names the bundle line that failed.
type BundleError struct {
	Line int
	Msg  string
}

func (e *BundleError) Error() string { return fmt.Sprintf("bundle line %d: %s", e.Line, e.Msg) }

// BundleAction is one action read from a bundle: its seq, its exact
// canonical encoding and the action it decodes to.
type BundleAction struct {
	Seq      uint64
	Encoding []byte
	Action   *Action
}

// ReadBundle reads and verifies a bundle as it streams: every action hash,
// chain link and Merkle root, and every checkpoint's signature with pinned
// (a verifier key) or, when pinned is empty, with the key the bundle
// names. fn, if not nil, receives each action after its own checks; the
// bundle is proved only when ReadBundle returns nil, so a caller that
// stores actions must discard them on an error.
func ReadBundle(ctx context.Context, r io.Reader, pinned string, fn func(BundleAction) error) (BundleReport, error) {
	var rep BundleReport
	br := bufio.NewReaderSize(r, 1<<20)
	line := 0
	next := func() (string, error) {
		line++
		b, err := readLine(br)
		if errors.Is(err, io.EOF) && len(b) == 0 {
			return "", io.ErrUnexpectedEOF
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if len(b) > maxBundleLine {
			return "", fmt.Errorf("line is longer than %d bytes", maxBundleLine)
		}
		return string(b), nil
	}
	fail := func(format string, args ...any) (BundleReport, error) {
		return rep, &BundleError{Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	first, err := next()
	if err != nil || first != bundleMagic {
		return fail("not a ralph bundle: the first line must be %q", bundleMagic)
	}
	kl, err := next()
	if err != nil || !strings.HasPrefix(kl, "key ") {
		return fail(`the second line must be "key <verifier key>"`)
	}
	bundleKey := kl[len("key "):]
	nv, pub, err := ParseVerifierKey(bundleKey)
	if err != nil {
		return fail("%v", err)
	}
	rep.Key = bundleKey
	if pinned != "" {
		pv, ppub, err := ParseVerifierKey(pinned)
		if err != nil {
			return rep, err
		}
		rep.Key, rep.Pinned = pinned, true
		if !ppub.Equal(pub) || pv.Name() != nv.Name() {
			return fail("the bundle's checkpoints are signed by key %s, not by the pinned key %s", bundleKey, pinned)
		}
		nv, pub = pv, ppub
	}
	tree := newRangeFactory().NewEmptyRange(0)
	var chain Hash
	var covered uint64 // the last seq a checkpoint covers
	enc := base64.StdEncoding
	for {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		l, err := next()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fail(`the bundle ends without its "end" line: it was cut short`)
			}
			return fail("%v", err)
		}
		kind, body, _ := strings.Cut(l, " ")
		switch kind {
		case "a":
			b, err := enc.DecodeString(body)
			if err != nil {
				return fail("action is not base64: %v", err)
			}
			seq := rep.Actions + 1
			a, err := DecodeCanonical(b)
			if err != nil {
				return fail("action %d: %v", seq, err)
			}
			if a.Seq != seq {
				return fail("the action after seq %d encodes seq %d", seq-1, a.Seq)
			}
			if err := Validate(&a); err != nil {
				return fail("action %d: %v", seq, err)
			}
			if re := AppendCanonical(nil, &a); !bytes.Equal(re, b) {
				return fail("action %d is not in canonical form", seq)
			}
			ah := Hash(sha256.Sum256(b))
			chain = ChainLink(chain, ah, seq)
			lh := LeafHash(ah)
			if err := tree.Append(lh[:], nil); err != nil {
				return fail("%v", err)
			}
			rep.Actions = seq
			a.ActionHash, a.ChainHash = ah, chain
			if fn != nil {
				if err := fn(BundleAction{Seq: seq, Encoding: b, Action: &a}); err != nil {
					return rep, err
				}
			}
		case "c", "c1":
			b, err := enc.DecodeString(body)
			if err != nil {
				return fail("checkpoint is not base64: %v", err)
			}
			var cp Checkpoint
			if kind == "c" {
				if cp, err = OpenCheckpoint(b, nv); err != nil {
					return fail("checkpoint after action %d does not verify with key %s: %v", rep.Actions, rep.Key, err)
				}
				root, err := tree.GetRootHash(nil)
				if err != nil {
					return fail("%v", err)
				}
				if !bytes.Equal(root, cp.Root[:]) {
					return fail("checkpoint %d signs Merkle root %s but the actions 1–%d make %x", cp.Seq, cp.Root, rep.Actions, root)
				}
			} else {
				if cp, err = decodeCheckpoint(b); err != nil || cp.IsNote() {
					return fail("first-format checkpoint is malformed: %v", err)
				}
				if !ed25519.Verify(pub, CheckpointMessage(cp.Seq, cp.ChainHash, cp.Time), cp.Signature) {
					return fail("checkpoint %d: the Ed25519 signature does not verify with key %s", cp.Seq, rep.Key)
				}
			}
			if cp.Seq != rep.Actions {
				return fail("checkpoint %d follows action %d; it must follow the last action it covers", cp.Seq, rep.Actions)
			}
			if cp.ChainHash != chain {
				return fail("checkpoint %d signs chain hash %s but action %d has %s", cp.Seq, cp.ChainHash, cp.Seq, chain)
			}
			covered = cp.Seq
			rep.Checkpoints++
		case "end":
			f := strings.Fields(body)
			if len(f) != 3 {
				return fail(`the end line must be "end <actions> <chain hash> <root>"`)
			}
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil || n != rep.Actions {
				return fail("the bundle says it holds %s actions but holds %d", f[0], rep.Actions)
			}
			root, err := tree.GetRootHash(nil)
			if err != nil {
				return fail("%v", err)
			}
			copy(rep.Root[:], root)
			if f[1] != chain.String() || (rep.Actions > 0 && f[2] != rep.Root.String()) {
				return fail("the end line's chain hash or root does not match the actions")
			}
			if covered != rep.Actions {
				return fail("actions %d–%d are covered by no checkpoint", covered+1, rep.Actions)
			}
			if _, err := next(); !errors.Is(err, io.ErrUnexpectedEOF) {
				return fail("text follows the end line")
			}
			rep.Head = Head{Seq: rep.Actions, ChainHash: chain}
			return rep, nil
		default:
			return fail("unknown line kind %q (want a, c, c1 or end)", kind)
		}
	}
}
