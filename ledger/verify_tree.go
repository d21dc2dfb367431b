package ledger

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
)

// trust settles the key every signature is checked with: the pinned key
// when one is given, else the key the store records.
func (v *verifier) trust(pinned string) error {
	s := v.pub
	v.name = Origin(s.id)
	if pinned != "" {
		nv, pub, err := ParseVerifierKey(pinned)
		if err != nil {
			return err
		}
		v.key, v.vkey, v.keyHash, v.name = pub, pinned, nv.KeyHash(), nv.Name()
		v.report.TrustedKey, v.report.Pinned = pinned, true
		switch {
		case s.pub != nil && !s.pub.Equal(pub):
			v.add(0, rankRecord, "the store's checkpoints are signed by key %s, not by the pinned key %s", s.keyString(), pinned)
		case s.id != "" && nv.Name() != Origin(s.id):
			v.add(0, rankRecord, "the pinned key %s is for log %q, but this store is %q", pinned, nv.Name(), Origin(s.id))
		}
		return nil
	}
	if s.pub == nil {
		return fmt.Errorf("ledger store %s records no public key; pass the key to trust with --key VKEY", s.describe())
	}
	v.key, v.vkey = s.pub, s.vkey
	if s.vkey != "" {
		nv, _, err := ParseVerifierKey(s.vkey)
		if err != nil {
			return err
		}
		v.keyHash = nv.KeyHash()
	}
	v.report.TrustedKey = s.keyString()
	return nil
}

// keyString names the store's key: its verifier key, or for a store of
// the first format not written since, the public key in hex.
func (s *Store) keyString() string {
	if s.vkey != "" {
		return s.vkey
	}
	if s.pub == nil {
		return "(none)"
	}
	return fmt.Sprintf("ed25519:%x (%s)", []byte(s.pub), PublicKeyPath(s.dir))
}

func (v *verifier) keyDesc() string {
	if v.report.Pinned {
		return "pinned key " + v.report.TrustedKey
	}
	return "store's key " + v.report.TrustedKey
}

// treeFollower rebuilds the Merkle tree from the action hashes as the
// action ranges complete, and checks the root every tree checkpoint signs.
// Ranges complete in about seq order but not exactly: the worker that
// completes the range the tree waits for pushes its leaves, and those of
// the ranges after it already complete, while the other workers go on
// scanning. So the rebuild needs no goroutine of its own, and at the end
// of the scan only the last range's leaves are left to push.
type treeFollower struct {
	v    *verifier
	ends []uint64 // each range's last seq (math.MaxUint64 for the last range)

	mu   sync.Mutex
	done []bool // ranges complete
	next int    // the first range whose leaves the tree has not taken
	busy bool   // a worker is pushing leaves

	// Used only by the worker that set busy.
	tree rootStack
	ci   int // the next checkpoint to check
}

func newTreeFollower(v *verifier, ranges []actionRange) *treeFollower {
	t := &treeFollower{v: v, ends: make([]uint64, len(ranges)), done: make([]bool, len(ranges))}
	for i := range ranges {
		t.ends[i] = math.MaxUint64
		if i+1 < len(ranges) {
			t.ends[i] = ranges[i+1].from - 1
		}
	}
	return t
}

// finish records that range i has stored its leaf hashes and pushes the
// leaves that are now final, unless another worker is pushing: it will
// take them.
func (t *treeFollower) finish(i int) {
	t.mu.Lock()
	t.done[i] = true
	if t.busy {
		t.mu.Unlock()
		return
	}
	t.busy = true
	for t.next < len(t.done) && t.done[t.next] {
		end := t.ends[t.next]
		t.mu.Unlock()
		t.push(end) // a panic here leaves the lock free, for goSafe to report
		t.mu.Lock()
		t.next++
	}
	t.busy = false
	t.mu.Unlock()
}

