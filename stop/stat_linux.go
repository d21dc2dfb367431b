//go:build linux

package stop

import (
	"io/fs"
	"syscall"
)

// statIdentity returns the inode and ctime of fi: a file replaced by a
// rename, or whose mtime was set back, still looks changed.
func statIdentity(fi fs.FileInfo) (ino uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Ino, st.Ctim.Nano()
}
