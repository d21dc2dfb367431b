package ledger

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// makeFirstFormatStore writes a store as ralph wrote them before keys
// moved out: the key pair in <store>/keys/, checkpoints of the first
// format, no store id, verifier key or tree nodes.
func makeFirstFormatStore(t *testing.T, dir string, n int) ed25519.PrivateKey {
	t.Helper()
	priv := vectorKey()
	s, err := Open(Options{Dir: dir, PrivateKey: priv, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 0, n)
	err = s.db.Update(func(txn *badger.Txn) error {
		var del [][]byte
		for _, prefix := range []string{prefixMeta, prefixTree, prefixCheckpoint} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
			for it.Rewind(); it.Valid(); it.Next() {
				del = append(del, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
		for _, k := range del {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		var chain Hash
		for seq := uint64(1); seq <= uint64(n); seq++ {
			a, err := getSeq(txn, seq)
			if err != nil {
				return err
			}
			chain = a.ChainHash
			if a.CheckpointSeq == seq {
				cp := signCheckpoint(priv, seq, chain, time.Unix(1700000000, int64(seq)))
				if err := txn.Set(checkpointKey(seq), encodeCheckpoint(cp)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, keyDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(LegacyKeyPath(dir), encodePrivateKey(priv), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(PublicKeyPath(dir), encodePublicKey(priv.Public().(ed25519.PublicKey)), 0o644); err != nil {
		t.Fatal(err)
	}
	return priv
}

// TestFirstFormatStoreKeepsVerifyingAndMigrates: a store made before keys
// moved out verifies read-only as it is; its first write records its id
// and key and builds the tree; chain key --move moves the key out.
func TestFirstFormatStoreKeepsVerifyingAndMigrates(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "old")
	priv := makeFirstFormatStore(t, dir, 20)
	keyDir := filepath.Join(t.TempDir(), "keys")

	ro, err := Open(Options{Dir: dir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, ro)
	if rep.Actions != 20 || ro.VerifierKeyString() != "" || !rep.Root.IsZero() {
		t.Fatalf("first-format store read-only: %+v, key %q", rep, ro.VerifierKeyString())
	}
	if _, err := ro.LatestCheckpoint(); !errors.Is(err, ErrNoTreeCheckpoint) {
		t.Fatalf("latest checkpoint of a first-format store: %v", err)
	}
	ro.Close()

	s, err := Open(Options{Dir: dir, KeyDir: keyDir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyPath() != LegacyKeyPath(dir) || !s.PublicKey().Equal(priv.Public()) || s.ID() == "" {
		t.Fatalf("migrated store: key %s id %q", s.KeyPath(), s.ID())
	}
	appendN(t, s, 20, 7)
	hashes := storeActionHashes(t, s)
	if cp, err := s.LatestCheckpoint(); err != nil || cp.Seq != 27 || cp.Root != mth(hashes) {
		t.Fatalf("first tree checkpoint: %v", err)
	}
	mustVerify(t, s)
	id := s.ID()
	s.Close()

	dest := StoreKeyPath(keyDir, id)
	if err := MoveLegacyKey(dir, dest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(LegacyKeyPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the private key is still in the store: %v", err)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("moved key: %v", err)
	}
	s, err = Open(Options{Dir: dir, KeyDir: keyDir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.KeyPath() != dest {
		t.Fatalf("key read from %s after the move", s.KeyPath())
	}
	appendN(t, s, 27, 3)
	if rep := mustVerify(t, s); rep.Actions != 30 {
		t.Fatalf("after the move: %+v", rep)
	}
	if _, err := s.VerifyWith(context.Background(), VerifyOptions{Key: s.VerifierKeyString()}); err != nil {
		t.Fatalf("pinned: %v", err)
	}
}

// TestWriterRefusesAnotherKey: a store signed by one key is never signed
// by another, and a missing key is never silently replaced.
func TestWriterRefusesAnotherKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	keyDir := filepath.Join(t.TempDir(), "keys")
	s, err := Open(Options{Dir: dir, KeyDir: keyDir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 0, 2)
	vkey := s.VerifierKeyString()
	s.Close()
	other := filepath.Join(t.TempDir(), "other.ed25519")
	_, err = Open(Options{Dir: dir, KeyFile: other, MemTableSize: 8 << 20})
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Msg != "ledger store "+dir+" is signed by key "+vkey+", whose private key is not at "+other+"; pass it with --key FILE (or RALPH_KEY)" {
		t.Fatalf("open with a missing key file: %v", err)
	}
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a key was created for a store that has one")
	}
	if _, _, err := loadOrCreateKeyFile(other, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir, KeyFile: other, MemTableSize: 8 << 20})
	if !errors.As(err, &ke) || ke.Msg != "ledger store "+dir+" is signed by key "+vkey+", not by the private key "+other+"; pass the key that signs this store with --key FILE" {
		t.Fatalf("open with another key: %v", err)
	}
}

func encodePublicKey(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}