// push rebuilds the tree up to the last tree checkpoint at or below seq
// end, checking each tree checkpoint's root on the way.
func (t *treeFollower) push(end uint64) {
	v := t.v
	if !v.hasNotes {
		return
	}
	for ; t.ci < len(v.cps); t.ci++ {
		e := &v.cps[t.ci]
		if !e.ok || !e.cp.IsNote() || e.key > uint64(len(v.leaves)) {
			continue
		}
		if e.key > end {
			return
		}
		for t.tree.size < e.key {
			t.tree.push(v.leaves[t.tree.size])
		}
		root := t.tree.root()
		if root != e.cp.Root {
			v.add(e.key, rankCheckpoint, "checkpoint %d signs Merkle root %s but the action hashes 1–%d make %s", e.key, e.cp.Root, e.key, root)
		}
		v.report.Root = root
	}
}

// checkSince proves the store consistent with each saved checkpoint: it
// must be signed by the trusted key, the store must hold at least as many
// actions, and the RFC 6962 consistency proof from its size to the store's
// must verify between its root and the store's.
func (v *verifier) checkSince(ctx context.Context, since []SavedCheckpoint, stored uint64) error {
	if len(since) == 0 {
		return nil
	}
	nv, err := v.noteVerifier()
	if err != nil {
		return err
	}
	for _, sc := range since {
		cp, err := OpenCheckpoint(sc.Note, nv)
		if err != nil {
			v.add(0, rankRecord, "checkpoint %s does not verify with the %s: %v", sc.Name, v.keyDesc(), err)
			continue
		}
		if cp.Seq > stored {
			var cut []LogTail
			if v.pub.scratch != nil {
				cut = v.pub.scratch.cut
			}
			v.add(stored+1, rankRecord, "%s", behindSentence(stored, sc.Name, cp.Seq, cp.Time, cut))
			v.tailNamed = v.tailNamed || len(cut) > 0
			continue
		}
		if v.report.Root.IsZero() {
			v.add(0, rankRecord, "checkpoint %s cannot be checked: the store has no tree checkpoint to prove it against", sc.Name)
			continue
		}
		r := newTreeReader(ctx, v.txn)
		hs, err := r.consistency(cp.Seq, stored)
		r.close()
		if err == nil {
			err = VerifyConsistency(cp.Seq, stored, toHashes(hs), cp.Root, v.report.Root)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			v.add(cp.Seq, rankRecord, "the store is not consistent with checkpoint %s (%s actions, signed %s): the actions it witnessed were rewritten (%v)",
				sc.Name, thousands(cp.Seq), cp.Time.Format("2006-01-02T15:04:05Z07:00"), err)
			continue
		}
		v.report.Consistent = append(v.report.Consistent, sc)
		v.covered = max(v.covered, cp.Seq)
	}
	return nil
}

// checkTails names the logs of the store that hold whole commits after
// damage (waltail.go), unless a saved checkpoint the store is behind
// named them already.
func (v *verifier) checkTails(stored uint64) {
	tails := v.pub.LostTails()
	if len(tails) == 0 || v.tailNamed {
		return
	}
	v.add(firstLost(stored, tails), rankRecord, "the store has %s; %s", tailSentence(tails), tailFix(stored))
}

func (v *verifier) noteVerifier() (note.Verifier, error) {
	vkey := v.vkey
	if vkey == "" {
		var err error
		if vkey, err = VerifierKey(v.name, v.key); err != nil {
			return nil, err
		}
	}
	nv, _, err := ParseVerifierKey(vkey)
	return nv, err
}

// thousands formats n with commas: 5910 → "5,910".
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// corrupt turns a panic while reading the store into an error, naming the
// damaged table files when their checksums find them.
func (s *Store) corrupt(r any) error {
	if s.dir != "" {
		if bad := s.damagedTables(); len(bad) > 0 {
			return fmt.Errorf("ledger store %s is corrupted: %s; restore it from a backup or a bundle", s.describe(), strings.Join(bad, "; "))
		}
	}
	return fmt.Errorf("ledger store %s is corrupted (%v); run ralph chain verify, and restore it from a backup or a bundle", s.describe(), r)
}

func (s *Store) inMemory() bool { return s.dir == "" }
