package ledger

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// The store's place. A writer remembers, at Open, the device and inode of
// the store directory and of Badger's lock file in it. Before each commit
// (with the free-space check, diskspace.go) it checks that both are still
// the ones it opened and that their file system still takes writes: a
// directory removed while the run writes goes on taking Badger's writes
// into unlinked files, and a flush into it fails forever, so without the
// check a run would end as if all were well and lose everything. The
// stats are cached for reserveTTL, like the space reserve, so the append
// path pays at most two stats every 200 ms; a file system turned
// read-only shows itself at once in the statfs the space check makes
// anyway, and as the EROFS of a write.
//
// A store found lost refuses every later commit with its LostError, is
// not flushed when it closes (Badger would retry the flush forever), and
// is watched by a goroutine between commits too (watchPlace), so a run
// waiting on a long agent call learns of it within a second (Lost).

// How a store was lost (LostError.What).
const (
	LostRemoved  = "removed"
	LostReplaced = "replaced"
	LostReadOnly = "read-only"
)

// LostError reports a store that stopped being the one this process
// opened, or stopped taking writes, while it was open for writing.
type LostError struct {
	Dir  string
	What string // LostRemoved, LostReplaced or LostReadOnly
	// Seq is the last action the store committed.
	Seq uint64
	// Witness is the store's witness file ("" when none is kept), and
	// WitnessSeq the action its checkpoint signs (0: none yet).
	Witness    string
	WitnessSeq uint64
}

func (e *LostError) Error() string {
	var what, kept string
	switch e.What {
	case LostRemoved:
		what = "was removed while this process was writing to it"
		kept = fmt.Sprintf("its actions up to seq %d went with it", e.Seq)
	case LostReplaced:
		what = "was replaced by another directory while this process was writing to it"
		kept = fmt.Sprintf("its actions up to seq %d are wherever the directory it opened went", e.Seq)
	default:
		what = "is on a file system that became read-only"
		kept = fmt.Sprintf("its actions up to seq %d are on disk", e.Seq)
	}
	witness := "no witness of it is kept"
	switch {
	case e.Witness != "" && e.WitnessSeq > 0:
		witness = fmt.Sprintf("the witness %s still holds its signed checkpoint of seq %d", e.Witness, e.WitnessSeq)
	case e.Witness != "":
		witness = fmt.Sprintf("its witness %s holds no checkpoint of it yet", e.Witness)
	}
	fix := ""
	if e.What == LostReadOnly {
		fix = "; make that file system writable again, then resume the run"
	}
	return fmt.Sprintf("ledger store %s %s, so nothing more can be recorded: %s, and %s%s", e.Dir, what, kept, witness, fix)
}

// fileID is a file's device and inode.
type fileID struct{ dev, ino uint64 }

// placeState is what the writer knows of its store's place: the ids it
// opened, and when it last checked them.
type placeState struct {
	dir, lock fileID
	known     bool // the ids were read at Open
	at        time.Time
}

// lockFile is Badger's lock file in the store's data directory.
func (s *Store) lockFile() string { return filepath.Join(s.dir, dataDir, "LOCK") }

// notePlace records the store's place once Badger holds its lock.
func (s *Store) notePlace() {
	dir, err1 := statID(s.dir)
	lock, err2 := statID(s.lockFile())
	if err1 != nil || err2 != nil {
		return // nothing to compare with: not checked
	}
	s.place = placeState{dir: dir, lock: lock, known: true, at: time.Now()}
}

// checkPlace returns the store's LostError when it is lost: found so now
// (when its place was last checked more than reserveTTL ago, or force), or
// before. readOnly is what the caller's statfs of the store found.
func (s *Store) checkPlace(force, readOnly bool) error {
	if e := s.lost.Load(); e != nil {
		return e
	}
	if !s.place.known {
		return nil
	}
	if readOnly {
		return s.markLost(LostReadOnly)
	}
	s.placeMu.Lock()
	now := time.Now()
	due := force || now.Sub(s.place.at) > reserveTTL
	if due {
		s.place.at = now
	}
	s.placeMu.Unlock()
	if !due {
		return nil
	}
	if what := s.placeChanged(); what != "" {
		return s.markLost(what)
	}
	return nil
}

// placeChanged stats the store directory and its lock file: "" when both
// are the ones Open found, else how the store was lost.
func (s *Store) placeChanged() string {
	dir, err := statID(s.dir)
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR):
		return LostRemoved
	case err != nil:
		return "" // cannot tell (a permission, an I/O error): the commit will
	case dir != s.place.dir:
		return LostReplaced
	}
	lock, err := statID(s.lockFile())
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR):
		return LostRemoved
	case err == nil && lock != s.place.lock:
		return LostReplaced
	}
	if _, ro, ok := statFS(s.dir); ok && ro {
		return LostReadOnly
	}
	return ""
}

// markLost records that the store is lost (the first cause found stays)
// and returns the error every later commit gets.
func (s *Store) markLost(what string) *LostError {
	e := &LostError{Dir: s.describe(), What: what, Seq: s.Head().Seq}
	e.Witness, e.WitnessSeq = s.Witnessed()
	if s.lost.CompareAndSwap(nil, e) {
		s.log.Error("ledger store lost", "store", s.describe(), "what", what, "seq", e.Seq)
		close(s.lostCh)
	}
	return s.lost.Load()
}

// Lost is closed when the store is found lost; LostErr then says how.
// A store that is never lost never closes it.
func (s *Store) Lost() <-chan struct{} { return s.lostCh }

// LostErr returns the store's LostError, or nil while it is in place.
func (s *Store) LostErr() *LostError { return s.lost.Load() }

// Witnessed returns the store's witness file ("" when none is kept) and
// the seq its checkpoint signs (0 when there is none, or it cannot be
// read), without waiting on anything the store holds.
func (s *Store) Witnessed() (string, uint64) {
	if s.witnessDir == "" || s.id == "" {
		return "", 0
	}
	path := WitnessPath(s.witnessDir, s.id)
	// Never wait for the witness's lock: its holder may be the very
	// write that hangs (a Close past its bound asks too).
	if s.witnessMu.TryLock() {
		seq := s.witness.seq
		s.witnessMu.Unlock()
		if seq > 0 {
			return path, seq
		}
	}
	b, err := ReadCheckpointFile(path)
	if err != nil {
		return path, 0
	}
	nv, _, err := ParseVerifierKey(s.vkey)
	if err != nil {
		return path, 0
	}
	cp, err := OpenCheckpoint(b, nv)
	if err != nil {
		return path, 0
	}
	return path, cp.Seq
}

// placeWatchEvery is how often watchPlace checks the store between commits.
const placeWatchEvery = time.Second

// watchPlace checks the store's place every placeWatchEvery until Close,
// so a store lost while nothing commits (a long agent call) is found.
func (s *Store) watchPlace() {
	defer s.bgWG.Done()
	defer s.recoverBackground("place")
	t := time.NewTicker(placeWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.lostCh:
			return
		case <-t.C:
		}
		_, ro, _ := statFS(s.dir)
		if s.checkPlace(true, ro) != nil {
			return
		}
	}
}

// lostOnWrite turns a write's EROFS into the store's LostError.
func (s *Store) lostOnWrite(err error) error {
	if err != nil && errors.Is(err, syscall.EROFS) && s.place.known {
		return s.markLost(LostReadOnly)
	}
	return err
}
