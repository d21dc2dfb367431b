package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// An import into a store is all or nothing, even if the process is killed:
// before its first action is written, the head it starts from is recorded
// under keyImportMark (layout.go; durably, like every write to a store opened with
// SyncWrites); the actions are then committed in chunks as they stream in,
// and the mark is deleted once the last chunk is committed. A mark found at
// Open is an import that did not finish: a writer rolls the store back to
// the marked head before anything else reads it, and a read-only open
// refuses the store until then.
// rollbackChunk is how many actions (with their index entries) one
// rollback transaction deletes.
const rollbackChunk = 1024

// importMark returns the head an unfinished import started from.
func importMark(txn *badger.Txn) (Head, bool, error) {
	item, err := txn.Get([]byte(keyImportMark))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, err
	}
	var h Head
	err = item.Value(func(v []byte) error {
		h, err = decodeHead(v)
		return err
	})
	if err != nil {
		return Head{}, false, fmt.Errorf("the mark of an unfinished import is malformed: %w", err)
	}
	return h, true, nil
}

// beginImport records the current head as the point an import rolls back
// to. No witness is written while the mark stands.
func (s *Store) beginImport() error {
	h := s.Head()
	s.importing.Store(true)
	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(keyImportMark), encodeHead(h))
	})
	if err != nil {
		s.importing.Store(false)
		return fmt.Errorf("import: record the head before importing in ledger store %s: %w", s.describe(), err)
	}
	return nil
}

// endImport deletes the mark: the import is complete.
func (s *Store) endImport() error {
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(keyImportMark)) })
	if err != nil {
		return fmt.Errorf("import: commit the import to ledger store %s: %w", s.describe(), err)
	}
	s.importing.Store(false)
	return nil
}

// abandonImport refuses further appends after an import failed part way:
// its committed chunks are rolled back the next time the store is opened.
func (s *Store) abandonImport() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.damaged == nil {
		s.damaged = fmt.Errorf("ledger store %s holds a failed import; close and reopen it to roll the import back", s.describe())
	}
}

// RolledBackImport returns how many actions of an interrupted import Open
// removed (0 when there was none).
func (s *Store) RolledBackImport() uint64 { return s.rolledBack }

// ImportInterruptedError is returned by a read-only Open of a store that
// holds an import that did not finish.
type ImportInterruptedError struct{ Msg string }

func (e *ImportInterruptedError) Error() string { return e.Msg }

// checkImportMark refuses a read-only open of a store with an unfinished
// import: its partial actions must never be read as real.
func (s *Store) checkImportMark() error {
	var mark Head
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		mark, found, err = importMark(txn)
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger store %s: %w", s.describe(), err)
	}
	if found {
		return &ImportInterruptedError{Msg: fmt.Sprintf("ledger store %s holds an import that did not finish (after seq %d); open it for writing to roll it back, e.g. ralph chain import --store %s < /dev/null", s.describe(), mark.Seq, s.dir)}
	}
	return nil
}

// rollbackImport removes what an unfinished import left: actions above the
// marked head with their index entries, then checkpoints and tree nodes
// above it, then restores the head and deletes the mark. Each step is a
// transaction that can be killed and run again: until the mark is gone,
// the next Open starts over from what is left.
func (s *Store) rollbackImport() (uint64, error) {
	var mark Head
	var found bool
	var top uint64
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		if mark, found, err = importMark(txn); err != nil || !found {
			return err
		}
		top, err = lastActionSeq(txn)
		return err
	})
	if err != nil || !found {
		return 0, err
	}
	var removed uint64
	if top > mark.Seq {
		removed = top - mark.Seq
	}
	for {
		n, err := s.deleteActionsAbove(mark.Seq)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
	}
	if err := s.deleteKeysWhere(prefixCheckpoint, func(k []byte) bool {
		seq, ok := parseCheckpointKey(k)
		return ok && seq > mark.Seq
	}); err != nil {
		return 0, err
	}
	if err := s.deleteKeysWhere(prefixTree, func(k []byte) bool {
		level, index, ok := parseTreeKey(k)
		if !ok {
			return false
		}
		return level >= 64 || (index+1)<<level > mark.Seq
	}); err != nil {
		return 0, err
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		if mark.Seq == 0 {
			if err := txn.Delete([]byte(keyHead)); err != nil {
				return err
			}
			if err := txn.Delete([]byte(keyTreeSize)); err != nil {
				return err
			}
		} else {
			if err := txn.Set([]byte(keyHead), encodeHead(mark)); err != nil {
				return err
			}
			if err := txn.Set([]byte(keyTreeSize), binary.BigEndian.AppendUint64(nil, mark.Seq)); err != nil {
				return err
			}
		}
		return txn.Delete([]byte(keyImportMark))
	})
	if err != nil {
		return 0, fmt.Errorf("roll back an interrupted import in ledger store %s: %w", s.describe(), err)
	}
	return removed, nil
}

// lastActionSeq returns the highest stored action seq (0 for none).
func lastActionSeq(txn *badger.Txn) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(prefixAction)})
	defer it.Close()
	it.Seek(actionKey(^uint64(0)))
	if !it.Valid() {
		return 0, nil
	}
	k := it.Item().Key()
	seq, ok := parseActionKey(k)
	if !ok {
		return 0, fmt.Errorf("stored action key %q is malformed", k)
	}
	return seq, nil
}

// deleteActionsAbove deletes up to rollbackChunk of the highest actions
// above seq, each with its index entries, in one transaction, and returns
// how many it deleted.
func (s *Store) deleteActionsAbove(seq uint64) (int, error) {
	n := 0
	err := s.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(prefixAction), PrefetchValues: true})
		defer it.Close()
		var dels [][]byte
		for it.Seek(actionKey(^uint64(0))); it.Valid() && n < rollbackChunk; it.Next() {
			item := it.Item()
			k := item.KeyCopy(nil)
			aseq, ok := parseActionKey(k)
			if !ok {
				return fmt.Errorf("stored action key %q is malformed", k)
			}
			if aseq <= seq {
				break
			}
			// An action that does not decode has no index entries to find;
			// verify reports any entry left pointing at a missing action.
			if err := item.Value(func(v []byte) error {
				a, err := decodeRecord(v)
				if err == nil {
					dels = appendIndexKeys(dels, &a, aseq)
				}
				return nil
			}); err != nil {
				return err
			}
			dels = append(dels, k)
			n++
		}
		it.Close()
		for _, k := range dels {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("roll back an interrupted import in ledger store %s: %w", s.describe(), err)
	}
	return n, nil
}

// deleteKeysWhere deletes every key under prefix that drop selects, in
// transactions of a bounded size.
func (s *Store) deleteKeysWhere(prefix string, drop func(k []byte) bool) error {
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); drop(k) {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
		}
		return nil
	})
	for err == nil && len(keys) > 0 {
		part := keys[:min(len(keys), rollbackChunk)]
		keys = keys[len(part):]
		err = s.db.Update(func(txn *badger.Txn) error {
			for _, k := range part {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("roll back an interrupted import in ledger store %s: %w", s.describe(), err)
	}
	return nil
}
