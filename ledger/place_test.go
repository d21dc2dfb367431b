package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/testenv"
)

// openPlaced opens a store on disk with a witness, for the place tests.
func openPlaced(t *testing.T, opts Options) *Store {
	t.Helper()
	dir := t.TempDir()
	opts.Dir, opts.WitnessDir, opts.KeyDir = filepath.Join(dir, "store"), filepath.Join(dir, "witness"), filepath.Join(dir, "keys")
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendIter appends n sample actions, the last ending an iteration so the
// witness advances, and waits for them to be durable.
func appendIter(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		a := sample(int(s.Head().Seq) + i)
		if i == n-1 {
			a.Type = IterationCompleted
		}
		if _, err := s.Append(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	head := s.Head().Seq
	eventually.True(t, "the witness reaches the last iteration's end", func() bool {
		_, seq := s.Witnessed()
		return seq == head
	})
}

// A store removed or replaced while it is open for writing refuses the
// next commit with a LostError that names it, what happened, the last
// action it committed and its witness; Lost is closed; Close does not
// flush it, and returns the same error at once.
func TestStoreLostIsNoticedAtTheNextCommit(t *testing.T) {
	for _, what := range []string{LostRemoved, LostReplaced} {
		t.Run(what, func(t *testing.T) {
			s := openPlaced(t, Options{})
			appendIter(t, s, 5)
			dir := s.Dir()
			switch what {
			case LostRemoved:
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			case LostReplaced:
				if err := os.Rename(dir, dir+".old"); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			s.placeMu.Lock()
			s.place.at = time.Time{} // the next commit checks, whatever the cache says
			s.placeMu.Unlock()
			_, err := s.Append(context.Background(), sample(100))
			var lost *LostError
			if !errors.As(err, &lost) || lost.What != what || lost.Seq != 5 || lost.WitnessSeq != 5 {
				t.Fatalf("append after the store was %s: %v (%+v)", what, err, lost)
			}
			msg := err.Error()
			for _, want := range []string{"ledger store " + dir + " ", "seq 5", s.witnessDir, "nothing more can be recorded"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q lacks %q", msg, want)
				}
			}
			select {
			case <-s.Lost():
			default:
				t.Error("Lost is not closed")
			}
			if _, err := s.Append(context.Background(), sample(101)); !errors.As(err, &lost) {
				t.Errorf("a later append: %v, want the LostError", err)
			}
			if err := s.Close(); !errors.As(err, &lost) {
				t.Errorf("Close: %v, want the LostError", err)
			}
		})
	}
}

// A store removed while nothing commits (a long agent call) is found by
// the watcher: Lost closes within about a second.
func TestStoreLostBetweenCommitsIsWatched(t *testing.T) {
	s := openPlaced(t, Options{})
	appendIter(t, s, 3)
	if err := os.RemoveAll(s.Dir()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Lost():
	case <-time.After(30 * time.Second): // a hang guard; it takes about placeWatchEvery
		t.Fatal("the removed store was never found lost")
	}
	if e := s.LostErr(); e == nil || e.What != LostRemoved {
		t.Fatalf("LostErr = %v", e)
	}
}

// A write refused with EROFS (a file system turned read-only after an
// error keeps its rw mount flag) makes the store lost as read-only, with
// the fix in its sentence; other errors pass through.
func TestReadOnlyWriteIsLost(t *testing.T) {
	s := openPlaced(t, Options{})
	appendIter(t, s, 2)
	other := errors.New("some other failure")
	if err := s.lostOnWrite(other); err != other {
		t.Fatalf("lostOnWrite(other) = %v", err)
	}
	err := s.lostOnWrite(fmt.Errorf("commit: %w", syscall.EROFS))
	var lost *LostError
	if !errors.As(err, &lost) || lost.What != LostReadOnly || !strings.Contains(err.Error(), "became read-only") ||
		!strings.Contains(err.Error(), "make that file system writable again, then resume the run") {
		t.Fatalf("lostOnWrite(EROFS) = %v", err)
	}
}

// The place check costs at most two stats every reserveTTL: commits within
// it do not stat the store at all (so a directory removed in that window is
// found at the next check, not the next commit).
func TestPlaceCheckIsCached(t *testing.T) {
	s := openPlaced(t, Options{})
	appendIter(t, s, 1)
	if err := s.checkPlace(false, false); err != nil {
		t.Fatal(err)
	}
	s.placeMu.Lock()
	s.place.at = time.Now()
	s.placeMu.Unlock()
	if err := os.RemoveAll(s.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := s.checkPlace(false, false); err != nil {
		t.Fatalf("a check within the cache stat'ed the store: %v", err)
	}
	if err := s.checkPlace(true, false); err == nil {
		t.Fatal("a forced check did not find the store removed")
	}
}

// A store whose flush cannot be written (its data directory made
// immutable: Badger retries the flush forever) closes within its bound:
// Close returns a StuckError naming the store and its last witnessed
// action, and OnCloseStuck gets it first.
func TestCloseIsBounded(t *testing.T) {
	var got *StuckError
	s := openPlaced(t, Options{CloseTimeout: 300 * time.Millisecond, OnCloseStuck: func(e *StuckError) { got = e }})
	appendIter(t, s, 4)
	data := filepath.Join(s.Dir(), dataDir)
	if out, err := exec.Command(testenv.Tool(t, "chattr"), "+i", data).CombinedOutput(); err != nil {
		testenv.Need(t, "an immutable directory (chattr +i)", fmt.Sprintf("%v %s; needs root and an ext2/3/4 file system under $TMPDIR", err, out))
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", data).Run() })
	err := s.Close()
	var stuck *StuckError
	if !errors.As(err, &stuck) || got != stuck || stuck.WitnessSeq != 4 || !s.Closed() {
		t.Fatalf("Close = %v (callback got %v)", err, got)
	}
	for _, want := range []string{"ledger store " + s.Dir() + " did not close within 300ms", "last witnessed action is seq 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if err2 := s.Close(); err2 != err {
		t.Errorf("a second Close = %v, want the first's", err2)
	}
}

// An append whose commit does not come (the writer held inside Badger,
// which stalls writes while its flushes fail; here held on the space
// lock it takes before each commit) waits at most CommitTimeout: then it
// and every later append fail with a StuckError naming the store and its
// last witnessed action.
func TestStalledCommitIsBounded(t *testing.T) {
	s := openPlaced(t, Options{CommitTimeout: 300 * time.Millisecond, CloseTimeout: 300 * time.Millisecond})
	appendIter(t, s, 2)
	s.spaceMu.Lock()
	_, err := s.Append(context.Background(), sample(10))
	var stuck *StuckError
	if !errors.As(err, &stuck) || !stuck.Commit || stuck.WitnessSeq != 2 ||
		!strings.Contains(err.Error(), "ledger store "+s.Dir()+" took no commit for 300ms") {
		s.spaceMu.Unlock()
		t.Fatalf("an append whose commit never came: %v", err)
	}
	s.spaceMu.Unlock()
	if _, err := s.Append(context.Background(), sample(11)); !errors.As(err, &stuck) {
		t.Errorf("a later append: %v, want the StuckError at once", err)
	}
}
