package ledger

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corruptStore builds an on-disk store whose data directory holds tables
// (.sst), a manifest and logs, as after a real run: two sessions of
// imports, each of which leaves its own table when it closes.
func corruptStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	for session := range 2 {
		s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var lines strings.Builder
		for i := session * 2000; i < (session+1)*2000; i++ {
			a := sample(i)
			a.ParentActionID = ""
			lines.Write(AppendJSON(nil, a))
			lines.WriteByte('\n')
		}
		if _, err := s.Import(context.Background(), strings.NewReader(lines.String())); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// flipAndVerify copies the store, flips the byte at off of file name in
// its data directory, and opens and verifies the copy read-only. It
// returns the error, if any; a panic anywhere fails the test by crashing
// it. Afterwards the copy must open again: no stale lock.
func flipAndVerify(t *testing.T, src, name string, off int64) error {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "copy")
	// Copied in Go, not with cp: a forked child would share the file
	// locks of the stores other tests hold.
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, dataDir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var verr error
	s, err := Open(Options{Dir: dir, ReadOnly: true})
	if err != nil {
		verr = err
	} else {
		_, verr = s.Verify(context.Background(), nil)
		if err := s.Close(); err != nil && verr == nil {
			verr = err
		}
	}
	s2, err := Open(Options{Dir: dir, ReadOnly: true})
	var locked *LockedError
	if errors.As(err, &locked) {
		t.Fatalf("%s flipped at %d: the store stays locked after the failure: %v", name, off, err)
	}
	if err == nil {
		s2.Close()
	}
	return verr
}

// TestCorruptFilesAreErrorsNeverPanics flips bytes all over every file of
// a real store. Each flip in a table must be an error naming the table;
// no flip anywhere may panic or leave the store locked.
func TestCorruptFilesAreErrorsNeverPanics(t *testing.T) {
	t.Parallel()
	src := corruptStore(t)
	entries, err := os.ReadDir(filepath.Join(src, dataDir))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(14, 14))
	tables := 0
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || fi.Size() == 0 || e.Name() == "LOCK" {
			continue
		}
		flips := 2
		if strings.HasSuffix(e.Name(), ".sst") {
			tables++
			flips = 5
		}
		for range flips {
			off := rng.Int64N(fi.Size())
			err := flipAndVerify(t, src, e.Name(), off)
			if strings.HasSuffix(e.Name(), ".sst") {
				if err == nil {
					t.Errorf("a flipped byte at %d of %s went unnoticed", off, e.Name())
				} else if !strings.Contains(err.Error(), e.Name()) && !strings.Contains(err.Error(), "ledger verification failed") {
					t.Errorf("flip at %d of %s: the error does not name the table: %v", off, e.Name(), err)
				}
			}
		}
	}
	if tables < 2 {
		t.Fatalf("the store has %d tables to corrupt, want 2", tables)
	}
}
