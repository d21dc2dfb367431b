//go:build unix

package ledger

import "syscall"

// freeBytes returns the bytes an unprivileged writer may still use on
// path's filesystem.
func freeBytes(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// allocatedBytes returns the bytes path takes on disk (a sparse file
// takes only the blocks written).
func allocatedBytes(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}
