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

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"
)

// BundleReport says what a bundle holds and which keys verified it.
type BundleReport struct {
	Actions     uint64
	Checkpoints uint64
	Key         string   // the verifier key of the bundle's first key line (or the pinned key it matched)
	Keys        []string // every key the checkpoints were checked with, in order (more than one: the bundle rotated keys)
	Pinned      bool     // the caller gave the keys rather than the bundle
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
	Line     int // its line in the bundle
	Seq      uint64
	Encoding []byte
	Action   *Action
}

// bundleKey is the key in force: the checkpoints after its key line are
// signed by it.
type bundleKey struct {
	text string
	nv   note.Verifier
	pub  ed25519.PublicKey
}

// pinnedKeys parses the keys a caller trusts.
func pinnedKeys(pinned []string) ([]bundleKey, error) {
	keys := make([]bundleKey, 0, len(pinned))
	for _, p := range pinned {
		nv, pub, err := ParseVerifierKey(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, bundleKey{text: strings.TrimSpace(p), nv: nv, pub: pub})
	}
	return keys, nil
}

// ReadBundle reads and verifies a bundle as it streams: every action hash,
// chain link and Merkle root, and every checkpoint's signature with the
// key in force — the last key line before it. When pinned is not empty,
// every key line must name one of the pinned verifier keys (a bundle that
// rotates keys, a run that moved between stores, needs each of them
// pinned). fn, if not nil, receives each action after its own checks; the
// bundle is proved only when ReadBundle returns nil, so a caller that
// stores actions must discard them on an error.
func ReadBundle(ctx context.Context, r io.Reader, pinned []string, fn func(BundleAction) error) (BundleReport, error) {
	pins, err := pinnedKeys(pinned)
	if err != nil {
		return BundleReport{}, err
	}
	b := &bundleReader{
		br:   bufio.NewReaderSize(r, 1<<20),
		pins: pins,
		fn:   fn,
		tree: newRangeFactory().NewEmptyRange(0),
	}
	b.rep.Pinned = len(pins) > 0
	if err := b.readHeader(); err != nil {
		return b.rep, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return b.rep, err
		}
		done, err := b.readBodyLine()
		if err != nil || done {
			return b.rep, err
		}
	}
}

// bundleReader is one pass over a bundle: the line it is at, the key in
// force, and the chain and Merkle tree the actions so far make.
type bundleReader struct {
	br      *bufio.Reader
	line    int
	pins    []bundleKey
	fn      func(BundleAction) error
	rep     BundleReport
	key     bundleKey
	tree    *compact.Range
	chain   Hash
	covered uint64 // the last seq a checkpoint covers
}

// next reads the next line; io.ErrUnexpectedEOF when there is none.
func (b *bundleReader) next() (string, error) {
	b.line++
	l, err := readLine(b.br)
	if errors.Is(err, io.EOF) && len(l) == 0 {
		return "", io.ErrUnexpectedEOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if len(l) > maxBundleLine {
		return "", fmt.Errorf("line is longer than %d bytes", maxBundleLine)
	}
	return string(l), nil
}

// fail names the current line in a BundleError.
func (b *bundleReader) fail(format string, args ...any) error {
	return &BundleError{Line: b.line, Msg: fmt.Sprintf(format, args...)}
}

// readHeader reads the magic line and the first key line.
func (b *bundleReader) readHeader() error {
	first, err := b.next()
	if err != nil || first != bundleMagic {
		return b.fail("not a ralph bundle: the first line must be %q", bundleMagic)
	}
	kl, err := b.next()
	if err != nil || !strings.HasPrefix(kl, "key ") {
		return b.fail(`the second line must be "key <verifier key>"`)
	}
	if b.key, err = b.useKey(kl[len("key "):]); err != nil {
		return b.fail("%v", err)
	}
	b.rep.Key = b.key.text
	return nil
}

// readBodyLine reads one line after the header and checks it; done is true
// once the end line has verified.
func (b *bundleReader) readBodyLine() (done bool, err error) {
	l, err := b.next()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return false, b.fail(`the bundle ends without its "end" line: it was cut short`)
		}
		return false, b.fail("%v", err)
	}
	kind, body, _ := strings.Cut(l, " ")
	switch kind {
	case "a":
		return false, b.readAction(body)
	case "key":
		key, err := b.useKey(body)
		if err != nil {
			return false, b.fail("%v", err)
		}
		b.key = key
		return false, nil
	case "c", "c1":
		return false, b.readCheckpoint(kind, body)
	case "end":
		return true, b.readEnd(body)
	default:
		return false, b.fail("unknown line kind %q (want a, c, c1, key or end)", kind)
	}
}

// useKey parses a key line's key, checks it against the pins and records
// it in the report.
func (b *bundleReader) useKey(text string) (bundleKey, error) {
	nv, pub, err := ParseVerifierKey(text)
	if err != nil {
		return bundleKey{}, err
	}
	k := bundleKey{text: text, nv: nv, pub: pub}
	if len(b.pins) > 0 {
		pin, ok := b.matchPin(k)
		if !ok {
			return k, b.unpinnedKey(text)
		}
		k = pin
	}
	if n := len(b.rep.Keys); n == 0 || b.rep.Keys[n-1] != k.text {
		b.rep.Keys = append(b.rep.Keys, k.text)
	}
	return k, nil
}

// matchPin finds the pinned key that k is.
func (b *bundleReader) matchPin(k bundleKey) (bundleKey, bool) {
	for _, p := range b.pins {
		if p.pub.Equal(k.pub) && p.nv.Name() == k.nv.Name() {
			return p, true
		}
	}
	return bundleKey{}, false
}

