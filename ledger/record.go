package ledger

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"time"
)

// Stored values. Every one starts with a version byte so the format can
// change without guessing; docs/ledger.md describes each byte.
const (
	recordVersion     = 1
	headVersion       = 1
	checkpointVersion = 1
	// checkpointNoteVersion stores a tree checkpoint: the version byte, then
	// the signed note (note.go).
	checkpointNoteVersion = 2

	// recordHeaderLen is version + action_hash + chain_hash + checkpoint_seq;
	// the canonical encoding follows.
	recordHeaderLen = 1 + 32 + 32 + 8
	headLen         = 1 + 8 + 32
	checkpointLen   = 1 + 8 + 32 + 8 + ed25519.SignatureSize
)

// checkpointDomain prefixes every signed checkpoint message, so a
// signature made for a ralph checkpoint means nothing anywhere else.
const checkpointDomain = "ralph-ledger-checkpoint-v1"

// Indexed fields, in the order their keys are written.
const (
	IndexActionID = "action_id"
	IndexPlanID   = "plan_id"
	IndexIntentID = "intent_id"
	IndexRunID    = "run_id"
	IndexParentID = "parent_action_id"
)

var indexFields = [...]string{IndexActionID, IndexPlanID, IndexIntentID, IndexRunID, IndexParentID}

// indexIDs returns a's indexed id fields in the order of indexFields.
func (a *Action) indexIDs() [len(indexFields)]string {
	return [...]string{a.ActionID, a.PlanID, a.IntentID, a.RunID, a.ParentActionID}
}

// appendIndexKeys appends the index keys of action a at seq (no key for an
// empty field) and returns them.
func appendIndexKeys(keys [][]byte, a *Action, seq uint64) [][]byte {
	for i, v := range a.indexIDs() {
		if v != "" {
			keys = append(keys, indexKey(indexFields[i], v, seq))
		}
	}
	return keys
}

// record is a stored action value: the hashes and checkpoint seq the writer
// computed, then the canonical encoding they cover.
type record struct {
	actionHash    Hash
	chainHash     Hash
	checkpointSeq uint64
	encoding      []byte
}

func parseRecord(b []byte) (record, error) {
	var r record
	if len(b) < recordHeaderLen+1 {
		return r, fmt.Errorf("stored action is %d bytes, shorter than any record", len(b))
	}
	if b[0] != recordVersion {
		return r, fmt.Errorf("unknown stored action version %d (this build reads %d)", b[0], recordVersion)
	}
	copy(r.actionHash[:], b[1:33])
	copy(r.chainHash[:], b[33:65])
	r.checkpointSeq = binary.BigEndian.Uint64(b[65:73])
	r.encoding = b[recordHeaderLen:]
	return r, nil
}

// decodeRecord parses a stored action completely.
func decodeRecord(b []byte) (Action, error) {
	r, err := parseRecord(b)
	if err != nil {
		return Action{}, err
	}
	a, err := DecodeCanonical(r.encoding)
	if err != nil {
		return Action{}, err
	}
	a.ActionHash, a.ChainHash, a.CheckpointSeq = r.actionHash, r.chainHash, r.checkpointSeq
	return a, nil
}

func encodeHead(h Head) []byte {
	b := make([]byte, 0, headLen)
	b = append(b, headVersion)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	return append(b, h.ChainHash[:]...)
}

func decodeHead(b []byte) (Head, error) {
	var h Head
	if len(b) != headLen || b[0] != headVersion {
		return h, fmt.Errorf("head record is malformed (%d bytes, version %d)", len(b), firstByte(b))
	}
	h.Seq = binary.BigEndian.Uint64(b[1:9])
	copy(h.ChainHash[:], b[9:])
	return h, nil
}

