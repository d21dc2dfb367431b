package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// A read-only view of a store that a killed process left.
//
// Badger replays each memtable log (.mem) when it opens, and a writer open
// cuts every log back to the last entry that reads whole: the zero tail a
// killed process leaves, but also everything after a damaged entry, which
// is lost for good once cut. Badger's read-only mode refuses a log that
// needs cutting (ErrTruncateNeeded), so a view reads such a store through a
// directory of its own: a symbolic link to every file of the store, except
// each log that needs cutting, which is a copy of the part Badger keeps.
// Nothing of the store is written, and Open can compare what a writer would
// keep with the witness before anything is cut.

// view is the scratch directory a read-only store reads through.
type view struct {
	dir  string    // the scratch directory ("" when Badger reads the store itself)
	lock *os.File  // a shared lock on the store's data directory, held while the view is open
	cut  []LogTail // the logs Badger would cut that hold commits after damage (waltail.go)
}

// close releases the view's lock and removes its directory.
func (v *view) close() error {
	if v == nil {
		return nil
	}
	var err error
	if v.lock != nil {
		err = v.lock.Close()
	}
	if v.dir != "" {
		if rerr := os.RemoveAll(v.dir); err == nil {
			err = rerr
		}
	}
	return err
}

// truncateNeeded matches Badger's ErrTruncateNeeded as it wraps it:
// "while opening fid: 3 err: while updating skiplist err: end offset: 1234 < size: 67108864 err: …".
var truncateNeeded = regexp.MustCompile(`fid: (\d+)\b.*end offset: (\d+) < size: (\d+)`)

// openView opens the store in dataPath read-only, through a view when a
// log needs cutting. The caller closes the view after the DB.
func openView(bopts badger.Options, dir, dataPath string) (*badger.DB, *view, error) {
	if !hasLog(dataPath) {
		db, err := openBadger(bopts, dir)
		if err == nil || !strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()) {
			return db, nil, err
		}
	}
	v := &view{}
	n, err := v.fill(dir, dataPath)
	if err != nil {
		v.close()
		return nil, nil, err
	}
	// Each failed open names one log to cut; there are at most a few.
	db, err := v.open(bopts, dir, dataPath, n+1)
	if err == nil {
		err = v.checkValueLog(dataPath)
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		v.close()
		return nil, nil, err
	}
	return db, v, nil
}

// fill takes a shared lock on the store's data directory and makes the
// view's scratch directory with an entry for each of its files (add). It
// returns how many entries the data directory has.
func (v *view) fill(dir, dataPath string) (int, error) {
	var err error
	if v.lock, err = lockShared(dataPath); err != nil {
		return 0, err
	}
	if v.dir, err = os.MkdirTemp("", "ralph-view-"); err != nil {
		return 0, fmt.Errorf("open ledger store %s read-only: make a scratch directory for the logs a crash left: %w", dir, err)
	}
	entries, err := os.ReadDir(dataPath)
	if err != nil {
		return 0, fmt.Errorf("open ledger store %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := v.add(dataPath, e); err != nil {
			return 0, fmt.Errorf("open ledger store %s read-only: %w", dir, err)
		}
	}
	return len(entries), nil
}

// add puts the data directory's file e in the view: a copy of the part
// written of a log, a symbolic link to anything else; nothing for the
// LOCK file, what is not a regular file, or an empty log.
func (v *view) add(dataPath string, e fs.DirEntry) error {
	fi, err := e.Info()
	if err != nil || !fi.Mode().IsRegular() || e.Name() == "LOCK" {
		return nil
	}
	ext := filepath.Ext(e.Name())
	if fi.Size() == 0 && (ext == ".mem" || ext == ".vlog") {
		return nil // a log a crash left before sizing it: it holds nothing
	}
	src, dst := filepath.Join(dataPath, e.Name()), filepath.Join(v.dir, e.Name())
	if ext == ".mem" {
		// A copy of the part written, so that Badger maps no file of
		// the store that it may fail to open (it leaves such maps).
		n, err := lastNonZero(src)
		if err == nil {
			// At least the header: a process killed before writing it
			// leaves zeros, which read as an empty log.
			err = copyPrefix(src, dst, min(max(n, logHeaderLen), fi.Size()))
		}
		return err
	}
	return os.Symlink(src, dst)
}

