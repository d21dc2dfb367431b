package agent

import (
	"errors"
	"os"
	"syscall"
)

// Linux fallocate(2) modes: keep the file's size, free the range's blocks.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
)

// releaseRead frees the disk blocks of the first n bytes of f, which were
// read. unsupported: the file system cannot punch holes, and keeps them
// until the file is closed (it has no name: its space comes back then).
func releaseRead(f *os.File, n int64) (unsupported bool, err error) {
	err = withFD(f, func(fd int) error { return fallocate(fd, fallocKeepSize|fallocPunchHole, 0, n) })
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return true, nil
	}
	return false, err
}

// hasRoom says whether a writer of f, which shares this process's user
// and so its reserve of the disk, could write past its end: it allocates
// the block after the last one the file has begun (fallocate, keeping the
// size, so the writer's next writes land in it; the rest of a begun block
// needs no room). ENOSPC or EDQUOT there is the error; so is any other
// failure but a file system that cannot allocate ahead, which is asked
// for its free blocks instead.
func hasRoom(f *os.File) error {
	return withFD(f, func(fd int) error {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return err
		}
		bs := max(int64(st.Blksize), 1)
		err := fallocate(fd, fallocKeepSize, (st.Size+bs-1)/bs*bs, 1)
		if !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.ENOSYS) {
			return err
		}
		var fs syscall.Statfs_t
		if err := syscall.Fstatfs(fd, &fs); err != nil {
			return err
		}
		if fs.Bavail == 0 {
			return syscall.ENOSPC
		}
		return nil
	})
}

// withFD runs op on f's descriptor, which a Close from another goroutine
// cannot take away meanwhile (os.File.Fd could); a closed f is
// os.ErrClosed.
func withFD(f *os.File, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = op(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

// fallocate is fallocate(2), tried again when a signal interrupted it.
func fallocate(fd int, mode uint32, off, n int64) error {
	for {
		err := syscall.Fallocate(fd, mode, off, n)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
