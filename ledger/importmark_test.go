package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// importLinesJSON renders actions from..from+n as JSON lines.
func importLinesJSON(from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		a := sample(i)
		a.ParentActionID = ""
		b.Write(AppendJSON(nil, a))
		b.WriteByte('\n')
	}
	return b.String()
}

// TestImportRollbackSurvivesRepeatedKills leaves an import unfinished (its
// mark stands after two committed chunks, as a kill -9 leaves it), then a
// rollback cut short at each of its steps, as a second kill would. The next
// Open always rolls the rest back: the store holds exactly the actions it
// held before, verifies, and takes the import again.
func TestImportRollbackSurvivesRepeatedKills(t *testing.T) {
	t.Parallel()
	const before, imported, chunk = 100, 1500, 500
	steps := []struct {
		name string
		do   func(s *Store) error
	}{
		{"no rollback", func(*Store) error { return nil }},
		{"some actions", func(s *Store) error { _, err := s.deleteActionsAbove(before); return err }},
		{"all actions", func(s *Store) error {
			for {
				n, err := s.deleteActionsAbove(before)
				if err != nil || n == 0 {
					return err
				}
			}
		}},
		{"checkpoints too", func(s *Store) error {
			for {
				n, err := s.deleteActionsAbove(before)
				if err != nil {
					return err
				}
				if n == 0 {
					return s.deleteKeysWhere(prefixCheckpoint, func(k []byte) bool { return seqOf(k) > before })
				}
			}
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			s := openDir(t, dir, false)
			appendN(t, s, 0, before)
			head := s.Head()
			var marked bool
			_, err := s.importLines(ctx, strings.NewReader(importLinesJSON(before, imported)), chunk, &marked)
			if err != nil || !marked {
				t.Fatalf("import: %v (marked %v)", err, marked)
			}
			if got := s.Head().Seq; got != before+imported {
				t.Fatalf("head %d after the import's chunks, want %d", got, before+imported)
			}
			if err := step.do(s); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			// A reader never sees the partial import.
			_, err = Open(Options{Dir: dir, ReadOnly: true})
			var ie *ImportInterruptedError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), fmt.Sprintf("holds an import that did not finish (after seq %d)", before)) {
				t.Fatalf("read-only open of an unfinished import: %v", err)
			}

			s = openDir(t, dir, false)
			defer s.Close()
			if step.name == "no rollback" && s.RolledBackImport() != imported {
				t.Errorf("rolled back %d actions, want %d", s.RolledBackImport(), imported)
			}
			if s.Head() != head {
				t.Fatalf("head after rollback %+v, want %+v", s.Head(), head)
			}
			if rep := mustVerify(t, s); rep.Actions != before {
				t.Fatalf("verified %d actions after rollback, want %d", rep.Actions, before)
			}
			if acts, err := s.ByRun(sample(before).RunID); err != nil || hasSeqAbove(acts, before) {
				t.Fatalf("an index still names a rolled-back action: %v", err)
			}
			rep, err := s.ImportStream(ctx, strings.NewReader(importLinesJSON(before, imported)))
			if err != nil || rep.Actions != imported || rep.FirstSeq != before+1 {
				t.Fatalf("import again: %+v %v", rep, err)
			}
			if rep := mustVerify(t, s); rep.Actions != before+imported {
				t.Fatalf("verified %d actions, want %d", rep.Actions, before+imported)
			}
		})
	}
}

func hasSeqAbove(acts []Action, seq uint64) bool {
	for _, a := range acts {
		if a.Seq > seq {
			return true
		}
	}
	return false
}

// TestImportStreamBadLineRollsBack: a bad line after committed chunks
// refuses appends until the store is reopened, which rolls the chunks back,
// and no witness of the partial import is written.
func TestImportStreamBadLineRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, wdir := t.TempDir(), t.TempDir()
	s, err := Open(Options{Dir: dir, WitnessDir: wdir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	witnessed, err := ReadWitness(wdir, s.ID())
	if err != nil || witnessed == nil {
		t.Fatalf("no witness: %v", err)
	}
	s, err = Open(Options{Dir: dir, WitnessDir: wdir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	in := importLinesJSON(10, importChunk+10) + "{not json\n"
	_, err = s.ImportStream(ctx, strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", importChunk+11)) || !strings.Contains(err.Error(), "rolls back what the import wrote") {
		t.Fatalf("import with a bad line: %v", err)
	}
	if _, err := s.Append(ctx, sample(99999)); err == nil || !strings.Contains(err.Error(), "holds a failed import") {
		t.Fatalf("append after a failed import: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if w, _ := ReadWitness(wdir, s.ID()); string(w) != string(witnessed) {
		t.Fatalf("the witness changed to a checkpoint of the partial import:\n%s", w)
	}
	s, err = Open(Options{Dir: dir, WitnessDir: wdir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.RolledBackImport() != importChunk {
		t.Errorf("rolled back %d actions, want %d", s.RolledBackImport(), importChunk)
	}
	if rep := mustVerify(t, s); rep.Actions != 10 {
		t.Fatalf("verified %d actions, want 10", rep.Actions)
	}
	// A bad line before anything was committed leaves no mark.
	if _, err := s.ImportStream(ctx, strings.NewReader("{bad\n")); err == nil {
		t.Fatal("a bad first line imported")
	}
	appendN(t, s, 10, 1)
}