// open opens Badger read-only on the view, at most tries times: after
// each open that fails naming a log to cut, the view holds that log cut
// (cutLog). The error of the last try names the store's files.
func (v *view) open(bopts badger.Options, dir, dataPath string, tries int) (*badger.DB, error) {
	var err error
	for range tries {
		var db *badger.DB
		if db, err = openBadger(bopts.WithDir(v.dir).WithValueDir(v.dir), dir); err == nil {
			return db, nil
		}
		m := truncateNeeded.FindStringSubmatch(err.Error())
		if m == nil {
			break
		}
		if err := v.cutLog(dataPath, m); err != nil {
			return nil, fmt.Errorf("open ledger store %s read-only: %w", dir, err)
		}
	}
	// Name the store's files, not their links in the scratch directory.
	return nil, errors.New(strings.ReplaceAll(err.Error(), v.dir, dataPath))
}

// cutLog puts in the view the part of the log that Badger's error m
// (truncateNeeded's match) says reads whole, and notes the log in v.cut
// when what follows that part holds commits after damage (readLogTail),
// not a commit a kill cut short.
func (v *view) cutLog(dataPath string, m []string) error {
	fid, _ := strconv.Atoi(m[1])
	end, _ := strconv.ParseInt(m[2], 10, 64)
	name := fmt.Sprintf("%05d.mem", fid)
	if err := copyPrefix(filepath.Join(dataPath, name), filepath.Join(v.dir, name), end); err != nil {
		return err
	}
	tail, lost, err := readLogTail(filepath.Join(dataPath, name), end)
	if err != nil {
		return fmt.Errorf("read the tail of %s: %w", filepath.Join(dataPath, name), err)
	}
	if lost {
		v.cut = append(v.cut, tail)
	}
	return nil
}

// checkValueLog notes the newest value log in v.cut when a writer's open
// would cut whole values off it after damage (valueLogTail).
func (v *view) checkValueLog(dataPath string) error {
	tail, lost, err := valueLogTail(dataPath)
	if err != nil {
		return fmt.Errorf("read the value log of %s: %w", dataPath, err)
	}
	if lost {
		v.cut = append(v.cut, tail)
	}
	return nil
}

// copyPrefix replaces the link dst with a copy of src's first n bytes.
func copyPrefix(src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, n)); err != nil {
		out.Close()
		return fmt.Errorf("copy the readable part of %s: %w", src, err)
	}
	return out.Close()
}

// hasLog reports whether dataPath holds a memtable log (.mem) or an empty
// value log: what a killed process leaves, and what Badger's read-only mode
// cannot open (a log that needs cutting, an empty file it would size).
// A store closed cleanly has neither.
func hasLog(dataPath string) bool {
	entries, _ := os.ReadDir(dataPath)
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if ext == ".mem" {
			return true
		}
		if fi, err := e.Info(); err == nil && ext == ".vlog" && fi.Size() == 0 {
			return true
		}
	}
	return false
}

// lastNonZero returns one past the last byte of path that is not zero:
// the part of a log Badger wrote (it creates logs sparse and writes them
// from the start).
func lastNonZero(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf, zero := make([]byte, 1<<20), make([]byte, 4<<10)
	for end := fi.Size(); end > 0; {
		start := max(end-int64(len(buf)), 0)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		// Whole blocks of zeros first (a log is mostly its zeroed room),
		// then byte by byte within the last block that is not.
		for len(b) >= len(zero) && bytes.Equal(b[len(b)-len(zero):], zero) {
			b = b[:len(b)-len(zero)]
		}
		for j := len(b) - 1; j >= 0; j-- {
			if b[j] != 0 {
				return start + int64(j) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}
