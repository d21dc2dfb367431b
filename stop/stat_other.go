//go:build !linux

package stop

import "io/fs"

// statIdentity has no portable inode and ctime to offer; size, mtime and
// the racy-read rule still decide.
func statIdentity(fs.FileInfo) (ino uint64, ctime int64) { return 0, 0 }
