package stop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
)

// maxProgressFiles bounds the files no_progress looks at in one workdir.
const maxProgressFiles = 20000

// racyWindow is how recent a file's mtime may be, relative to the moment
// its content was read, for the stat cache to distrust the hash next time.
// File timestamps come from a coarse clock (a kernel tick on Linux, whole
// seconds on some network and FAT file systems), so a second write in the
// same tick, of the same size, leaves size, mtime and possibly ctime as
// they were. Such a file is read again until its mtime is older than the
// last read by this much; 2 s covers every common granularity.
const racyWindow = 2 * time.Second

// fileState is what the stat cache knows of one file: its stat when its
// content was last hashed, and that hash.
type fileState struct {
	size, mtime, ctime int64
	ino                uint64
	mode               fs.FileMode
	sum                [sha256.Size]byte
	trusted            bool // mtime was older than the read by racyWindow
	seen               int  // the pass that last listed it
}

// workspace hashes the content of a workdir's files for no_progress. It
// keeps, per path, the stat and content hash of the last pass, and reads a
// file again only when its stat changed or the last read was racy, so an
// unchanged tree costs one listing and one lstat per file.
//
// A workspace is not safe for concurrent use; noProgress holds its lock.
type workspace struct {
	files map[string]*fileState
	pass  int
	buf   []byte
}

// tally is what one pass looked at.
type tally struct {
	files  int  // files hashed into the fingerprint
	read   int  // files whose content was read in this pass
	git    bool // listed by git ls-files
	capped bool // the listing was cut at maxProgressFiles
}

// hash adds every file of root (path and content) to f, in a stable order.
// In a git work tree the files are those git lists as tracked or untracked
// but not ignored, so .gitignore is honoured; otherwise the tree is walked.
// .git and the store directory are never part of it.
func (w *workspace) hash(ctx context.Context, root, storeDir string, f *fp) (tally, error) {
	if w.files == nil {
		w.files = map[string]*fileState{}
		w.buf = make([]byte, 64<<10)
	}
	w.pass++
	skip := storeSkipper(root, storeDir)
	var t tally
	if paths, ok := gitFiles(ctx, root); ok {
		t.git = true
		if err := w.addListed(ctx, root, paths, skip, f, &t); err != nil {
			return t, err
		}
	} else if err := w.walk(ctx, root, skip, f, &t); err != nil {
		return t, err
	}
	if ctx.Err() != nil {
		return t, ctx.Err()
	}
	for p, s := range w.files { // forget files that are gone, so the cache stays the size of the tree
		if s.seen != w.pass {
			delete(w.files, p)
		}
	}
	return t, nil
}

// addListed hashes the files git listed (slash-separated, relative to
// root), skipping repeats and the store, until maxProgressFiles or until
// ctx ends: a check past its timeout stops between files, as walk does.
func (w *workspace) addListed(ctx context.Context, root string, paths []string, skip func(string) bool, f *fp, t *tally) error {
	prev := ""
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == prev || p == "" || skip(p) || strings.HasSuffix(p, "/") { // a nested repo is listed as "dir/"
			continue
		}
		prev = p
		if t.files >= maxProgressFiles {
			t.capped = true
			return nil
		}
		if err := w.add(root, p, f, t); err != nil {
			return err
		}
	}
	return nil
}

// storeSkipper reports whether a slash-separated path relative to root is
// the store directory or inside it. With no store directory, ".ralph" (the
// default) is skipped.
func storeSkipper(root, storeDir string) func(rel string) bool {
	prefix := ".ralph"
	if storeDir != "" {
		prefix = ""
		store := resolve(root, storeDir)
		if rel, ok := inside(root, store); ok {
			prefix = rel
		} else if r, err := filepath.EvalSymlinks(root); err == nil { // /tmp and /private/tmp name one directory
			if s, err := filepath.EvalSymlinks(store); err == nil {
				prefix, _ = inside(r, s)
			}
		}
	}
	return func(rel string) bool {
		if prefix == "" || prefix == "." {
			return false
		}
		return rel == prefix || strings.HasPrefix(rel, prefix+"/")
	}
}

