package tasks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// fileSource is what the file sources (prd, checklist) share: where their
// file is.
type fileSource struct {
	spec Spec
	root string // the repository's root, absolute
	rel  string // the file relative to root, with the OS's separators
}

// openFile places a file source's path inside the repository: relative
// paths are relative to the root, and the file (through any symlink) must
// lie inside it, since its change rides in the task's merge commit.
func openFile(s Spec, o Options) (fileSource, error) {
	if o.Root == "" {
		return fileSource{}, errors.New("no repository root given (Options.Root)")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return fileSource{}, err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	p := s.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	} else if !errors.Is(err, os.ErrNotExist) {
		return fileSource{}, err
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fileSource{}, fmt.Errorf("%s is not a file inside the repository %s: a %s's tasks are marked done in their merge commits, so its file must be one of the repository's (move it there, or give a path relative to the repository's root)", s.Path, root, s.Kind.Name)
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fileSource{}, fmt.Errorf("%s does not exist (paths are relative to the repository's root, %s)", s.Path, root)
	case err != nil:
		return fileSource{}, err
	case !fi.Mode().IsRegular():
		return fileSource{}, fmt.Errorf("%s is not a regular file", s.Path)
	}
	return fileSource{spec: s, root: root, rel: rel}, nil
}

func (f fileSource) String() string { return f.spec.String() }
func (f fileSource) File() string   { return filepath.ToSlash(f.rel) }

// read reads the file's copy under dir (the root for List, a merge
// checkout for MarkDone); name is how errors name it.
func (f fileSource) read(dir string) (src []byte, path, name string, err error) {
	path = filepath.Join(dir, f.rel)
	name = f.spec.Path
	if dir != f.root {
		name = path
	}
	src, err = os.ReadFile(path)
	if err != nil {
		return nil, path, name, fmt.Errorf("read %s: %w", name, err)
	}
	return src, path, name, nil
}

// writeAtomic replaces path's content with data: written to a temporary
// file beside it, synced, given path's mode, and renamed over it, so a
// reader sees the old file or the new one, never a part.
func writeAtomic(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".ralph-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()           // the write already failed; this error adds nothing
			_ = os.Remove(tmp.Name()) // best effort: a leftover temp file is harmless
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the rename is made; a directory that cannot sync loses durability, not data
		_ = d.Close()
	}
	return nil
}

// lines finds the line and column of byte offsets in one file: it notes
// where each line starts once, so each position costs a binary search.
type lines struct {
	name   string
	src    []byte
	starts []int
}

func newLines(name string, src []byte) *lines {
	l := &lines{name: name, src: src, starts: []int{0}}
	for i, c := range src {
		if c == '\n' {
			l.starts = append(l.starts, i+1)
		}
	}
	return l
}

// pos is the Pos of byte offset off: 1-based line and column, the column
// counted in characters.
func (l *lines) pos(off int) Pos {
	off = min(max(off, 0), len(l.src))
	n, _ := slices.BinarySearch(l.starts, off+1) // the lines starting at or before off
	start := l.starts[n-1]
	return Pos{File: l.name, Line: n, Col: utf8.RuneCount(l.src[start:off]) + 1}
}
