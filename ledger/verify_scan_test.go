package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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
// ranges as they complete, against a single range on a store large enough
// for ranges to report progress mid-way, with an action missing after such
// a report.
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
	for _, parts := range []int{2, 3, 16} {
		if got := verifyProblems(t, s, parts); !slices.Equal(got, want) {
			t.Errorf("%d ranges find\n%v\none range finds\n%v", parts, got, want)
		}
	}
}

// TestTreeFollowerAnyOrder completes the action ranges in shuffled orders,
// from concurrent goroutines, with one leaf damaged, and checks that the
// tree follower reports the same root mismatches and final root as when
// the ranges complete in seq order.
func TestTreeFollowerAnyOrder(t *testing.T) {
	t.Parallel()
	s := openDir(t, tamperStore(t, 300), false)
	defer s.Close()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	v := &verifier{txn: txn, pub: s, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, scanParts: 9, minRange: 1}
	if err := v.trust(""); err != nil {
		t.Fatal(err)
	}
	head, _, err := v.readHead()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.readCheckpoints(); err != nil || !v.hasNotes {
		t.Fatalf("checkpoints: %v, notes %v", err, v.hasNotes)
	}
	v.leaves = make([]Hash, head)
	ranges := v.splitActions(head)
	for i := range ranges {
		if err := v.scanRange(context.Background(), &ranges[i], &progressCounter{}); err != nil {
			t.Fatal(err)
		}
	}
	all := slices.Clone(v.leaves)
	all[150] = Hash{} // action 151 altered: every root from 151 on differs
	follow := func(order []int) ([]string, Hash) {
		v.problems, v.report.Root = nil, Hash{}
		clear(v.leaves)
		f := newTreeFollower(v, ranges)
		var wg sync.WaitGroup
		for _, i := range order {
			wg.Go(func() {
				// As scanRange does: store the range's leaves (seqs from
				// its from up to the next range's), then finish.
				lo, hi := max(ranges[i].from, 1)-1, uint64(len(all))
				if i+1 < len(ranges) {
					hi = ranges[i+1].from - 1
				}
				copy(v.leaves[lo:hi], all[lo:hi])
				f.finish(i)
			})
		}
		wg.Wait()
		out := make([]string, len(v.problems))
		for i, p := range v.problems {
			out[i] = fmt.Sprintf("%d: %s", p.Seq, p.Reason)
		}
		slices.Sort(out)
		return out, v.report.Root
	}
	inOrder := make([]int, len(ranges))
	for i := range inOrder {
		inOrder[i] = i
	}
	want, wantRoot := follow(inOrder)
	if len(want) != 300-150 || !strings.Contains(want[0], "signs Merkle root") {
		t.Fatalf("in seq order: %d problems %q", len(want), want[:min(len(want), 3)])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		order := slices.Clone(inOrder)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		if got, root := follow(order); !slices.Equal(got, want) || root != wantRoot {
			t.Fatalf("order %v: %d problems, root %s; in seq order %d, %s", order, len(got), root, len(want), wantRoot)
		}
	}
}

// TestScanOrderTakesEveryPartOnce checks that the scan's task list holds
// every index part and every action range once, the ranges in seq order,
// and that the index parts cover the index keys without overlap.
func TestScanOrderTakesEveryPartOnce(t *testing.T) {
	t.Parallel()
	for _, n := range [][2]int{{5, 1}, {5, 2}, {5, 16}, {1, 3}, {2, 40}} {
		tasks := scanOrder(n[0], n[1])
		seenIndex := make([]int, n[0])
		next := 0
		for _, tk := range tasks {
			switch {
			case tk.index >= 0 && tk.action < 0:
				seenIndex[tk.index]++
			case tk.action == next && tk.index < 0:
				next++
			default:
				t.Fatalf("%v: task %+v out of place in %+v", n, tk, tasks)
			}
		}
		if next != n[1] || slices.ContainsFunc(seenIndex, func(c int) bool { return c != 1 }) || len(tasks) != n[0]+n[1] {
			t.Fatalf("%v: %+v", n, tasks)
		}
	}
	parts := indexParts()
	if parts[0].from != prefixIndex || parts[len(parts)-1].to != "" {
		t.Fatalf("index parts %+v do not span i/", parts)
	}
	for i := 1; i < len(parts); i++ {
		if parts[i].from != parts[i-1].to || parts[i].from <= parts[i-1].from {
			t.Fatalf("index parts %+v do not follow each other", parts)
		}
	}
	for _, f := range indexFields {
		k := string(indexKey(f, "v", 1))
		in := 0
		for _, p := range parts {
			if k >= p.from && (p.to == "" || k < p.to) {
				in++
			}
		}
		if in != 1 {
			t.Errorf("index key %q is in %d parts", k, in)
		}
	}
}
