package ledger

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// The store's identity, under m/:
//
//	m/id    the store id: 16 lower-case hex digits, chosen when the store is
//	        first written; the origin of its checkpoints is ralph/<id>
//	m/key   the signed-note verifier key of the key that signs it
//	m/tree  be64: how many leaves the stored tree nodes cover (the head)
type storeMeta struct {
	id       string
	vkey     string
	treeSize uint64
}

func (s *Store) readMeta() (storeMeta, error) {
	var m storeMeta
	err := s.db.View(func(txn *badger.Txn) error {
		get := func(k string) ([]byte, error) {
			item, err := txn.Get([]byte(k))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return item.ValueCopy(nil)
		}
		id, err := get(keyStoreID)
		if err != nil {
			return err
		}
		vk, err := get(keyVerifier)
		if err != nil {
			return err
		}
		ts, err := get(keyTreeSize)
		if err != nil {
			return err
		}
		m.id, m.vkey = string(id), string(vk)
		if len(ts) == 8 {
			m.treeSize = binary.BigEndian.Uint64(ts)
		}
		return nil
	})
	if err == nil && m.id != "" && !validStoreID(m.id) {
		err = fmt.Errorf("the recorded store id %q is malformed", m.id)
	}
	return m, err
}

// writeMeta records the store id and verifier key.
func (s *Store) writeMeta() error {
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte(keyStoreID), []byte(s.id)); err != nil {
			return err
		}
		return txn.Set([]byte(keyVerifier), []byte(s.vkey))
	})
	if err != nil {
		return fmt.Errorf("record the key of ledger store %s: %w", s.describe(), err)
	}
	return nil
}

func newStoreID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate store id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func validStoreID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// checkStoreDir checks, without changing anything, that dir holds a ralph
// ledger (for a read-only open).
func checkStoreDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &NotStoreError{fmt.Sprintf("no ledger store at %s; pass --store DIR", dir)}
	case err != nil:
		return fmt.Errorf("open ledger store %s: %w", dir, err)
	case !fi.IsDir():
		return &NotStoreError{fmt.Sprintf("ledger store %s is a file, not a directory; pass a directory to --store", dir)}
	}
	marker, err := os.ReadFile(filepath.Join(dir, markerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &NotStoreError{fmt.Sprintf("%s is not a ralph ledger store (it has no %s file); pass a store directory", dir, markerFile)}
	}
	if err != nil {
		return fmt.Errorf("open ledger store %s: %w", dir, err)
	}
	if string(marker) != markerText {
		return &NotStoreError{fmt.Sprintf("ledger store %s has format %q, which this build does not read", dir, strings.TrimSpace(string(marker)))}
	}
	return nil
}
