package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// importN imports sample actions from..from+n-1 as one request: one commit,
// so one checkpoint signs all of them.
func importN(t testing.TB, s *Store, from, n int) {
	t.Helper()
	var in bytes.Buffer
	for i := from; i < from+n; i++ {
		in.Write(AppendJSON(nil, sample(i)))
		in.WriteByte('\n')
	}
	if _, err := s.Import(context.Background(), &in); err != nil {
		t.Fatal(err)
	}
}

// groupStore makes a closed on-disk store of 40 actions: 1–5 one commit
// each, 6–35 one import (checkpoint 35), 36–40 one commit each.
func groupStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s := openDir(t, dir, false)
	appendN(t, s, 0, 5)
	importN(t, s, 5, 30)
	appendN(t, s, 35, 5)
	mustVerify(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// proveDir opens dir and proves the action at seq.
func proveDir(t *testing.T, dir string, seq uint64) ActionProof {
	t.Helper()
	s := openDir(t, dir, false)
	defer s.Close()
	p, err := s.VerifyAction(context.Background(), seq)
	if err != nil {
		t.Fatalf("VerifyAction(%d): %v", seq, err)
	}
	if p.OK() != (p.Problem() == "") || (p.Problem() != "" && p.Problem() != p.Problems[0]) {
		t.Fatalf("proof %d: OK %v but Problem %q, Problems %q", seq, p.OK(), p.Problem(), p.Problems)
	}
	t.Logf("seq %d: %q", seq, p.Problems)
	return p
}

// facts is the pass/fail pattern of a proof, in ActionProof's order.
type facts struct{ hash, link, cpSeq, sig, reach bool }

var allGood = facts{true, true, true, true, true}

func factsOf(p ActionProof) facts {
	return facts{p.ActionHashOK, p.LinkOK, p.CheckpointSeqOK, p.SignatureOK, p.ReachesCheckpoint}
}

// wantProof checks the facts of the proof of seq, and that a failed proof
// names the seq of the problem and says what it is.
func wantProof(t *testing.T, p ActionProof, want facts, names uint64, says string) {
	t.Helper()
	if got := factsOf(p); got != want {
		t.Errorf("proof of %d: facts %+v, want %+v (problems %q)", p.Seq, got, want, p.Problems)
	}
	if want == allGood {
		if !p.OK() {
			t.Errorf("proof of %d fails: %q", p.Seq, p.Problems)
		}
		return
	}
	if p.OK() {
		t.Fatalf("proof of %d passes", p.Seq)
	}
	if !strings.Contains(p.Problem(), fmt.Sprint(names)) || !strings.Contains(p.Problem(), says) {
		t.Errorf("proof of %d: first problem %q, want it to name %d and say %q", p.Seq, p.Problem(), names, says)
	}
}

func TestVerifyActionProvesEveryAction(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	appendN(t, s, 0, 5)
	importN(t, s, 5, 300)
	// Concurrent appenders: commits of several actions each.
	runWorkers(200, 8, func(i int) {
		if _, err := s.Append(ctx, sample(1000+i)); err != nil {
			t.Error(err)
		}
	})
	rep := mustVerify(t, s)
	if rep.Actions != 505 || rep.Checkpoints >= 505 {
		t.Fatalf("store of %d actions in %d checkpoints", rep.Actions, rep.Checkpoints)
	}
	for seq := uint64(1); seq <= rep.Actions; seq++ {
		p, err := s.VerifyAction(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.GetSeq(seq)
		if err != nil {
			t.Fatal(err)
		}
		if !p.OK() || factsOf(p) != allGood || p.TooFar {
			t.Fatalf("proof of %d: %+v", seq, p)
		}
		if p.ActionHash != a.ActionHash || p.ChainHash != a.ChainHash || p.CheckpointSeq != a.CheckpointSeq ||
			p.Links != a.CheckpointSeq-seq || p.PrevSeq != seq-1 {
			t.Fatalf("proof of %d: %+v, action %+v", seq, p, a)
		}
		if p.CheckpointTime.IsZero() || p.CheckpointChainHash.IsZero() {
			t.Fatalf("proof of %d has no checkpoint time or chain hash: %+v", seq, p)
		}
	}
	if p, _ := s.VerifyAction(ctx, 1); p.Links != 0 || p.CheckpointSeq != 1 {
		t.Errorf("proof of 1: %+v", p)
	}
	if p, _ := s.VerifyAction(ctx, 6); p.Links != 299 || p.CheckpointSeq != 305 {
		t.Errorf("proof of the first imported action: %+v", p)
	}
	for _, seq := range []uint64{0, rep.Actions + 1} {
		if _, err := s.VerifyAction(ctx, seq); !errors.Is(err, ErrNotFound) {
			t.Errorf("VerifyAction(%d) = %v, want ErrNotFound", seq, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.VerifyAction(cctx, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("VerifyAction with a cancelled context = %v", err)
	}
	s.Close()
	if _, err := s.VerifyAction(ctx, 3); !errors.Is(err, ErrClosed) {
		t.Errorf("VerifyAction on a closed store = %v", err)
	}
}

// A changed byte anywhere in the record fails the fact that covers it.
func TestVerifyActionNamesAChangedByte(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, tamperN)
	const target = 17
	var orig []byte
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		orig = rawGet(t, txn, actionKey(target))
		return nil
	})
	unreadable := facts{false, false, false, true, false}
	content := facts{false, true, true, true, true}
	cases := []struct {
		pos  int
		want facts
		says string
	}{
		{0, unreadable, "cannot be read"},
		{1, facts{false, false, true, true, true}, "altered"},    // stored action_hash
		{40, facts{true, false, true, true, false}, "link"},      // stored chain_hash
		{70, facts{true, true, false, true, true}, "checkpoint"}, // checkpoint_seq
		{recordHeaderLen, content, "altered"},                    // encoding version
		{recordHeaderLen + 5, content, "altered"},                // the seq it encodes
		{recordHeaderLen + 30, content, "altered"},
		{len(orig) / 2, content, "altered"},
		{len(orig) - 30, content, "altered"},
		{len(orig) - 1, content, "altered"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("byte %d", c.pos), func(t *testing.T) {
			bad := append([]byte(nil), orig...)
			bad[c.pos] ^= 0x20
			rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(actionKey(target), bad) })
			wantProof(t, proveDir(t, dir, target), c.want, target, c.says)
			wantProof(t, proveDir(t, dir, target-1), allGood, 0, "")
			rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(actionKey(target), orig) })
		})
	}
	wantProof(t, proveDir(t, dir, target), allGood, 0, "")
}

