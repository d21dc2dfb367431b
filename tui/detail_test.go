package tui

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/ralphloop/ralph/ledger"
)

// diskStore records acts in an on-disk store and closes it.
func diskStore(t *testing.T, acts []ledger.Action) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := ledger.Open(ledger.Options{Dir: dir, PrivateKey: fixtureKey})
	if err != nil {
		t.Fatal(err)
	}
	for i := range acts {
		a := acts[i]
		if _, err := st.Append(context.Background(), &a); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// flipByte changes one byte of the stored action at seq, behind the
// ledger's back (docs/ledger.md §2 and §4 give the layout): the one at
// pos, or if pos is negative, the first of the first occurrence of find.
func flipByte(t *testing.T, dir string, seq uint64, pos int, find string) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "data")).WithLogger(nil).WithMemTableSize(8 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := binary.BigEndian.AppendUint64([]byte("a/"), seq)
	err = db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if pos < 0 {
			if pos = bytes.Index(v, []byte(find)); pos < 0 {
				t.Fatalf("action %d does not hold %q", seq, find)
			}
		}
		v[pos] ^= 0x20
		return txn.Set(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openDetail opens dir for a model of the recorded run, and returns the model
// with the detail view of the action at seq open.
func openDetail(t *testing.T, dir string, seq uint64) *model {
	t.Helper()
	st, err := ledger.Open(ledger.Options{Dir: dir, PrivateKey: fixtureKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var stored []ledger.Action
	// Range stops at an action it cannot decode; the rows before it are
	// enough to select one.
	_ = st.Range(1, func(a ledger.Action) error { stored = append(stored, a); return nil })
	return showDetail(t, st, stored, seq)
}

// showDetail is a model of the finished run stored in st with the detail
// view of the action at seq open.
func showDetail(t *testing.T, st *ledger.Store, stored []ledger.Action, seq uint64) *model {
	t.Helper()
	m := testModel(t, st, true, 120, 60)
	feed(m, stored)
	m.Update(runDoneMsg{})
	selectSeq(t, m, seq)
	press(m, "enter")
	if m.modes.screen() != m.detail || m.detail.msg == nil {
		t.Fatalf("enter on #%d does not show its detail", seq)
	}
	return m
}

// The detail view proves the one action it shows and leaves the whole
// store to r.
func TestDetailProvesTheAction(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	seq := seqOf(t, stored, ledger.CapabilityCall, "ccos.echo", 3)
	m := showDetail(t, st, stored, seq)
	if m.verify != nil {
		t.Error("opening the detail view starts a whole-store verification")
	}
	p := m.detail.msg.proof
	if p == nil || !p.OK() || p.Seq != seq {
		t.Fatalf("detail proof: %+v (err %v)", p, m.detail.msg.proofErr)
	}
	v := m.View()
	for _, want := range []string{
		"✓ recomputed from the canonical encoding", "✓ links to seq 46", "✓ the action's checkpoint_seq names it",
		"✓ Ed25519 signature verified with this store's key", "✓ it signs this action's chain_hash",
		"not verified · r verifies the whole store",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("detail view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "✗") || strings.Contains(v, "problems") {
		t.Errorf("a good action shows a failure:\n%s", v)
	}
	press(m, "r")
	if m.verify == nil || m.verify.running || m.verify.err != nil {
		t.Fatalf("r: %+v", m.verify)
	}
	if v := m.View(); !strings.Contains(v, "✓ whole store verified: 61 actions, 61 checkpoints") {
		t.Errorf("after r:\n%s", v)
	}
}

// A changed byte shows as ✗ on the fact it breaks, with the proof's
// reason, even when the action can no longer be decoded.
func TestDetailShowsWhatFailed(t *testing.T) {
	t.Parallel()
	acts := scriptRun(3, true)
	const target = 47 // iteration 3's ccos.echo call, a visible row
	t.Run("content", func(t *testing.T) {
		dir := diskStore(t, acts)
		flipByte(t, dir, target, -1, "ccos.echo") // its function name: Ccos.echo
		m := openDetail(t, dir, target)
		v := m.View()
		for _, want := range []string{
			"✗ does not match the stored content", "✓ links to seq 46", "✓ Ed25519 signature verified",
			"problems", "✗ action 47 was altered",
		} {
			if !strings.Contains(v, want) {
				t.Errorf("detail of an altered action lacks %q:\n%s", want, v)
			}
		}
		press(m, "r")
		if v := m.View(); !strings.Contains(v, "✗ verification failed at seq 47") {
			t.Errorf("r on an altered store:\n%s", v)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		dir := diskStore(t, acts)
		flipByte(t, dir, target, 73, "") // the encoding's version byte
		m := openDetail(t, dir, target-1)
		// The row of the damaged action cannot be decoded, so it has no
		// row: open it as enter would, on the seq.
		m.detail.open(target, 0)
		runCmd(m, fetchDetail(m.ctx, m.store, m.storeDir, target, 0))
		v := m.View()
		for _, want := range []string{"✗ ledger verification failed at seq 47", "verification", "✗ does not match the stored content", "✗ action 47 was altered"} {
			if !strings.Contains(v, want) {
				t.Errorf("detail of an unreadable action lacks %q:\n%s", want, v)
			}
		}
	})
}
