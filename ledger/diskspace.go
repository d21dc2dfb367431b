package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Free space. Badger writes its logs and tables through memory maps of
// files it creates sparse: a page that cannot be had on a full disk is a
// SIGBUS, which kills the process, not an error. So the writer checks the
// free space of the store's filesystem before each commit against what the
// commit may make Badger write:
//
//   - the commit itself, in the memtable log (or the value log);
//   - a flush of the memtable to a table, at the latest when the store
//     closes: at most what the memtable logs hold (their allocated blocks);
//   - a compaction of the tables of levels 0 and 1, rewritten before the old
//     ones are deleted;
//
// plus closeMargin, kept for the action that closes a run and the run's
// record. An action that closes a run (and a kv write outside an action)
// may use that margin. Below what a flush at close needs, Close leaves the
// memtable in its log instead of letting Badger flush it (the next writer
// flushes it), so nothing committed is lost and the lock is released.

// closeMargin is the room ordinary commits leave for the run's closing
// action and its record.
const closeMargin = 1 << 20

// pageSlack covers the pages a small write may touch beyond its bytes.
const pageSlack = 64 << 10

// DiskFullError refuses a commit for which the store's disk has too little
// room left.
type DiskFullError struct {
	Dir  string // the store directory
	Free int64  // bytes free on its filesystem
	Need int64  // bytes the commit needs, with the room kept
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("the disk holding ledger store %s is full: %s free, and the next commit needs %s with the room kept to flush the store and close the run; free space on that disk, then resume the run",
		e.Dir, byteSize(e.Free), byteSize(e.Need))
}

func byteSize(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// spaceState caches what a flush and a compaction may need, refreshed at
// most every reserveTTL (the writer's only).
type spaceState struct {
	reserve int64
	at      time.Time
}

const reserveTTL = 200 * time.Millisecond

// checkSpace returns a DiskFullError unless the store's filesystem has room
// for a commit of n bytes (closing commits may use closeMargin), and a
// LostError when the store is no longer in its place (place.go).
func (s *Store) checkSpace(n int64, closing bool) error {
	if s.dir == "" || s.readOnly {
		return nil
	}
	data := filepath.Join(s.dir, dataDir)
	free, readOnly, ok := statFS(data)
	if err := s.checkPlace(!ok, readOnly); err != nil {
		return err
	}
	if !ok {
		return nil
	}
	s.spaceMu.Lock()
	defer s.spaceMu.Unlock()
	if now := time.Now(); now.Sub(s.space.at) > reserveTTL || free < s.space.reserve+n+2*closeMargin {
		s.space.reserve, s.space.at = s.flushReserve(data)+s.compactionReserve(), now
	}
	need := n + pageSlack + s.space.reserve
	if !closing {
		need += closeMargin
	}
	if free < need {
		return &DiskFullError{Dir: s.dir, Free: free, Need: need}
	}
	return nil
}

// flushReserve is what flushing every memtable may write: the blocks the
// memtable logs in data hold.
func (s *Store) flushReserve(data string) int64 {
	entries, err := os.ReadDir(data)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".mem" {
			n += allocatedBytes(filepath.Join(data, e.Name()))
		}
	}
	return n
}

// compactionReserve is the size of the tables of levels 0 and 1, which a
// compaction rewrites before it deletes them.
func (s *Store) compactionReserve() int64 {
	if s.db == nil {
		return 0
	}
	var n int64
	for _, t := range s.db.Tables() {
		if t.Level <= 1 {
			n += int64(t.OnDiskSize)
		}
	}
	return n
}

// checkSpaceToOpen refuses to open a store for writing on a disk without
// room for Badger to flush the memtables a crash left (which it does at
// once) and to start its new logs.
func checkSpaceToOpen(dir string) error {
	data := filepath.Join(dir, dataDir)
	free, ok := freeBytes(data)
	if !ok {
		return nil
	}
	need := (&Store{}).flushReserve(data) + 2*pageSlack + closeMargin
	if free < need {
		return &DiskFullError{Dir: dir, Free: free, Need: need}
	}
	return nil
}

// canFlush reports whether Close may let Badger flush the memtable.
func (s *Store) canFlush() bool {
	if s.dir == "" || s.readOnly {
		return true
	}
	data := filepath.Join(s.dir, dataDir)
	free, ok := freeBytes(data)
	return !ok || free >= s.flushReserve(data)+pageSlack
}
