package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
)

// mth is RFC 6962 §2.1's Merkle Tree Hash, written from the RFC as a
// reference independent of the library the store uses.
func mth(leaves []Hash) Hash {
	switch len(leaves) {
	case 0:
		return Hash(sha256.Sum256(nil))
	case 1:
		return Hash(sha256.Sum256(append([]byte{0}, leaves[0][:]...)))
	}
	k := 1 << (bits.Len(uint(len(leaves)-1)) - 1) // largest power of two < n
	l, r := mth(leaves[:k]), mth(leaves[k:])
	return Hash(sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...)))
}

func storeActionHashes(t *testing.T, s *Store) []Hash {
	t.Helper()
	var out []Hash
	if err := s.Range(1, func(a Action) error {
		out = append(out, a.ActionHash)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTreeProofsMatchRFC6962 commits actions in groups of varied sizes and
// checks every checkpoint's root against the reference, every inclusion
// proof, and consistency proofs between many pairs of sizes.
func TestTreeProofsMatchRFC6962(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	i := 0
	for _, group := range []int{1, 1, 3, 16, 5, 64, 2, 40, 100, 1, 17} {
		var lines strings.Builder
		for range group {
			a := sample(i)
			a.ParentActionID = ""
			lines.Write(AppendJSON(nil, a))
			lines.WriteByte('\n')
			i++
		}
		if _, err := s.Import(ctx, strings.NewReader(lines.String())); err != nil {
			t.Fatal(err)
		}
	}
	hashes := storeActionHashes(t, s)
	n := uint64(len(hashes))
	cp, err := s.LatestCheckpoint()
	if err != nil || cp.Seq != n {
		t.Fatalf("latest checkpoint %d, %v", cp.Seq, err)
	}
	if want := mth(hashes); cp.Root != want {
		t.Fatalf("root %s, reference %s", cp.Root, want)
	}
	for seq := uint64(1); seq <= n; seq++ {
		p, err := s.ProveInclusion(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(); err != nil {
			t.Fatalf("inclusion of %d: %v", seq, err)
		}
		p.ActionHash[0] ^= 1
		if p.Verify() == nil {
			t.Fatalf("inclusion of %d verifies for another action hash", seq)
		}
	}
	for _, size1 := range []uint64{1, 2, 3, 5, 16, 17, 64, 100, 127, 128, n - 1, n} {
		hs, err := s.ProveConsistency(ctx, size1, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyConsistency(size1, n, hs, mth(hashes[:size1]), mth(hashes)); err != nil {
			t.Fatalf("consistency %d → %d: %v", size1, n, err)
		}
		wrong := mth(hashes[:size1])
		wrong[3] ^= 1
		if size1 > 0 && VerifyConsistency(size1, n, hs, wrong, mth(hashes)) == nil {
			t.Fatalf("consistency %d → %d verifies for another old root", size1, n)
		}
	}
	if _, err := s.ProveInclusion(ctx, n+1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("proof beyond the tree: %v", err)
	}
	rep := mustVerify(t, s)
	if rep.Root != mth(hashes) {
		t.Fatalf("verify's root %s", rep.Root)
	}
}

// TestTreeSurvivesReopen: the writer reloads its compact range from the
// stored nodes and goes on.
func TestTreeSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s := openDir(t, dir, false)
	appendN(t, s, 0, 37)
	s.Close()
	s = openDir(t, dir, false)
	defer s.Close()
	appendN(t, s, 37, 29)
	hashes := storeActionHashes(t, s)
	cp, err := s.LatestCheckpoint()
	if err != nil || cp.Root != mth(hashes) {
		t.Fatalf("root after reopen: %v", err)
	}
	mustVerify(t, s)
}

// truncate cuts the store back to its first keep actions as someone with
// write access to it could: actions, their indexes and tree nodes, the
// checkpoints beyond, and a head and tree size to match.
func truncate(t *testing.T, s *Store, keep uint64) {
	t.Helper()
	all := storeActionHashes(t, s)
	err := s.db.Update(func(txn *badger.Txn) error {
		var del [][]byte
		for _, prefix := range []string{prefixAction, prefixCheckpoint, prefixIndex} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().KeyCopy(nil)
				if len(k) >= 8 && seqOf(k) > keep {
					del = append(del, k)
				}
			}
			it.Close()
		}
		for _, k := range del {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		var chain Hash
		for i, ah := range all[:keep] {
			chain = ChainLink(chain, ah, uint64(i+1))
		}
		return txn.Set([]byte(keyHead), encodeHead(Head{Seq: keep, ChainHash: chain}))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerifyNamesTruncation: a store cut back to one of its checkpoints
// verifies on its own; against a checkpoint saved before, the truncation
// is named with both sizes.
func TestVerifyNamesTruncation(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	appendN(t, s, 0, 30)
	saved, err := s.LatestCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	truncate(t, s, 21)
	if rep, err := s.Verify(context.Background(), nil); err != nil || rep.Actions != 21 {
		t.Fatalf("the truncated store on its own: %v", err)
	}
	_, err = s.VerifyWith(context.Background(), VerifyOptions{Since: []SavedCheckpoint{{Name: "saved.txt", Note: saved.Note}}})
	want := fmt.Sprintf("ledger verification failed at seq 22: the store holds 21 actions but checkpoint saved.txt witnessed 30 (signed %s): the store was truncated or rolled back to an older copy",
		saved.Time.Format("2006-01-02T15:04:05Z07:00"))
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// TestVerifyNamesARewriteBelowTheWitness: the same number of actions but
// another history (the chain rewritten and re-signed with the store's own
// key) fails the consistency proof.
func TestVerifyNamesARewriteBelowTheWitness(t *testing.T) {
	t.Parallel()
	priv := vectorKey()
	a, err := Open(Options{InMemory: true, PrivateKey: priv, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendN(t, a, 0, 10)
	saved, _ := a.LatestCheckpoint()
	b, err := Open(Options{InMemory: true, PrivateKey: priv, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.id = a.id // the rewritten store claims the same log
	b.signer, _ = newNoteSigner(Origin(a.id), priv)
	b.vkey = a.vkey
	appendN(t, b, 1, 12)
	_, err = b.VerifyWith(context.Background(), VerifyOptions{Since: []SavedCheckpoint{{Name: "saved.txt", Note: saved.Note}}})
	if err == nil || !strings.Contains(err.Error(), "ledger verification failed at seq 10: the store is not consistent with checkpoint saved.txt (10 actions, signed ") ||
		!strings.Contains(err.Error(), "the actions it witnessed were rewritten") {
		t.Fatalf("got %v", err)
	}
}

// treeVectors are the actions of the tree golden vectors: the three of
// vectors.golden and four more, seven leaves in all.
func treeVectors() []*Action {
	acts := vectorActions()
	for seq := uint64(4); seq <= 7; seq++ {
		acts = append(acts, &Action{Seq: seq, ActionID: fmt.Sprintf("leaf-%d", seq), Type: IterationStarted, Timestamp: time.Unix(int64(seq), 0).UTC()})
	}
	return acts
}

const vectorStoreID = "0123456789abcdef"

func renderTreeVectors(t *testing.T) (string, string) {
	key := vectorKey()
	origin := Origin(vectorStoreID)
	vkey, err := VerifierKey(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := newNoteSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	var b, bundle strings.Builder
	b.WriteString("# Golden vectors for the ralph ledger's Merkle tree, checkpoints and bundle (docs/ledger.md).\n")
	b.WriteString("# Regenerate only on purpose: go test ./ledger -run TestTreeGoldenVectors -update\n")
	fmt.Fprintf(&b, "\nverifier_key %s\n", vkey)
	fmt.Fprintf(&bundle, "%s\nkey %s\n", bundleMagic, vkey)
	var hashes []Hash
	var chain Hash
	var cps []Checkpoint
	for _, a := range treeVectors() {
		enc := AppendCanonical(nil, a)
		ah := Hash(sha256.Sum256(enc))
		chain = ChainLink(chain, ah, a.Seq)
		hashes = append(hashes, ah)
		lh := LeafHash(ah)
		fmt.Fprintf(&b, "\nleaf %d action_hash %s leaf_hash %s\n", a.Seq-1, ah, lh)
		fmt.Fprintf(&b, "root %d %s\n", a.Seq, mth(hashes))
		fmt.Fprintf(&bundle, "a %s\n", base64.StdEncoding.EncodeToString(enc))
		if a.Seq == 3 || a.Seq == 7 {
			cp, err := signTreeCheckpoint(signer, a.Seq, mth(hashes), chain, time.Date(2025, 7, 20, 12, 0, int(a.Seq), 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			cps = append(cps, cp)
			fmt.Fprintf(&bundle, "c %s\n", base64.StdEncoding.EncodeToString(cp.Note))
		}
	}
	for _, cp := range cps {
		fmt.Fprintf(&b, "\ncheckpoint %d (stored as 02 ‖ this note):\n%s", cp.Seq, cp.Note)
	}
	s := newMemStore(t)
	defer s.Close()
	fmt.Fprintf(&bundle, "end 7 %s %s\n", chain, mth(hashes))
	// The proofs, from a store holding the same leaves.
	rep, _, err := s.ImportBundle(context.Background(), strings.NewReader(bundle.String()), []string{vkey})
	if err != nil || rep.Actions != 7 {
		t.Fatalf("import the vector bundle: %v", err)
	}
	err = s.view(func(txn *badger.Txn) error {
		r := newTreeReader(context.Background(), txn)
		defer r.close()
		incl, err := r.inclusion(2, 7)
		if err != nil {
			return err
		}
		b.WriteString("\ninclusion leaf 2 size 7\n")
		for _, h := range incl {
			fmt.Fprintf(&b, "  %s\n", hex.EncodeToString(h))
		}
		cons, err := r.consistency(3, 7)
		if err != nil {
			return err
		}
		b.WriteString("\nconsistency 3 7\n")
		for _, h := range cons {
			fmt.Fprintf(&b, "  %s\n", hex.EncodeToString(h))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), bundle.String()
}

func TestTreeGoldenVectors(t *testing.T) {
	got, bundle := renderTreeVectors(t)
	for name, content := range map[string]string{"tree.golden": got, "vectors.bundle": bundle} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if diff := cmp.Diff(string(want), content); diff != "" {
			t.Errorf("%s changed; that breaks every existing checkpoint and proof. (-golden +now):\n%s", name, diff)
		}
	}
	if _, err := ReadBundle(context.Background(), strings.NewReader(bundle), nil, nil); err != nil {
		t.Fatalf("the vector bundle does not verify: %v", err)
	}
	if !bytes.Contains([]byte(got), []byte("\ncheckpoint 7 (stored as 02 ‖ this note):\nralph/0123456789abcdef\n7\n")) {
		t.Fatal("the golden checkpoint is not a C2SP checkpoint of 7 leaves")
	}
}
