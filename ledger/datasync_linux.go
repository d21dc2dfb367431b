package ledger

import (
	"os"
	"syscall"
)

// datasync makes f's data durable (fdatasync: its size and blocks, not
// its times), which is all an overwrite in place needs.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
