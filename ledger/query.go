package ledger

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Get returns the action with the given action_id.
func (s *Store) Get(actionID string) (Action, error) {
	var a Action
	err := s.view(func(txn *badger.Txn) error {
		seqs, err := indexSeqs(txn, IndexActionID, actionID, 1)
		if err != nil {
			return err
		}
		if len(seqs) == 0 {
			return fmt.Errorf("action %s: %w", actionID, ErrNotFound)
		}
		a, err = getSeq(txn, seqs[0])
		return err
	})
	return a, err
}

// GetSeq returns the action recorded at seq.
func (s *Store) GetSeq(seq uint64) (Action, error) {
	var a Action
	err := s.view(func(txn *badger.Txn) error {
		var err error
		a, err = getSeq(txn, seq)
		return err
	})
	return a, err
}

// ByPlan returns the actions of a plan in seq order.
func (s *Store) ByPlan(planID string) ([]Action, error) { return s.byIndex(IndexPlanID, planID) }

// ByIntent returns the actions serving an intent in seq order.
func (s *Store) ByIntent(intentID string) ([]Action, error) {
	return s.byIndex(IndexIntentID, intentID)
}

// ByRun returns the actions of a run in seq order.
func (s *Store) ByRun(runID string) ([]Action, error) { return s.byIndex(IndexRunID, runID) }

// Children returns the actions whose parent is actionID, in seq order.
func (s *Store) Children(actionID string) ([]Action, error) {
	return s.byIndex(IndexParentID, actionID)
}

// Parent returns the parent of actionID; ok is false for a top-level
// action. The error wraps ErrNotFound when actionID itself is unknown.
func (s *Store) Parent(actionID string) (parent Action, ok bool, err error) {
	a, err := s.Get(actionID)
	if err != nil {
		return Action{}, false, err
	}
	if a.ParentActionID == "" {
		return Action{}, false, nil
	}
	p, err := s.Get(a.ParentActionID)
	if err != nil {
		return Action{}, false, fmt.Errorf("parent of action %s: %w", actionID, err)
	}
	return p, true, nil
}

func (s *Store) byIndex(field, value string) ([]Action, error) {
	var out []Action
	err := s.view(func(txn *badger.Txn) error {
		seqs, err := indexSeqs(txn, field, value, 0)
		if err != nil {
			return err
		}
		out = make([]Action, 0, len(seqs))
		for _, seq := range seqs {
			a, err := getSeq(txn, seq)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// indexSeqs lists the seqs under i/<field>/<value>/ (at most limit, 0 for
// all), ascending.
func indexSeqs(txn *badger.Txn, field, value string, limit int) ([]uint64, error) {
	if value == "" {
		return nil, nil
	}
	p := indexPrefix(field, value)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
	defer it.Close()
	var seqs []uint64
	for it.Seek(p); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != len(p)+8 { // a longer value that starts with value + "/"
			continue
		}
		seqs = append(seqs, seqOf(k))
		if limit > 0 && len(seqs) == limit {
			break
		}
	}
	return seqs, nil
}

func getSeq(txn *badger.Txn, seq uint64) (Action, error) {
	item, err := txn.Get(actionKey(seq))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Action{}, fmt.Errorf("seq %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return Action{}, err
	}
	var a Action
	err = item.Value(func(v []byte) error {
		a, err = decodeStored(seq, v)
		return err
	})
	return a, err
}

// decodeStored decodes the value stored under a/<seq>, checking that it
// names that seq.
func decodeStored(seq uint64, v []byte) (Action, error) {
	a, err := decodeRecord(v)
	if err != nil {
		return Action{}, &IntegrityError{Seq: seq, Reason: err.Error()}
	}
	if a.Seq != seq {
		return Action{}, &IntegrityError{Seq: seq, Reason: fmt.Sprintf("the action stored under seq %d encodes seq %d", seq, a.Seq)}
	}
	return a, nil
}

// Range calls fn for every action with seq ≥ fromSeq, in seq order, from
// one consistent snapshot, until fn returns an error (which Range returns).
func (s *Store) Range(fromSeq uint64, fn func(Action) error) error {
	return s.rangeSeqs(fromSeq, ^uint64(0), fn)
}

// rangeSeqs calls fn for the actions from..to, failing on a gap.
func (s *Store) rangeSeqs(from, to uint64, fn func(Action) error) error {
	if from == 0 {
		from = 1
	}
	return s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAction), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		want := from
		for it.Seek(actionKey(from)); it.Valid(); it.Next() {
			item := it.Item()
			seq, ok := parseActionKey(item.Key())
			if !ok {
				return &IntegrityError{Seq: want, Reason: fmt.Sprintf("stored key %q is not a/<be64 seq>", item.Key())}
			}
			if seq > to {
				return nil
			}
			if seq != want {
				return &IntegrityError{Seq: want, Reason: fmt.Sprintf("action %d is missing (the next stored is %d)", want, seq)}
			}
			var a Action
			if err := item.Value(func(v []byte) error {
				var err error
				a, err = decodeStored(seq, v)
				return err
			}); err != nil {
				return err
			}
			if err := fn(a); err != nil {
				return err
			}
			want++
		}
		return nil
	})
}
