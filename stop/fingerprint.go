package stop

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// fp is a 64-bit FNV-1a hash of the inputs a condition reads. It lives on
// the stack and never allocates.
type fp struct{ h uint64 }

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func newFP() fp { return fp{h: fnvOffset} }

func (f *fp) u64(v uint64) {
	for i := 0; i < 8; i++ {
		f.h ^= v & 0xff
		f.h *= fnvPrime
		v >>= 8
	}
}

func (f *fp) str(s string) {
	f.u64(uint64(len(s)))
	for i := 0; i < len(s); i++ {
		f.h ^= uint64(s[i])
		f.h *= fnvPrime
	}
}

func (f *fp) i64(v int64)      { f.u64(uint64(v)) }
func (f *fp) f64(v float64)    { f.u64(math.Float64bits(v)) }
func (f *fp) time(t time.Time) { f.i64(t.UnixNano()) }
func (f *fp) boolean(b bool) {
	if b {
		f.u64(1)
	} else {
		f.u64(0)
	}
}
func (f *fp) sum() uint64      { return f.h }
func (f *fp) stat(path string) { f.fileInfo(os.Stat(path)) }
func (f *fp) lastActions(in *Input) {
	f.u64(in.HeadSeq)
	f.i64(int64(in.Iteration))
	f.i64(int64(len(in.LastActions)))
	if n := len(in.LastActions); n > 0 {
		f.u64(in.LastActions[0].Seq)
		f.u64(in.LastActions[n-1].Seq)
	}
}

func (f *fp) fileInfo(fi os.FileInfo, err error) {
	if err != nil {
		f.str(err.Error())
		return
	}
	f.time(fi.ModTime())
	f.i64(fi.Size())
	f.u64(uint64(fi.Mode()))
}

// resolve makes p absolute against the workdir.
func resolve(workdir, p string) string {
	if filepath.IsAbs(p) || workdir == "" {
		return p
	}
	return filepath.Join(workdir, p)
}

// maxProgressFiles bounds the walk of the workdir for no_progress.
const maxProgressFiles = 20000

// skipDirs are never walked for no_progress: git's own database and the
// ledger, which change every iteration whether or not the work did.
var skipDirs = map[string]bool{".git": true, ".ralph": true}

// progressFingerprint is the no_progress fingerprint of one iteration: the
// hashes of the last iteration's action results, git HEAD and diff stat
// when the workdir is a git repo, and the mtimes of files under the workdir.
type progressFingerprint struct {
	sum     uint64
	results int    // action results hashed
	git     string // HEAD, short
	files   int    // files whose mtime was hashed
	capped  bool   // the walk stopped at maxProgressFiles
}

func (p progressFingerprint) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fingerprint %016x", p.sum)
	b.WriteString(" (" + strconv.Itoa(p.results) + " results")
	if p.git != "" {
		b.WriteString(", git " + p.git)
	}
	b.WriteString(", " + strconv.Itoa(p.files) + " files")
	if p.capped {
		b.WriteString(", walk capped")
	}
	b.WriteString(")")
	return b.String()
}

func fingerprintIteration(ctx context.Context, in *Input) (progressFingerprint, error) {
	f := newFP()
	var p progressFingerprint
	for i := range in.LastActions {
		a := &in.LastActions[i]
		if _, outcome := isOutcome(a); !outcome {
			continue
		}
		f.str(a.FunctionName)
		f.boolean(a.Success)
		f.str(a.ErrorMessage)
		f.u64(rtfs.Hash(stableResult(a)))
		p.results++
	}
	if in.Workdir != "" {
		if head, diff, ok := gitState(ctx, in.Workdir); ok {
			f.str(head)
			f.str(diff)
			p.git = head[:min(7, len(head))]
		}
		n, capped, err := hashTree(ctx, in.Workdir, &f)
		if err != nil {
			return p, err
		}
		p.files, p.capped = n, capped
	}
	p.sum = f.sum()
	return p, nil
}

// stableResult drops what changes on every run of the same work: the
// :duration-ms of shell results.
func stableResult(a *ledger.Action) rtfs.Value {
	m := a.Result.AsMap()
	if a.Result.Kind() != rtfs.KindMap || m == nil {
		return a.Result
	}
	if _, ok := m.Get(rtfs.Keyword("duration-ms")); !ok {
		return a.Result
	}
	return rtfs.MapValue(m.Dissoc(rtfs.Keyword("duration-ms")))
}

// gitState returns HEAD and `git diff --stat` when dir is inside a git
// work tree.
func gitState(ctx context.Context, dir string) (head, diff string, ok bool) {
	run := func(args ...string) (string, bool) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	head, ok = run("rev-parse", "HEAD")
	if !ok {
		return "", "", false
	}
	diff, _ = run("diff", "--stat", "HEAD") // a failure leaves diff empty; HEAD still counts
	return head, diff, true
}

// hashTree adds the path, size and mtime of every regular file under root.
func hashTree(ctx context.Context, root string, f *fp) (n int, capped bool, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // unreadable entries are skipped; they cannot show progress either
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if path != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if n >= maxProgressFiles {
			capped = true
			return filepath.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil // vanished since listed
		}
		f.str(path)
		f.fileInfo(fi, nil)
		n++
		return nil
	})
	return n, capped, err
}