// inside returns path relative to root, slash-separated, when it is root
// or below it.
func inside(root, path string) (string, bool) {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// gitFiles lists the tracked and untracked, not ignored, files under dir
// when dir is inside a git work tree (`git ls-files -co --exclude-standard`,
// paths relative to dir, NUL-separated so no name is quoted).
func gitFiles(ctx context.Context, dir string) ([]string, bool) {
	var buf bytes.Buffer
	if _, err := (gitx.Cmd{Dir: dir, Args: []string{"ls-files", "-z", "-c", "-o", "--exclude-standard"}, Stdout: &buf}).Run(ctx); err != nil {
		return nil, false // not a work tree, or no git: walk instead
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte{0})
	if len(out) == 0 {
		return nil, true
	}
	return strings.Split(string(out), "\x00"), true
}

// walk lists root's files itself, in lexical order, skipping .git
// directories and the store.
func (w *workspace) walk(ctx context.Context, root string, skip func(string) bool, f *fp, t *tally) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // an unreadable directory cannot show progress either
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if path == root {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == ".git" || skip(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == ".git" || skip(rel) { // a worktree's .git is a file
			return nil
		}
		if t.files >= maxProgressFiles {
			t.capped = true
			return filepath.SkipAll
		}
		return w.add(root, rel, f, t)
	})
}

// add hashes one file's path and content into f: a regular file by the
// SHA-256 of its bytes, a symlink by its target, a missing file (tracked
// but deleted) as missing. Directories and special files add nothing.
func (w *workspace) add(root, rel string, f *fp, t *tally) error {
	path := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.str(rel)
		f.str("missing")
		t.files++
		return nil
	case err != nil:
		f.str(rel)
		f.str("unreadable: " + err.Error())
		t.files++
		return nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			target = "unreadable: " + err.Error()
		}
		f.str(rel)
		f.str("symlink " + target)
		t.files++
		return nil
	case !fi.Mode().IsRegular():
		return nil
	}
	s, err := w.content(rel, path, fi, t)
	f.str(rel)
	if err != nil {
		f.str("unreadable: " + err.Error())
	} else {
		f.u64(uint64(s.mode.Perm() & 0o111)) // an executable bit is part of the work, as git sees it
		for i := 0; i < len(s.sum); i += 8 {
			f.u64(uint64(s.sum[i]) | uint64(s.sum[i+1])<<8 | uint64(s.sum[i+2])<<16 | uint64(s.sum[i+3])<<24 |
				uint64(s.sum[i+4])<<32 | uint64(s.sum[i+5])<<40 | uint64(s.sum[i+6])<<48 | uint64(s.sum[i+7])<<56)
		}
	}
	t.files++
	return nil
}

// content returns the cached state of a regular file when its stat is the
// one its hash was taken at and that read was not racy; otherwise it reads
// the file again.
func (w *workspace) content(rel, path string, fi fs.FileInfo, t *tally) (*fileState, error) {
	ino, ctime := statIdentity(fi)
	cur := fileState{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ctime: ctime, ino: ino, mode: fi.Mode()}
	if s, ok := w.files[rel]; ok && s.trusted && s.size == cur.size && s.mtime == cur.mtime &&
		s.ctime == cur.ctime && s.ino == cur.ino && s.mode == cur.mode {
		s.seen = w.pass
		return s, nil
	}
	readAt := time.Now()
	sum, err := w.sha(path)
	if err != nil {
		delete(w.files, rel)
		return nil, err
	}
	t.read++
	cur.sum, cur.seen = sum, w.pass
	cur.trusted = readAt.Sub(fi.ModTime()) > racyWindow
	w.files[rel] = &cur
	return &cur, nil
}

func (w *workspace) sha(path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	file, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer file.Close()
	h := sha256.New()
	// The bare Reader keeps CopyBuffer on w.buf instead of *os.File's WriteTo.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{file}, w.buf); err != nil {
		return sum, fmt.Errorf("read %s: %w", path, err)
	}
	h.Sum(sum[:0])
	return sum, nil
}