// Inside a group commit, an action's proof walks through the actions after
// it: their stored action hashes matter to it, their content does not.
func TestVerifyActionWalksTheCommit(t *testing.T) {
	t.Parallel()
	dir := groupStore(t)
	const target = 17 // inside the import, signed by checkpoint 35
	var orig []byte
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		orig = rawGet(t, txn, actionKey(target))
		return nil
	})
	set := func(pos int) {
		bad := append([]byte(nil), orig...)
		bad[pos] ^= 0x20
		rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(actionKey(target), bad) })
	}
	// Content changed: only that action fails.
	set(len(orig) - 1)
	wantProof(t, proveDir(t, dir, target), facts{false, true, true, true, true}, target, "altered")
	wantProof(t, proveDir(t, dir, 10), allGood, 0, "")
	// Its stored action hash changed: the chain through it no longer
	// reaches the checkpoint, for every action of the commit before it.
	set(1)
	wantProof(t, proveDir(t, dir, 10), facts{true, true, true, true, false}, target, "does not reach checkpoint 35")
	wantProof(t, proveDir(t, dir, 6), facts{true, true, true, true, false}, target, "does not reach checkpoint 35")
	wantProof(t, proveDir(t, dir, 30), allGood, 0, "")
	wantProof(t, proveDir(t, dir, 5), allGood, 0, "")
	// Deleted: the walk cannot pass it.
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Delete(actionKey(target)) })
	wantProof(t, proveDir(t, dir, 10), facts{true, true, true, true, false}, target, "missing")
	wantProof(t, proveDir(t, dir, target+1), facts{true, false, true, true, true}, target, "missing")
	s := openDir(t, dir, false)
	if _, err := s.VerifyAction(context.Background(), target); !errors.Is(err, ErrNotFound) {
		t.Errorf("VerifyAction of a deleted action = %v", err)
	}
	s.Close()
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(actionKey(target), orig) })
	for seq := uint64(1); seq <= tamperN; seq++ {
		wantProof(t, proveDir(t, dir, seq), allGood, 0, "")
	}
}

func TestVerifyActionNamesSwappedActions(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, tamperN)
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		a, b := rawGet(t, txn, actionKey(9)), rawGet(t, txn, actionKey(31))
		if err := txn.Set(actionKey(9), b); err != nil {
			return err
		}
		return txn.Set(actionKey(31), a)
	})
	none := facts{}
	none.sig = true // the checkpoints are untouched
	wantProof(t, proveDir(t, dir, 9), none, 9, "swapped")
	wantProof(t, proveDir(t, dir, 31), none, 31, "swapped")
	// The actions after them link to a chain hash that is no longer there.
	wantProof(t, proveDir(t, dir, 10), facts{true, false, true, true, true}, 10, "link")
	wantProof(t, proveDir(t, dir, 8), allGood, 0, "")
}

func TestVerifyActionNamesAForgedCheckpoint(t *testing.T) {
	t.Parallel()
	_, other, _ := ed25519.GenerateKey(nil)
	forge := func(t *testing.T, dir string, seq uint64) {
		rawUpdate(t, dir, func(txn *badger.Txn) error {
			cp, err := decodeCheckpoint(rawGet(t, txn, checkpointKey(seq)))
			if err != nil {
				return err
			}
			return txn.Set(checkpointKey(seq), encodeCheckpoint(signCheckpoint(other, cp.Seq, cp.ChainHash, cp.Time)))
		})
	}
	forgedSig := facts{true, true, true, false, true}
	t.Run("one action per commit", func(t *testing.T) {
		t.Parallel()
		dir := tamperStore(t, tamperN)
		forge(t, dir, 28)
		wantProof(t, proveDir(t, dir, 28), forgedSig, 28, "signature")
		wantProof(t, proveDir(t, dir, 27), allGood, 0, "")
	})
	t.Run("group commit", func(t *testing.T) {
		t.Parallel()
		dir := groupStore(t)
		forge(t, dir, 35)
		for _, seq := range []uint64{6, 20, 35} {
			wantProof(t, proveDir(t, dir, seq), forgedSig, 35, "signature")
		}
		wantProof(t, proveDir(t, dir, 36), allGood, 0, "")
	})
}