// Checkpoint is a signed statement that the chain had ChainHash at Seq.
// A checkpoint of the first format (version 1) signs a binary message
// (CheckpointMessage); one of the tree format (version 2) is a signed note
// (note.go) that also carries the Merkle root of the first Seq action hashes.
type Checkpoint struct {
	Seq       uint64
	ChainHash Hash
	Time      time.Time
	Signature []byte // the 64-byte Ed25519 signature

	// Tree format only: Note is the whole signed note, Root the Merkle root
	// it signs, Origin its first line, SigName and KeyHash its signature
	// line's key name and key hash.
	Note    []byte
	Root    Hash
	Origin  string
	SigName string
	KeyHash uint32
	textLen int
}

// IsNote reports whether c is a tree-format checkpoint (a signed note).
func (c *Checkpoint) IsNote() bool { return c.Note != nil }

// message returns the bytes c's signature covers: the note text, or the
// binary message of the first format (appended to buf).
func (c *Checkpoint) message(buf []byte) []byte {
	if c.Note != nil {
		return c.Note[:c.textLen]
	}
	return appendCheckpointMessage(buf[:0], c.Seq, c.ChainHash, c.Time)
}

// CheckpointMessage returns the bytes a first-format checkpoint's signature
// covers: "ralph-ledger-checkpoint-v1" ‖ be64(seq) ‖ chain_hash ‖ be64(unix nanos).
func CheckpointMessage(seq uint64, chain Hash, t time.Time) []byte {
	return appendCheckpointMessage(make([]byte, 0, checkpointMessageLen), seq, chain, t)
}

const checkpointMessageLen = len(checkpointDomain) + 8 + 32 + 8

func appendCheckpointMessage(m []byte, seq uint64, chain Hash, t time.Time) []byte {
	m = append(m, checkpointDomain...)
	m = binary.BigEndian.AppendUint64(m, seq)
	m = append(m, chain[:]...)
	return binary.BigEndian.AppendUint64(m, uint64(t.UnixNano()))
}

// signCheckpoint makes a first-format checkpoint for seq and chain, signed
// with priv. Stores sign tree checkpoints (signTreeCheckpoint); tests use
// this one to make stores of the first format.
func signCheckpoint(priv ed25519.PrivateKey, seq uint64, chain Hash, t time.Time) Checkpoint {
	return Checkpoint{Seq: seq, ChainHash: chain, Time: t, Signature: ed25519.Sign(priv, CheckpointMessage(seq, chain, t))}
}

// VerifySignature reports whether c is signed by pub.
func (c Checkpoint) VerifySignature(pub ed25519.PublicKey) bool {
	return len(c.Signature) == ed25519.SignatureSize && len(pub) == ed25519.PublicKeySize &&
		ed25519.Verify(pub, c.message(make([]byte, 0, checkpointMessageLen)), c.Signature)
}

func encodeCheckpoint(c Checkpoint) []byte {
	if c.Note != nil {
		return append([]byte{checkpointNoteVersion}, c.Note...)
	}
	b := make([]byte, 0, checkpointLen)
	b = append(b, checkpointVersion)
	b = binary.BigEndian.AppendUint64(b, c.Seq)
	b = append(b, c.ChainHash[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Time.UnixNano()))
	return append(b, c.Signature...)
}

func decodeCheckpoint(b []byte) (Checkpoint, error) {
	var c Checkpoint
	if len(b) > 0 && b[0] == checkpointNoteVersion {
		return parseNoteCheckpoint(append([]byte(nil), b[1:]...))
	}
	if len(b) != checkpointLen || b[0] != checkpointVersion {
		return c, fmt.Errorf("checkpoint record is malformed (%d bytes, version %d)", len(b), firstByte(b))
	}
	c.Seq = binary.BigEndian.Uint64(b[1:9])
	copy(c.ChainHash[:], b[9:41])
	c.Time = time.Unix(0, int64(binary.BigEndian.Uint64(b[41:49]))).UTC()
	c.Signature = append([]byte(nil), b[49:]...)
	return c, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}
