package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tlog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// A checkpoint of the tree format is a C2SP tlog-checkpoint
// (https://c2sp.org/tlog-checkpoint) in a C2SP signed note
// (https://c2sp.org/signed-note), signed with Ed25519 by the store's key
// under the name of its origin:
//
//	ralph/<store id>
//	<tree size = seq>
//	<base64 RFC 6962 Merkle root of the action hashes 1…seq>
//	chain <hex chain_hash[seq]>
//	time <unix nanoseconds>
//
//	— ralph/<store id> <base64(key hash ‖ Ed25519 signature)>
//
// The two extension lines tie the tree to the hash chain and say when the
// checkpoint was signed.

// OriginPrefix starts every store's origin: ralph/<store id>.
const OriginPrefix = "ralph/"

// Origin returns the checkpoint origin (and note key name) of store id.
func Origin(id string) string { return OriginPrefix + id }

// VerifierKey returns the signed-note verifier key of pub under name:
// <name>+<8 hex digits of key hash>+<base64(0x01 ‖ pub)>.
func VerifierKey(name string, pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(name, pub)
}

// ParseVerifierKey parses a verifier key (as `ralph chain key` prints it)
// into its name and Ed25519 public key.
func ParseVerifierKey(vkey string) (note.Verifier, ed25519.PublicKey, error) {
	vkey = strings.TrimSpace(vkey)
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, nil, fmt.Errorf("%q is not a signed-note verifier key (name+hash+key, as ralph chain key prints): %w", vkey, err)
	}
	parts := strings.SplitN(vkey, "+", 3) // name and hash hold no '+'; the base64 key may
	raw, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize {
		return nil, nil, fmt.Errorf("verifier key %q does not hold an Ed25519 key", vkey)
	}
	return v, ed25519.PublicKey(raw[1:]), nil
}

// newNoteSigner returns a note signer for priv under name.
func newNoteSigner(name string, priv ed25519.PrivateKey) (note.Signer, error) {
	vkey, err := VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	seed := append([]byte{1}, priv.Seed()...)
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, v.KeyHash(), base64.StdEncoding.EncodeToString(seed))
	return note.NewSigner(skey)
}

// checkpointText is the note text of a tree checkpoint.
func checkpointText(origin string, seq uint64, root, chain Hash, t time.Time) []byte {
	body := tlog.Checkpoint{Origin: origin, Size: seq, Hash: root[:]}.Marshal()
	return fmt.Appendf(body, "chain %s\ntime %d\n", chain, t.UnixNano())
}

// signTreeCheckpoint signs the checkpoint of the tree of seq leaves.
func signTreeCheckpoint(signer note.Signer, seq uint64, root, chain Hash, t time.Time) (Checkpoint, error) {
	text := checkpointText(signer.Name(), seq, root, chain, t)
	msg, err := note.Sign(&note.Note{Text: string(text)}, signer)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("sign checkpoint: %w", err)
	}
	return parseNoteCheckpoint(msg)
}

// parseNoteCheckpoint reads a signed checkpoint note without verifying its
// signature: the body's fields, and the first signature's 64 bytes and key
// hash, for the batch verifier. Verify checks the signature, the key hash
// and the origin against the store's key.
func parseNoteCheckpoint(msg []byte) (Checkpoint, error) {
	var c Checkpoint
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 || !bytes.HasSuffix(msg, []byte("\n")) {
		return c, errors.New("the checkpoint note has no signature block")
	}
	text, sigs := msg[:i+1], msg[i+2:]
	var cp tlog.Checkpoint
	rest, err := cp.Unmarshal(text)
	if err != nil {
		return c, err
	}
	if len(cp.Hash) != len(c.Root) {
		return c, fmt.Errorf("the checkpoint's root hash is %d bytes, not %d", len(cp.Hash), len(c.Root))
	}
	c.Origin, c.Seq = cp.Origin, cp.Size
	copy(c.Root[:], cp.Hash)
	if c.ChainHash, c.Time, err = parseExtensions(rest); err != nil {
		return c, err
	}
	line, _, _ := bytes.Cut(sigs, []byte("\n"))
	name, b64, ok := strings.Cut(strings.TrimPrefix(string(line), "— "), " ")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if !ok || !strings.HasPrefix(string(line), "— ") || err != nil || len(raw) != 4+ed25519.SignatureSize {
		return c, errors.New("the checkpoint note's signature line is malformed")
	}
	c.SigName, c.KeyHash = name, binary.BigEndian.Uint32(raw)
	c.Signature = raw[4:]
	c.Note = msg
	c.textLen = len(text)
	return c, nil
}

func parseExtensions(rest []byte) (Hash, time.Time, error) {
	var chain Hash
	lines := strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "chain ") || !strings.HasPrefix(lines[1], "time ") {
		return chain, time.Time{}, errors.New(`the checkpoint's extension lines are not "chain <hex>" and "time <unix ns>"`)
	}
	chain, err := ParseHash(lines[0][len("chain "):])
	if err != nil {
		return chain, time.Time{}, fmt.Errorf("the checkpoint's chain line: %w", err)
	}
	ns, err := strconv.ParseInt(lines[1][len("time "):], 10, 64)
	if err != nil {
		return chain, time.Time{}, fmt.Errorf("the checkpoint's time line: %w", err)
	}
	return chain, time.Unix(0, ns).UTC(), nil
}

// OpenCheckpoint verifies a signed checkpoint note with v (note.Open and
// C2SP tlog-checkpoint parsing of transparency-dev/formats) and returns it.
// The origin must be v's name.
func OpenCheckpoint(msg []byte, v note.Verifier) (Checkpoint, error) {
	if _, _, _, err := tlog.ParseCheckpoint(msg, v.Name(), v); err != nil {
		return Checkpoint{}, err
	}
	return parseNoteCheckpoint(msg)
}
