package stop

import (
	"math"
	"os"
	"path/filepath"
	"time"
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