// rewriteFrom changes action from's success flag and recomputes every hash
// after it, as an attacker without the key would, up to the head.
func rewriteFrom(t *testing.T, dir string, from, n uint64) {
	t.Helper()
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		var prev Hash
		if from > 1 {
			r, err := parseRecord(rawGet(t, txn, actionKey(from-1)))
			if err != nil {
				return err
			}
			prev = r.chainHash
		}
		for seq := from; seq <= n; seq++ {
			old := rawGet(t, txn, actionKey(seq))
			r, err := parseRecord(old)
			if err != nil {
				return err
			}
			a, err := DecodeCanonical(r.encoding)
			if err != nil {
				return err
			}
			if seq == from {
				a.Success = !a.Success
			}
			ah := ComputeActionHash(&a)
			prev = ChainLink(prev, ah, seq)
			rec := append([]byte{recordVersion}, ah[:]...)
			rec = append(rec, prev[:]...)
			rec = append(rec, old[65:73]...)
			if err := txn.Set(actionKey(seq), append(rec, AppendCanonical(nil, &a)...)); err != nil {
				return err
			}
		}
		return txn.Set([]byte(keyHead), encodeHead(Head{Seq: n, ChainHash: prev}))
	})
}

func TestVerifyActionNamesARewrittenChain(t *testing.T) {
	t.Parallel()
	rewritten := facts{true, true, true, true, false}
	t.Run("one action per commit", func(t *testing.T) {
		t.Parallel()
		dir := tamperStore(t, tamperN)
		rewriteFrom(t, dir, 20, tamperN)
		wantProof(t, proveDir(t, dir, 20), rewritten, 20, "checkpoint 20 signs")
		wantProof(t, proveDir(t, dir, 33), rewritten, 33, "checkpoint 33 signs")
		wantProof(t, proveDir(t, dir, 19), allGood, 0, "")
	})
	t.Run("group commit", func(t *testing.T) {
		t.Parallel()
		dir := groupStore(t)
		rewriteFrom(t, dir, 20, tamperN)
		// Actions of the commit before the change are not proved either:
		// the chain from them reaches a hash the key never signed.
		for _, seq := range []uint64{6, 19, 20, 35} {
			wantProof(t, proveDir(t, dir, seq), rewritten, seq, "changed after it was signed")
		}
		wantProof(t, proveDir(t, dir, 5), allGood, 0, "")
		wantProof(t, proveDir(t, dir, 36), rewritten, 36, "checkpoint 36 signs")
	})
}

func TestVerifyActionNamesMissingCheckpoints(t *testing.T) {
	t.Parallel()
	dir := groupStore(t)
	// The commit's checkpoint deleted: the next one covers the action and
	// still proves it, but the action names another.
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Delete(checkpointKey(35)) })
	p := proveDir(t, dir, 10)
	wantProof(t, p, facts{true, true, false, true, true}, 35, "covering it is 36")
	if p.CheckpointSeq != 36 || p.Links != 26 {
		t.Errorf("proof through the next checkpoint: %+v", p)
	}
	// The last one deleted: nothing covers the last action.
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Delete(checkpointKey(tamperN)) })
	p = proveDir(t, dir, tamperN)
	if p.OK() || p.CheckpointSeq != 0 || !strings.Contains(p.Problem(), "not covered") || !p.ActionHashOK || !p.LinkOK {
		t.Errorf("uncovered action: %+v", p)
	}
	// An unreadable checkpoint is named.
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(checkpointKey(38), []byte("garbage")) })
	wantProof(t, proveDir(t, dir, 38), facts{true, true, true, false, false}, 38, "cannot be read")
}

func TestVerifyActionBoundsTheWalk(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	importN(t, s, 0, 50) // one checkpoint, at 50
	ctx := context.Background()
	p, err := s.verifyAction(ctx, 1, 48)
	if err != nil {
		t.Fatal(err)
	}
	if !p.TooFar || p.ReachesCheckpoint || p.Links != 0 || !p.SignatureOK || !p.ActionHashOK ||
		!strings.Contains(p.Problem(), "49 actions after action 1") || !strings.Contains(p.Problem(), "whole store") {
		t.Errorf("walk past the bound: %+v", p)
	}
	if p, err := s.verifyAction(ctx, 2, 48); err != nil || !p.OK() || p.Links != 48 {
		t.Errorf("walk at the bound: %+v, %v", p, err)
	}
}
