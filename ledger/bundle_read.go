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
	var rep BundleReport
	pins, err := pinnedKeys(pinned)
	if err != nil {
		return rep, err
	}
	rep.Pinned = len(pins) > 0
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
	// useKey parses a key line's key and checks it against the pins.
	useKey := func(text string) (bundleKey, error) {
		nv, pub, err := ParseVerifierKey(text)
		if err != nil {
			return bundleKey{}, err
		}
		k := bundleKey{text: text, nv: nv, pub: pub}
		if len(pins) > 0 {
			found := false
			for _, p := range pins {
				if p.pub.Equal(pub) && p.nv.Name() == nv.Name() {
					k, found = p, true
					break
				}
			}
			if !found {
				texts := make([]string, len(pins))
				for i, p := range pins {
					texts[i] = p.text
				}
				what := "the bundle's checkpoints are"
				if line > 2 {
					what = "the checkpoints after this line are"
				}
				if len(pins) == 1 {
					return k, fmt.Errorf("%s signed by key %s, not by the pinned key %s", what, text, texts[0])
				}
				return k, fmt.Errorf("%s signed by key %s, not by any of the pinned keys %s", what, text, strings.Join(texts, ", "))
			}
		}
		if n := len(rep.Keys); n == 0 || rep.Keys[n-1] != k.text {
			rep.Keys = append(rep.Keys, k.text)
		}
		return k, nil
	}
	first, err := next()
	if err != nil || first != bundleMagic {
		return fail("not a ralph bundle: the first line must be %q", bundleMagic)
	}
	kl, err := next()
	if err != nil || !strings.HasPrefix(kl, "key ") {
		return fail(`the second line must be "key <verifier key>"`)
	}
	key, err := useKey(kl[len("key "):])
	if err != nil {
		return fail("%v", err)
	}
	rep.Key = key.text
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
				if err := fn(BundleAction{Line: line, Seq: seq, Encoding: b, Action: &a}); err != nil {
					return rep, err
				}
			}
		case "key":
			if key, err = useKey(body); err != nil {
				return fail("%v", err)
			}
		case "c", "c1":
			b, err := enc.DecodeString(body)
			if err != nil {
				return fail("checkpoint is not base64: %v", err)
			}
			var cp Checkpoint
			if kind == "c" {
				if cp, err = OpenCheckpoint(b, key.nv); err != nil {
					return fail("checkpoint after action %d does not verify with key %s: %v", rep.Actions, key.text, err)
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
				if !ed25519.Verify(key.pub, CheckpointMessage(cp.Seq, cp.ChainHash, cp.Time), cp.Signature) {
					return fail("checkpoint %d: the Ed25519 signature does not verify with key %s", cp.Seq, key.text)
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
			return fail("unknown line kind %q (want a, c, c1, key or end)", kind)
		}
	}
}