// unpinnedKey says that the key line's key is none of the pinned ones.
func (b *bundleReader) unpinnedKey(text string) error {
	texts := make([]string, len(b.pins))
	for i, p := range b.pins {
		texts[i] = p.text
	}
	what := "the bundle's checkpoints are"
	if b.line > 2 {
		what = "the checkpoints after this line are"
	}
	if len(b.pins) == 1 {
		return fmt.Errorf("%s signed by key %s, not by the pinned key %s", what, text, texts[0])
	}
	return fmt.Errorf("%s signed by key %s, not by any of the pinned keys %s", what, text, strings.Join(texts, ", "))
}

// readAction decodes an action line, checks its seq, form, hash and chain
// link, adds it to the tree and hands it to fn.
func (b *bundleReader) readAction(body string) error {
	enc, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return b.fail("action is not base64: %v", err)
	}
	seq := b.rep.Actions + 1
	a, err := DecodeCanonical(enc)
	if err != nil {
		return b.fail("action %d: %v", seq, err)
	}
	if a.Seq != seq {
		return b.fail("the action after seq %d encodes seq %d", seq-1, a.Seq)
	}
	if err := Validate(&a); err != nil {
		return b.fail("action %d: %v", seq, err)
	}
	if re := AppendCanonical(nil, &a); !bytes.Equal(re, enc) {
		return b.fail("action %d is not in canonical form", seq)
	}
	ah := Hash(sha256.Sum256(enc))
	b.chain = ChainLink(b.chain, ah, seq)
	lh := LeafHash(ah)
	if err := b.tree.Append(lh[:], nil); err != nil {
		return b.fail("%v", err)
	}
	b.rep.Actions = seq
	a.ActionHash, a.ChainHash = ah, b.chain
	if b.fn != nil {
		return b.fn(BundleAction{Line: b.line, Seq: seq, Encoding: enc, Action: &a})
	}
	return nil
}

// readCheckpoint verifies a checkpoint line with the key in force and
// checks that it covers exactly the actions before it.
func (b *bundleReader) readCheckpoint(kind, body string) error {
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return b.fail("checkpoint is not base64: %v", err)
	}
	var cp Checkpoint
	if kind == "c" {
		cp, err = b.openNoteCheckpoint(raw)
	} else {
		cp, err = b.openFirstFormatCheckpoint(raw)
	}
	if err != nil {
		return err
	}
	if cp.Seq != b.rep.Actions {
		return b.fail("checkpoint %d follows action %d; it must follow the last action it covers", cp.Seq, b.rep.Actions)
	}
	if cp.ChainHash != b.chain {
		return b.fail("checkpoint %d signs chain hash %s but action %d has %s", cp.Seq, cp.ChainHash, cp.Seq, b.chain)
	}
	b.covered = cp.Seq
	b.rep.Checkpoints++
	return nil
}

// openNoteCheckpoint verifies a signed-note checkpoint and its Merkle root.
func (b *bundleReader) openNoteCheckpoint(raw []byte) (Checkpoint, error) {
	cp, err := OpenCheckpoint(raw, b.key.nv)
	if err != nil {
		return cp, b.fail("checkpoint after action %d does not verify with key %s: %v", b.rep.Actions, b.key.text, err)
	}
	root, err := b.tree.GetRootHash(nil)
	if err != nil {
		return cp, b.fail("%v", err)
	}
	if !bytes.Equal(root, cp.Root[:]) {
		return cp, b.fail("checkpoint %d signs Merkle root %s but the actions 1–%d make %x", cp.Seq, cp.Root, b.rep.Actions, root)
	}
	return cp, nil
}

// openFirstFormatCheckpoint verifies a first-format (bare Ed25519) checkpoint.
func (b *bundleReader) openFirstFormatCheckpoint(raw []byte) (Checkpoint, error) {
	cp, err := decodeCheckpoint(raw)
	if err != nil || cp.IsNote() {
		return cp, b.fail("first-format checkpoint is malformed: %v", err)
	}
	if !ed25519.Verify(b.key.pub, CheckpointMessage(cp.Seq, cp.ChainHash, cp.Time), cp.Signature) {
		return cp, b.fail("checkpoint %d: the Ed25519 signature does not verify with key %s", cp.Seq, b.key.text)
	}
	return cp, nil
}

// readEnd checks the end line against the actions read, that a checkpoint
// covers the last of them and that nothing follows; it fills the report's
// root and head.
func (b *bundleReader) readEnd(body string) error {
	f := strings.Fields(body)
	if len(f) != 3 {
		return b.fail(`the end line must be "end <actions> <chain hash> <root>"`)
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || n != b.rep.Actions {
		return b.fail("the bundle says it holds %s actions but holds %d", f[0], b.rep.Actions)
	}
	root, err := b.tree.GetRootHash(nil)
	if err != nil {
		return b.fail("%v", err)
	}
	copy(b.rep.Root[:], root)
	if f[1] != b.chain.String() || (b.rep.Actions > 0 && f[2] != b.rep.Root.String()) {
		return b.fail("the end line's chain hash or root does not match the actions")
	}
	if b.covered != b.rep.Actions {
		return b.fail("actions %d–%d are covered by no checkpoint", b.covered+1, b.rep.Actions)
	}
	if _, err := b.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		return b.fail("text follows the end line")
	}
	b.rep.Head = Head{Seq: b.rep.Actions, ChainHash: b.chain}
	return nil
}
