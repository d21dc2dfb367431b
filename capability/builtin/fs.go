package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// MaxReadBytes bounds fs.read.
const MaxReadBytes = 16 << 20

// EscapeError reports a path that would leave the workdir.
type EscapeError struct {
	Path, Why string
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("path %q is refused: %s; use a path inside the workdir", e.Path, e.Why)
}

// RTFSType names the error in RTFS catch maps.
func (e *EscapeError) RTFSType() string { return "governance/path-escape" }

// relInside turns p into a clean path relative to workdir, refusing ".."
// components and absolute paths outside workdir. Symlinks are checked when
// the path is opened through an os.Root.
func relInside(workdir, p string) (string, error) {
	if p == "" {
		return "", &EscapeError{p, "it is empty"}
	}
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(workdir, filepath.Clean(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", &EscapeError{p, "it is an absolute path outside the workdir"}
		}
		return rel, nil
	}
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return "", &EscapeError{p, `it contains ".."`}
		}
	}
	return filepath.Clean(p), nil
}

// unwrapPathError turns os.Root's escape errors into EscapeErrors and strips
// the absolute path os errors carry.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if strings.Contains(pe.Err.Error(), "escapes") {
			return &EscapeError{pe.Path, "a symlink leads outside the workdir"}
		}
		return pe.Err
	}
	return err
}

type files struct {
	workdir string
}

func (f *files) root() (*os.Root, error) {
	r, err := os.OpenRoot(f.workdir)
	if err != nil {
		return nil, fmt.Errorf("open workdir %s: %w", f.workdir, err)
	}
	return r, nil
}

// fileRows are fs.read, fs.write and fs.list: each handler resolves its
// path inside the host's workdir.
func fileRows() []row {
	handler := func(m func(*files) capability.Handler) func(h *host) capability.Handler {
		return func(h *host) capability.Handler { return m(&files{workdir: h.workdir}) }
	}
	return []row{
		{
			spec: &capability.Spec{
				ID: "fs.read", Version: "1.0.0", Description: "Read a text file inside the workdir.",
				Input:        rtfs.MustParseType("[:map [:path :string]]"),
				Output:       rtfs.MustParseType(":string"),
				Effects:      []capability.Effect{{Kind: "fs", Params: rtfs.NewMap(rtfs.Keyword("read"), rtfs.True)}},
				Risk:         capability.RiskLow,
				Examples:     []string{`(call :fs.read {:path "README.md"})`},
				EchoesStored: true,
			},
			handler: handler(func(f *files) capability.Handler { return f.read }),
		},
		{
			spec: &capability.Spec{
				ID: "fs.write", Version: "1.0.0", Description: "Write (or append to) a file inside the workdir, creating parent directories.",
				Input:    rtfs.MustParseType("[:map [:path :string] [:content :string] [:append {:optional true} :boolean]]"),
				Output:   rtfs.MustParseType("[:map [:path :string] [:bytes :int]]"),
				Effects:  []capability.Effect{{Kind: "fs", Params: rtfs.NewMap(rtfs.Keyword("write"), rtfs.True)}},
				Risk:     capability.RiskMedium,
				Examples: []string{`(call :fs.write {:path "notes.txt" :content "done"})`},
			},
			handler: handler(func(f *files) capability.Handler { return f.write }),
		},
		{
			spec: &capability.Spec{
				ID: "fs.list", Version: "1.0.0", Description: "List a directory inside the workdir, sorted by name.",
				Input:        rtfs.MustParseType("[:map [:path :string]]"),
				Output:       rtfs.MustParseType("[:vector [:map [:name :string] [:dir :boolean] [:size :int]]]"),
				Effects:      []capability.Effect{{Kind: "fs", Params: rtfs.NewMap(rtfs.Keyword("read"), rtfs.True)}},
				Risk:         capability.RiskLow,
				Examples:     []string{`(call :fs.list {:path "."})`},
				EchoesStored: true,
			},
			handler: handler(func(f *files) capability.Handler { return f.list }),
		},
	}
}

func (f *files) open(p string) (*os.Root, string, error) {
	rel, err := relInside(f.workdir, p)
	if err != nil {
		return nil, "", err
	}
	r, err := f.root()
	if err != nil {
		return nil, "", err
	}
	return r, rel, nil
}

func (f *files) read(_ context.Context, in rtfs.Value) (capability.Result, error) {
	p := in.AsMap().GetKey("path").Str()
	r, rel, err := f.open(p)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.read: %w", err)
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.read %s: %w", p, unwrapPathError(err))
	}
	if fi.Size() > MaxReadBytes {
		return capability.Result{}, fmt.Errorf("fs.read %s: file is %d bytes, over the %d-byte limit", p, fi.Size(), MaxReadBytes)
	}
	data, err := r.ReadFile(rel)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.read %s: %w", p, unwrapPathError(err))
	}
	return capability.Result{Value: rtfs.String(string(data))}, nil
}

func (f *files) write(_ context.Context, in rtfs.Value) (capability.Result, error) {
	m := in.AsMap()
	p := m.GetKey("path").Str()
	r, rel, err := f.open(p)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.write: %w", err)
	}
	defer r.Close()
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return capability.Result{}, fmt.Errorf("fs.write %s: %w", p, unwrapPathError(err))
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if m.GetKey("append").Truthy() {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	fh, err := r.OpenFile(rel, flags, 0o644)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.write %s: %w", p, unwrapPathError(err))
	}
	content := m.GetKey("content").Str()
	n, werr := fh.WriteString(content)
	cerr := fh.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return capability.Result{}, fmt.Errorf("fs.write %s: %w", p, err)
	}
	return capability.Result{Value: rtfs.MapValue(rtfs.NewMap(
		rtfs.Keyword("path"), rtfs.String(p), rtfs.Keyword("bytes"), rtfs.Int(int64(n))))}, nil
}

func (f *files) list(_ context.Context, in rtfs.Value) (capability.Result, error) {
	p := in.AsMap().GetKey("path").Str()
	r, rel, err := f.open(p)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.list: %w", err)
	}
	defer r.Close()
	dir, err := r.Open(rel)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.list %s: %w", p, unwrapPathError(err))
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return capability.Result{}, fmt.Errorf("fs.list %s: %w", p, unwrapPathError(err))
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	out := make([]rtfs.Value, 0, len(entries))
	for _, e := range entries {
		var size int64
		if info, err := e.Info(); err == nil {
			size = info.Size()
		}
		out = append(out, rtfs.MapValue(rtfs.NewMap(
			rtfs.Keyword("name"), rtfs.String(e.Name()),
			rtfs.Keyword("dir"), rtfs.Bool(e.IsDir()),
			rtfs.Keyword("size"), rtfs.Int(size))))
	}
	return capability.Result{Value: rtfs.Vector(out)}, nil
}
