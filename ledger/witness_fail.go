package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A witness that cannot be written (its directory read-only, full, or not
// a directory) leaves the actions after the last witnessed checkpoint
// unprotected: a cut of them would go unseen. The writer says so at once
// (Options.OnWitnessError, once until the witness is written again) and
// records the first checkpoint it could not witness under
// m/witness-failed, so that Verify names the gap later, until a saved
// checkpoint (the witness written again, or one given with --since)
// covers it.

// WitnessError reports a witness that could not be written.
type WitnessError struct {
	Store string // the store directory
	Dir   string // the witness directory
	Seq   uint64 // the checkpoint that could not be witnessed
	Err   error
}

func (e *WitnessError) Error() string {
	return fmt.Sprintf("the witness of ledger store %s could not be written in %s at seq %d (%v): until it is, a cut of the actions after the last witnessed one would go unseen; make that directory writable",
		e.Store, e.Dir, e.Seq, e.Err)
}

func (e *WitnessError) Unwrap() error { return e.Err }

// witnessWriteError marks an error of witnessChecked that is the witness
// file or directory failing, not the store disagreeing with the witness.
type witnessWriteError struct{ err error }

func (e *witnessWriteError) Error() string { return e.err.Error() }
func (e *witnessWriteError) Unwrap() error { return e.err }

// witnessFailure is the record under m/witness-failed.
type witnessFailure struct {
	Seq    uint64
	Time   time.Time
	Reason string
}

func encodeWitnessFailure(f witnessFailure) []byte {
	b := binary.BigEndian.AppendUint64(nil, f.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(f.Time.UnixNano()))
	return append(b, f.Reason...)
}

func decodeWitnessFailure(b []byte) (witnessFailure, error) {
	if len(b) < 16 {
		return witnessFailure{}, fmt.Errorf("the witness failure record is %d bytes, shorter than 16", len(b))
	}
	return witnessFailure{
		Seq:    binary.BigEndian.Uint64(b),
		Time:   time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))).UTC(),
		Reason: string(b[16:]),
	}, nil
}

// witnessWriteFailed reports that the witness of checkpoint seq could not
// be written (err): logged each time; the first time since the witness
// was last written, also recorded in the store, unless an earlier failure
// still stands there, and handed to Options.OnWitnessError. witnessMu is
// held.
func (s *Store) witnessWriteFailed(seq uint64, err error) {
	e := &WitnessError{Store: s.describe(), Dir: s.witnessDir, Seq: seq, Err: err}
	s.log.Warn("ledger witness not written", "store", s.describe(), "err", e)
	if s.witness.failing {
		return
	}
	s.witness.failing = true
	rerr := s.db.Update(func(txn *badger.Txn) error {
		old, rerr := readWitnessFailure(txn)
		if rerr != nil || old != nil && old.Seq > s.witness.seq {
			return rerr // an earlier failure, not covered since, stands
		}
		return txn.Set([]byte(keyWitnessFailed), encodeWitnessFailure(witnessFailure{Seq: seq, Time: time.Now(), Reason: err.Error()}))
	})
	if rerr != nil {
		s.log.Warn("ledger witness failure not recorded", "store", s.describe(), "err", rerr)
	}
	if s.onWitnessErr != nil {
		s.onWitnessErr(e)
	}
}

// readWitnessFailure reads m/witness-failed (nil when there is none).
func readWitnessFailure(txn *badger.Txn) (*witnessFailure, error) {
	item, err := txn.Get([]byte(keyWitnessFailed))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f witnessFailure
	err = item.Value(func(b []byte) error {
		f, err = decodeWitnessFailure(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// checkWitnessFailure names a recorded witness failure that no saved
// checkpoint proved consistent covers (v.covered).
func (v *verifier) checkWitnessFailure() {
	f, err := readWitnessFailure(v.txn)
	if err != nil {
		v.add(0, rankRecord, "%v", err)
		return
	}
	if f == nil || f.Seq <= v.covered {
		return
	}
	unseen := fmt.Sprintf("a cut of the actions after seq %d would go unseen", v.covered)
	if v.covered == 0 {
		unseen = "no checkpoint of the store is witnessed, so a cut of any action would go unseen"
	}
	v.add(f.Seq, rankRecord, "the witness could not be written at seq %d (%s: %s), and no saved checkpoint covers it: %s; make the witness directory writable (the next run on the store writes it), or save a checkpoint now with ralph chain checkpoint > FILE and verify with --since FILE",
		f.Seq, f.Time.Format(time.RFC3339), f.Reason, unseen)
}
