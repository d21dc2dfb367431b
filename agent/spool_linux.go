package agent

import (
	"os"
	"syscall"
)

// Linux fallocate(2) modes: keep the file's size, free the range's blocks.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
)

// releaseRead frees the disk blocks of the first n bytes of f, which were
// read. A filesystem that cannot punch holes keeps them until the file is
// closed (it has no name: its space comes back then).
func releaseRead(f *os.File, n int64) {
	_ = syscall.Fallocate(int(f.Fd()), fallocKeepSize|fallocPunchHole, 0, n)
}
