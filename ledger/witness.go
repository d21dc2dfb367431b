package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The witness: the latest checkpoint of a store, copied to a directory
// outside it ($XDG_STATE_HOME/ralph/witness/<store id>, a signed note)
// whenever a commit holds the end of an iteration or of a run, and when a
// store that was written closes. The first time a process writes it, it
// is written whole and fsynced (a temporary file renamed into place);
// after that an advance overwrites one of its two slots in place and
// fdatasyncs it (witness_file.go). So it never runs ahead of what was
// committed and survives a kill. `ralph chain verify` proves the store
// consistent with it, so a store cut back to fewer actions (truncated,
// replaced by an older copy, or a log Badger discarded after damage) or
// rewritten below it is named, even though the store on its own still
// verifies. Open compares a store with its witness before Badger may cut
// anything (view.go): a store behind its witness is opened read-only.

// DefaultWitnessDir returns $XDG_STATE_HOME/ralph/witness (default
// ~/.local/state/ralph/witness).
func DefaultWitnessDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "ralph", "witness"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the witness directory: %w; set XDG_STATE_HOME", err)
	}
	return filepath.Join(home, ".local", "state", "ralph", "witness"), nil
}

// WitnessPath returns the witness file of store id in dir.
func WitnessPath(dir, id string) string { return filepath.Join(dir, id) }

