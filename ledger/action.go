package ledger

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ralphloop/ralph/rtfs"
)

// Action is one event on the causal chain (seed 001 §3.1) plus its place in
// the ledger: Seq, RunID, the two hashes and the checkpoint that signs it.
//
// Arguments, Result and Metadata hold RTFS data values (no functions). Empty
// ParentActionID and ErrorMessage mean "none"; a nil Result means "no result".
type Action struct {
	Seq            uint64
	RunID          string
	ActionID       string
	ParentActionID string
	PlanID         string
	IntentID       string
	Type           ActionType
	FunctionName   string
	Arguments      []rtfs.Value
	Result         rtfs.Value
	Success        bool
	ErrorMessage   string
	Cost           float64
	DurationMS     int64
	Timestamp      time.Time
	Metadata       map[string]rtfs.Value

	ActionHash    Hash
	ChainHash     Hash
	CheckpointSeq uint64

	// KV holds the writes to the store's key/value table that are this
	// action's effect (a kv.put, an idempotency record set or cleared):
	// they commit in the same transaction as the action, or not at all. They
	// are not part of the record or its hash, and an action read back has
	// none; the action itself says what they were (loop.RebuildKV).
	KV []KVWrite
}

// Metadata keys that link an action to the reasoning behind it (seed 001 §5).
const (
	MetaIntentID                = "intent_id"
	MetaConstitutionalRuleID    = "constitutional_rule_id"
	MetaDelegationDecisionID    = "delegation_decision_id"
	MetaCapabilityAttestationID = "capability_attestation_id"
)

// Hash is a SHA-256 digest.
type Hash [32]byte

// String returns the lower-case hex form of h.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is all zero bytes (chain_hash[0]).
func (h Hash) IsZero() bool { return h == Hash{} }

// MarshalText encodes h as lower-case hex.
func (h Hash) MarshalText() ([]byte, error) {
	out := make([]byte, hex.EncodedLen(len(h)))
	hex.Encode(out, h[:])
	return out, nil
}

// UnmarshalText decodes 64 hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) != hex.EncodedLen(len(h)) {
		return fmt.Errorf("hash must be %d hex digits, got %d characters", hex.EncodedLen(len(h)), len(b))
	}
	if _, err := hex.Decode(h[:], b); err != nil {
		return fmt.Errorf("hash is not hex: %w", err)
	}
	return nil
}

// ParseHash decodes a hash from 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	err := h.UnmarshalText([]byte(s))
	return h, err
}

// Receipt is what Append returns once an action is durable.
type Receipt struct {
	Seq           uint64
	ActionHash    Hash
	ChainHash     Hash
	CheckpointSeq uint64
}

// Head is the last action of the chain: its seq and chain hash. The zero
// Head is an empty chain.
type Head struct {
	Seq       uint64
	ChainHash Hash
}

// clone returns a copy of a whose slice and map are its own, so that a
// caller changing its Action after Append cannot change what was recorded.
// RTFS values are immutable and are shared.
func (a *Action) clone() *Action {
	c := *a
	if a.Arguments != nil {
		c.Arguments = append([]rtfs.Value(nil), a.Arguments...)
	}
	if a.KV != nil {
		c.KV = append([]KVWrite(nil), a.KV...)
	}
	if a.Metadata != nil {
		c.Metadata = make(map[string]rtfs.Value, len(a.Metadata))
		for k, v := range a.Metadata {
			c.Metadata[k] = v
		}
	}
	return &c
}
