package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The witness: when a store that was written closes, its latest checkpoint
// is copied to a directory outside it ($XDG_STATE_HOME/ralph/witness/<store
// id>, a signed note). `ralph chain verify` proves the store consistent
// with it, so a store cut back to fewer actions (truncated, or replaced by
// an older copy) or rewritten below it is named, even though the store on
// its own still verifies.

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
	b, err := os.ReadFile(WitnessPath(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// witness writes the store's latest checkpoint to the witness directory,
// unless the checkpoint witnessed there is not an earlier state of this
// store (then it is kept, so the next verify names the problem).
func (s *Store) witness() error {
	if s.witnessDir == "" || !s.wrote.Load() || s.importing.Load() {
		return nil
	}
	cp, err := s.LatestCheckpoint()
	if err != nil {
		return err
	}
	old, err := ReadWitness(s.witnessDir, s.id)
	if err != nil {
		return err
	}
	if old != nil {
		nv, _, err := ParseVerifierKey(s.vkey)
		if err != nil {
			return err
		}
		prev, err := OpenCheckpoint(old, nv)
		if err != nil {
			return fmt.Errorf("the witnessed checkpoint %s does not verify with this store's key (%v); it is kept", WitnessPath(s.witnessDir, s.id), err)
		}
		if prev.Seq > cp.Seq {
			return fmt.Errorf("the store holds %s actions but checkpoint %s witnessed %s: the store was truncated or rolled back; the witness is kept", thousands(cp.Seq), WitnessPath(s.witnessDir, s.id), thousands(prev.Seq))
		}
		hs, err := s.ProveConsistency(context.Background(), prev.Seq, cp.Seq)
		if err == nil {
			err = VerifyConsistency(prev.Seq, cp.Seq, hs, prev.Root, cp.Root)
		}
		if err != nil {
			return fmt.Errorf("the store is not consistent with checkpoint %s (%v); the witness is kept", WitnessPath(s.witnessDir, s.id), err)
		}
	}
	if err := os.MkdirAll(s.witnessDir, 0o700); err != nil {
		return fmt.Errorf("create the witness directory: %w", err)
	}
	return writeFileAtomic(WitnessPath(s.witnessDir, s.id), cp.Note, 0o600)
}
