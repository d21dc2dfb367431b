//go:build unix

package ledger

import "syscall"

// freeBytes returns the bytes an unprivileged writer may still use on
// path's filesystem.
func freeBytes(path string) (int64, bool) {
	free, _, ok := statFS(path)
	return free, ok
}

// statFS returns the bytes an unprivileged writer may still use on path's
// filesystem, and whether that filesystem is mounted read-only (or was
// turned read-only after an error).
func statFS(path string) (free int64, readOnly, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false, false
	}
	return int64(st.Bavail) * int64(st.Bsize), st.Flags&stRdOnly != 0, true
}

// stRdOnly is statfs's ST_RDONLY mount flag.
const stRdOnly = 0x1

// statID returns the device and inode of path.
func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
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
