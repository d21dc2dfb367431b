package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestVerifySplitScanAgrees damages stores around the places where the
// action scan splits into ranges (at 13 and 26 for three ranges of 40
// actions, at 20 for two, every 5 or 6 for seven) and checks that every
// split finds exactly the problems a single range finds.
func TestVerifySplitScanAgrees(t *testing.T) {
	t.Parallel()
	del := func(seqs ...uint64) func(t *testing.T, txn *badger.Txn) error {
		return func(t *testing.T, txn *badger.Txn) error {
			for _, seq := range seqs {
				if err := txn.Delete(actionKey(seq)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	swap := func(a, b uint64) func(t *testing.T, txn *badger.Txn) error {
		return func(t *testing.T, txn *badger.Txn) error {
			va, vb := rawGet(t, txn, actionKey(a)), rawGet(t, txn, actionKey(b))
			if err := txn.Set(actionKey(a), vb); err != nil {
				return err
			}
			return txn.Set(actionKey(b), va)
		}
	}
	flip := func(seq uint64, at int) func(t *testing.T, txn *badger.Txn) error {
		return func(t *testing.T, txn *badger.Txn) error {
			v := rawGet(t, txn, actionKey(seq))
			v[at] ^= 0x01
			return txn.Set(actionKey(seq), v)
		}
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, txn *badger.Txn) error
	}{
		{"intact", func(*testing.T, *badger.Txn) error { return nil }},
		{"first of a range deleted", del(13)},
		{"last of a range deleted", del(12)},
		{"middle boundary deleted", del(20)},
		{"a whole range deleted", del(13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25)},
		{"first action deleted", del(1)},
		{"last action deleted", del(tamperN)},
		{"swapped across a boundary", swap(12, 13)},
		{"swapped across the middle", swap(19, 21)},
		{"first of a range altered", flip(13, recordHeaderLen+20)},
		{"last of a range's chain hash altered", flip(25, 40)},
		{"first of a range truncated", func(t *testing.T, txn *badger.Txn) error {
			return txn.Set(actionKey(26), rawGet(t, txn, actionKey(26))[:10])
		}},
		{"stray key", func(t *testing.T, txn *badger.Txn) error {
			return txn.Set([]byte(prefixAction+"x"), []byte("junk"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tamperStore(t, tamperN)
			rawUpdate(t, dir, func(txn *badger.Txn) error { return tc.fn(t, txn) })
			s := openDir(t, dir, false)
			defer s.Close()
			want := verifyProblems(t, s, 1)
			if tc.name == "intact" && len(want) != 0 {
				t.Fatalf("intact store: %v", want)
			}
			if tc.name != "intact" && len(want) == 0 {
				t.Fatal("damage not found")
			}
			for _, parts := range []int{2, 3, 7, 40} {
				if got := verifyProblems(t, s, parts); !slices.Equal(got, want) {
					t.Errorf("%d ranges find\n%v\none range finds\n%v", parts, got, want)
				}
			}
		})
	}
}

// verifyProblems verifies s with the action scan split into parts ranges
// and returns the problems found, in a stable order.
func verifyProblems(t *testing.T, s *Store, parts int) []string {
	t.Helper()
	var calls, last uint64
	rep, err := s.verify(context.Background(), VerifyOptions{Progress: func(done, total uint64) {
		calls++
		if done < last || done > total {
			t.Errorf("progress %d/%d after %d", done, total, last)
		}
		last = done
	}}, parts, 1)
	var ie *IntegrityError
	if err != nil && !errors.As(err, &ie) {
		t.Fatal(err)
	}
	if last != rep.Actions || calls == 0 {
		t.Errorf("%d ranges: last progress %d after %d calls, %d actions", parts, last, calls, rep.Actions)
	}
	ps := slices.Clone(rep.Problems)
	slices.SortFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.rank, b.rank), cmp.Compare(a.Reason, b.Reason))
	})
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("%d: %s", p.Seq, p.Reason)
	}
	return out
}

// TestVerifyTreeFollowsScan checks the tree rebuild, which follows the
// ranges as they store leaf hashes (every 1024 actions), against a single
// range on a store large enough for ranges to report progress mid-way,
// with an action missing after such a report.
func TestVerifyTreeFollowsScan(t *testing.T) {
	t.Parallel()
	dir := tamperStore(t, 2600)
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		for _, seq := range []uint64{2500} {
			if err := txn.Delete(actionKey(seq)); err != nil {
				return err
			}
		}
		return nil
	})
	s := openDir(t, dir, false)
	defer s.Close()
	want := verifyProblems(t, s, 1)
	if !slices.ContainsFunc(want, func(p string) bool { return strings.Contains(p, "signs Merkle root") }) {
		t.Fatalf("no Merkle root mismatch found: %v", want)
	}
	for _, parts := range []int{2, 3} {
		if got := verifyProblems(t, s, parts); !slices.Equal(got, want) {
			t.Errorf("%d ranges find\n%v\none range finds\n%v", parts, got, want)
		}
	}
}
