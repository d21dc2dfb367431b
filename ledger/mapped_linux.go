//go:build linux

package ledger

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ReleaseMapped drops this process's page mappings of the store's files.
// Badger memory-maps its tables and value logs, so a long read (a full
// scan, `ralph view` of a million actions) leaves every page it touched
// counted in the process's resident memory although the kernel could
// reclaim it. The mappings are shared and file-backed, so dropping them
// loses nothing: a later access faults the page back from the page cache
// or the file. Safe to call at any time; it is a hint, not a guarantee.
func (s *Store) ReleaseMapped() error {
	dir, err := filepath.Abs(s.dir)
	if err != nil {
		return err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], dir+string(filepath.Separator)) || !strings.Contains(fields[1], "s") {
			continue // only the store's shared mappings
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// MADV_DONTNEED on a shared file mapping only unmaps the pages;
		// their contents (dirty ones included) stay in the page cache.
		syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
	}
	return sc.Err()
}
