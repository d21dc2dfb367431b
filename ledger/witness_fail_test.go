package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/eventually"
)

// appendIteration appends one iteration (started, a call, completed) to s.
func appendIteration(t *testing.T, s *Store, i int) {
	t.Helper()
	for j, typ := range []ActionType{IterationStarted, CapabilityCall, IterationCompleted} {
		a := sample(i*3 + j)
		a.ParentActionID, a.Type = "", typ
		if _, err := s.Append(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnwritableWitnessIsNamed runs a store whose witness directory is a
// file, so no witness can be written: the writer reports it once
// (OnWitnessError) however often it fails, Verify then names the first
// checkpoint that was not witnessed, and once the witness is written again
// and covers it, Verify passes.
func TestUnwritableWitnessIsNamed(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, wd := filepath.Join(root, "store"), filepath.Join(root, "witness")
	if err := os.WriteFile(wd, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []*WitnessError
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: wd, OnWitnessError: func(e *WitnessError) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	appendIteration(t, s, 0)
	eventually.Poll(func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 })
	appendIteration(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 || got[0].Seq < 3 || !strings.Contains(got[0].Error(), wd) || !strings.Contains(got[0].Error(), "not a directory") {
		t.Fatalf("OnWitnessError got %v, want one error naming %s", got, wd)
	}
	failed := got[0].Seq
	mu.Unlock()

	verify := func(since []SavedCheckpoint) error {
		t.Helper()
		s, err := Open(Options{Dir: dir, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.VerifyWith(context.Background(), VerifyOptions{Since: since})
		return err
	}
	var ie *IntegrityError
	if err := verify(nil); !errors.As(err, &ie) || ie.Seq != failed || !strings.Contains(ie.Reason, fmt.Sprintf("the witness could not be written at seq %d", failed)) || !strings.Contains(ie.Reason, "not a directory") {
		t.Fatalf("verify after the witness failed = %v, want it named at seq %d", err, failed)
	}

	// The directory takes writes again: the next run witnesses the store.
	if err := os.Remove(wd); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: wd})
	if err != nil {
		t.Fatal(err)
	}
	appendIteration(t, s, 2)
	id := s.ID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := verify([]SavedCheckpoint{{Name: "W", Note: mustReadWitness(t, wd, id)}}); err != nil {
		t.Fatalf("verify once the witness covers the failure = %v", err)
	}
}

// FuzzDecodeWitnessFailure holds that any record decodes without a panic
// and that a decoded one encodes back to the same bytes.
func FuzzDecodeWitnessFailure(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeWitnessFailure(witnessFailure{Seq: 7, Reason: "mkdir: not a directory"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeWitnessFailure(b)
		if err != nil {
			return
		}
		if got := encodeWitnessFailure(w); string(got) != string(b) {
			t.Fatalf("re-encoded %x, want %x", got, b)
		}
	})
}