// ReadWitness returns the checkpoint witnessed for store id in dir, or nil
// when there is none.
func ReadWitness(dir, id string) ([]byte, error) {
	if id == "" {
		return nil, nil
	}
	b, err := ReadCheckpointFile(WitnessPath(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// witnessChecked writes the store's latest checkpoint to the witness
// directory and returns its seq, unless the checkpoint witnessed there is
// not an earlier state of this store (then it is kept, so the next verify
// names the problem).
func (s *Store) witnessChecked() (uint64, error) {
	if s.witnessDir == "" || !s.wrote.Load() || s.importing.Load() {
		return 0, nil
	}
	cp, err := s.LatestCheckpoint()
	if err != nil {
		return 0, err
	}
	old, err := ReadWitness(s.witnessDir, s.id)
	if err != nil {
		return cp.Seq, &witnessWriteError{fmt.Errorf("read the witness: %w", err)}
	}
	if old != nil {
		nv, _, err := ParseVerifierKey(s.vkey)
		if err != nil {
			return 0, err
		}
		prev, err := OpenCheckpoint(old, nv)
		if err != nil {
			return 0, fmt.Errorf("the witnessed checkpoint %s does not verify with this store's key (%v); it is kept", WitnessPath(s.witnessDir, s.id), err)
		}
		if prev.Seq > cp.Seq {
			return 0, fmt.Errorf("the store holds %s actions but checkpoint %s witnessed %s: the store was truncated or rolled back; the witness is kept", thousands(cp.Seq), WitnessPath(s.witnessDir, s.id), thousands(prev.Seq))
		}
		hs, err := s.ProveConsistency(context.Background(), prev.Seq, cp.Seq)
		if err == nil {
			err = VerifyConsistency(prev.Seq, cp.Seq, hs, prev.Root, cp.Root)
		}
		if err != nil {
			return 0, fmt.Errorf("the store is not consistent with checkpoint %s (%v); the witness is kept", WitnessPath(s.witnessDir, s.id), err)
		}
	}
	if err := os.MkdirAll(s.witnessDir, 0o700); err != nil {
		return cp.Seq, &witnessWriteError{fmt.Errorf("create the witness directory: %w", err)}
	}
	s.witnessW.path = WitnessPath(s.witnessDir, s.id)
	if err := s.witnessW.rewrite(cp.Seq, cp.Note); err != nil {
		return cp.Seq, &witnessWriteError{err}
	}
	return cp.Seq, nil
}

// BehindError reports a store that holds fewer actions than its witness
// says it held: actions that were committed are gone.
type BehindError struct {
	Store     string    // the store directory
	Witness   string    // the witness file
	Stored    uint64    // actions the store holds
	Witnessed uint64    // actions the witness signs
	Signed    time.Time // when the witnessed checkpoint was signed
	// Cut are the memtable logs Badger cannot read whole, whose commits
	// after the damage a writer would discard.
	Cut []LogTail
}

func (e *BehindError) Error() string {
	return behindSentence(e.Stored, e.Witness, e.Witnessed, e.Signed, e.Cut)
}

// behindSentence says that a store holds stored actions where the witness
// saw more, and why when the logs tell.
func behindSentence(stored uint64, witness string, witnessed uint64, signed time.Time, cut []LogTail) string {
	why := "the store was truncated or rolled back to an older copy"
	if len(cut) > 0 {
		files := make([]string, len(cut))
		for i, t := range cut {
			files[i] = t.String()
		}
		why = "Badger discarded its log after damage (" + strings.Join(files, "; ") + "); restore a copy"
	}
	return fmt.Sprintf("the store holds %s actions but checkpoint %s witnessed %s (signed %s): %s",
		thousands(stored), witness, thousands(witnessed), signed.Format("2006-01-02T15:04:05Z07:00"), why)
}

// checkBeforeWrite opens the store at opts.Dir read-only, before a
// writer's open could cut a log, and looks for what that cut would lose:
// a store behind its witness, or logs that hold whole commits after damage
// (TailError). Such a store is returned, read-only, refusing every append;
// otherwise it is closed and the writer's open goes on.
func checkBeforeWrite(opts Options, dir string) (*Store, error) {
	if _, err := os.Stat(filepath.Join(dir, dataDir, "MANIFEST")); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // a new store: nothing was committed
	}
	ro := opts
	ro.Dir, ro.ReadOnly, ro.WitnessDir = dir, true, ""
	st, err := Open(ro)
	var ie *ImportInterruptedError
	if errors.As(err, &ie) {
		return nil, nil // the writer rolls the import back; an import writes no witness
	}
	if err != nil {
		return nil, err
	}
	if opts.WitnessDir != "" {
		st.behind = st.behindWitness(opts.WitnessDir)
	}
	if tails := st.LostTails(); len(tails) > 0 {
		st.tail = &TailError{Store: st.describe(), Head: st.Head().Seq, Tails: tails}
	}
	switch {
	case st.behind != nil:
		st.log.Error("ledger store is behind its witness; it is open read-only", "store", st.describe(), "err", st.behind)
	case st.tail != nil:
		st.log.Error("ledger store has a damaged log; it is open read-only", "store", st.describe(), "err", st.tail)
	default:
		return nil, st.Close()
	}
	return st, nil
}

// behindWitness compares the store with the checkpoint witnessed in dir.
// A witness that cannot be read or does not verify is left to chain
// verify, which names it.
func (s *Store) behindWitness(dir string) *BehindError {
	w, err := ReadWitness(dir, s.id)
	if err != nil || w == nil || s.vkey == "" {
		return nil
	}
	nv, _, err := ParseVerifierKey(s.vkey)
	if err != nil {
		return nil
	}
	cp, err := OpenCheckpoint(w, nv)
	if err != nil || cp.Seq <= s.Head().Seq {
		return nil
	}
	var cut []LogTail
	if s.scratch != nil {
		cut = s.scratch.cut
	}
	return &BehindError{Store: s.describe(), Witness: WitnessPath(dir, s.id), Stored: s.Head().Seq,
		Witnessed: cp.Seq, Signed: cp.Time, Cut: cut}
}

// witnessWorthy reports whether items end an iteration or a run (runEnd):
// the commits after which the witness advances.
func witnessWorthy(items []*pending) (runEnd, ok bool) {
	for _, p := range items {
		switch p.a.Type {
		case RunCompleted, RunFailed, RunStopped, RunAborted:
			return true, true
		case IterationCompleted:
			ok = true
		}
	}
	return false, ok
}

// witnessNote is a committed checkpoint on its way to the witness.
type witnessNote struct {
	seq    uint64
	note   []byte
	runEnd bool
}

// witnessState is what witnessMu guards.
type witnessState struct {
	checked, stuck bool
	failing        bool // the last write failed (witness_fail.go)
	seq            uint64
}

// queueWitness hands n to the witness: the end of a run is written before
// the commit is answered; the end of an iteration by the witness goroutine,
// so that the fsyncs do not hold up the loop (a later note replaces one
// not yet written).
func (s *Store) queueWitness(n *witnessNote) {
	if n.runEnd || s.witnessKick == nil {
		s.advanceWitness(n)
		return
	}
	s.witnessNext.Store(n)
	select {
	case s.witnessKick <- struct{}{}:
	default:
	}
}

// witnessLoop writes the notes queueWitness hands it until Close.
func (s *Store) witnessLoop() {
	defer s.bgWG.Done()
	defer s.recoverBackground("witness")
	for {
		select {
		case <-s.done:
			return
		case <-s.witnessKick:
			if n := s.witnessNext.Swap(nil); n != nil {
				s.advanceWitness(n)
			}
		}
	}
}

// advanceWitness writes n (nil: the store's latest checkpoint, at Close)
// as the store's witness, unless a later one is written already. The
// first time, the witness already there is checked first (witness); a
// witness that this store does not extend is kept, and not advanced again.
func (s *Store) advanceWitness(n *witnessNote) {
	if s.witnessDir == "" || s.importing.Load() {
		return
	}
	s.witnessMu.Lock()
	defer s.witnessMu.Unlock()
	w := &s.witness
	if w.stuck || n != nil && n.seq <= w.seq {
		return
	}
	if !w.checked || n == nil {
		w.checked = true
		seq, err := s.witnessChecked()
		var we *witnessWriteError
		switch {
		case errors.As(err, &we):
			// Written whole again (and checked) at the next advance.
			w.checked = false
			s.witnessWriteFailed(seq, we.err)
		case err != nil:
			w.stuck = true
			s.log.Warn("ledger witness not updated", "store", s.describe(), "err", err)
		default:
			w.seq, w.failing = max(w.seq, seq), false
		}
		return
	}
	if err := s.witnessW.advance(n.seq, n.note); err != nil {
		w.checked = false
		s.witnessWriteFailed(n.seq, err)
		return
	}
	w.seq, w.failing = n.seq, false
}
