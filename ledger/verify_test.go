package ledger

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// tamperStore makes a closed on-disk store of n actions, one commit each.
func tamperStore(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s := openDir(t, dir, false)
	appendN(t, s, 0, n)
	mustVerify(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// verifyDir opens dir and returns Verify's integrity error.
func verifyDir(t *testing.T, dir string) *IntegrityError {
	t.Helper()
	s := openDir(t, dir, false)
	defer s.Close()
	rep, err := s.Verify(context.Background(), nil)
	var ie *IntegrityError
	if !errors.As(err, &ie) {
		t.Fatalf("verify after tampering = %v (report %+v)", err, rep)
	}
	if rep.OK() || rep.Problems[0].Seq != ie.Seq {
		t.Fatalf("report %+v disagrees with error %v", rep, ie)
	}
	t.Logf("%v", ie)
	return ie
}

func rawGet(t *testing.T, txn *badger.Txn, key []byte) []byte {
	t.Helper()
	item, err := txn.Get(key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tamperN is how many actions the tampering tests record, one commit each.
const tamperN = 40

func TestVerifyNamesAChangedByte(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, tamperN)
	const target = 17
	var orig []byte
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		orig = rawGet(t, txn, actionKey(target))
		return nil
	})
	// Every region of the record: version, action_hash, chain_hash,
	// checkpoint_seq, and the encoding from its version byte to its end.
	positions := []int{0, 1, 40, 70, recordHeaderLen, recordHeaderLen + 5, recordHeaderLen + 30, len(orig) / 2, len(orig) - 30, len(orig) - 1}
	for _, pos := range positions {
		t.Run(fmt.Sprintf("byte %d", pos), func(t *testing.T) {
			bad := append([]byte(nil), orig...)
			bad[pos] ^= 0x20
			rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(actionKey(target), bad) })
			if ie := verifyDir(t, dir); ie.Seq != target {
				t.Errorf("byte %d: verify names seq %d (%s), want %d", pos, ie.Seq, ie.Reason, target)
			}
			rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(actionKey(target), orig) })
		})
	}
	s := openDir(t, dir, false)
	defer s.Close()
	mustVerify(t, s)
}

func TestVerifyNamesADeletedAction(t *testing.T) {
	t.Parallel()
	for _, target := range []uint64{1, 23, tamperN} {
		dir := tamperStore(t, tamperN)
		rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Delete(actionKey(target)) })
		if ie := verifyDir(t, dir); ie.Seq != target || !strings.Contains(ie.Reason, "missing") {
			t.Errorf("deleted %d: verify says %v", target, ie)
		}
	}
}

func TestVerifyNamesSwappedActions(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, tamperN)
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		a, b := rawGet(t, txn, actionKey(9)), rawGet(t, txn, actionKey(31))
		if err := txn.Set(actionKey(9), b); err != nil {
			return err
		}
		return txn.Set(actionKey(31), a)
	})
	if ie := verifyDir(t, dir); ie.Seq != 9 || !strings.Contains(ie.Reason, "swapped") {
		t.Errorf("swap: verify says %v", ie)
	}
}

func TestVerifyNamesAForgedCheckpoint(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, tamperN)
	_, other, _ := ed25519.GenerateKey(nil)
	const target = 28
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		cp, err := decodeCheckpoint(rawGet(t, txn, checkpointKey(target)))
		if err != nil {
			return err
		}
		forged := signCheckpoint(other, cp.Seq, cp.ChainHash, cp.Time)
		return txn.Set(checkpointKey(target), encodeCheckpoint(forged))
	})
	if ie := verifyDir(t, dir); ie.Seq != target || !strings.Contains(ie.Reason, "signature") {
		t.Errorf("forged checkpoint: verify says %v", ie)
	}
}

func TestVerifyNamesIndexDrift(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, tamperN)
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Delete(indexKey(IndexPlanID, sample(11).PlanID, 12)) })
	if ie := verifyDir(t, dir); ie.Seq != 12 || !strings.Contains(ie.Reason, "index") {
		t.Errorf("removed index entry: verify says %v", ie)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		if err := txn.Set(indexKey(IndexPlanID, sample(11).PlanID, 12), nil); err != nil {
			return err
		}
		return txn.Set(indexKey(IndexRunID, "run-evil", 5), nil)
	})
	if ie := verifyDir(t, dir); ie.Seq != 5 || !strings.Contains(ie.Reason, "index") {
		t.Errorf("added index entry: verify says %v", ie)
	}
}

// An attacker who recomputes every hash after a change still cannot sign:
// the checkpoints give it away at the changed action's commit.
func TestVerifyNamesARewrittenChain(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, tamperN)
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		var prev Hash
		for seq := uint64(1); seq <= tamperN; seq++ {
			r, err := parseRecord(rawGet(t, txn, actionKey(seq)))
			if err != nil {
				return err
			}
			a, err := DecodeCanonical(r.encoding)
			if err != nil {
				return err
			}
			if seq == 20 {
				a.Success = false
			}
			enc := AppendCanonical(nil, &a)
			ah := ComputeActionHash(&a)
			prev = ChainLink(prev, ah, seq)
			rec := append([]byte{recordVersion}, ah[:]...)
			rec = append(rec, prev[:]...)
			rec = append(rec, rawGet(t, txn, actionKey(seq))[65:73]...)
			if err := txn.Set(actionKey(seq), append(rec, enc...)); err != nil {
				return err
			}
		}
		return txn.Set([]byte(keyHead), encodeHead(Head{Seq: tamperN, ChainHash: prev}))
	})
	if ie := verifyDir(t, dir); ie.Seq != 20 || !strings.Contains(ie.Reason, "checkpoint") {
		t.Errorf("rewritten tail: verify says %v", ie)
	}
}

func TestVerifyReportsProgressAndCounts(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	// The actions go to the writer in one request, as Import hands them
	// over, without the JSON decoding that is not under test here.
	req := &request{done: make(chan struct{})}
	for i := range 10000 {
		p, err := s.prepare(sample(i))
		if err != nil {
			t.Fatal(err)
		}
		req.items = append(req.items, p)
	}
	if err := s.submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	var calls, last uint64
	rep, err := s.Verify(ctx, func(done, total uint64) {
		calls++
		if done < last || done > total {
			t.Errorf("progress %d/%d after %d", done, total, last)
		}
		last = done
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Actions != 10000 || last != 10000 || calls < 2 || rep.Head.Seq != 10000 {
		t.Fatalf("report %+v, progress calls %d, last %d", rep, calls, last)
	}
	if rep.IndexEntries != 10000*5-2500 { // every fourth action has no parent
		t.Fatalf("index entries %d", rep.IndexEntries)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Verify(cctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("verify with a cancelled context = %v", err)
	}
	empty := newMemStore(t)
	if rep := mustVerify(t, empty); rep.Actions != 0 {
		t.Fatalf("empty store report %+v", rep)
	}
}
