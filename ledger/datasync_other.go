//go:build !linux

package ledger

import "os"

// datasync makes f durable; without fdatasync, with fsync.
func datasync(f *os.File) error { return f.Sync() }
