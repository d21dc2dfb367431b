package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// verifyChecksums checks the block checksums of every table of the store
// (Badger's DB.VerifyChecksum). Badger dereferences a nil block while
// reporting a checksum failure, so a failure can surface as a panic; then
// each table file is opened on its own, read-only, with its checksums
// verified, to name the damaged ones.
func (s *Store) verifyChecksums() (err error) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		err = s.db.VerifyChecksum()
	}()
	if err == nil {
		return nil
	}
	if bad := s.damagedTables(); len(bad) > 0 {
		return fmt.Errorf("ledger store %s is corrupted: %s; restore it from a backup or a bundle", s.describe(), strings.Join(bad, "; "))
	}
	return fmt.Errorf("ledger store %s is corrupted: %v; restore it from a backup or a bundle", s.describe(), err)
}

// damagedTables names each table file whose checksums fail.
func (s *Store) damagedTables() []string {
	files, _ := filepath.Glob(filepath.Join(s.dir, dataDir, "*.sst"))
	sort.Strings(files)
	var bad []string
	for _, f := range files {
		if err := checkTableFile(f); err != nil {
			bad = append(bad, fmt.Sprintf("table %s fails its checksum (%v)", f, err))
		}
	}
	return bad
}

// checkTableFile opens one table read-only and verifies every block.
func checkTableFile(path string) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil && mf == nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	t, err := table.OpenTable(mf, table.Options{
		ChkMode:     options.OnTableRead,
		BlockSize:   4 << 10,
		Compression: options.Snappy,
	})
	if err != nil {
		return err
	}
	return t.MmapFile.Close(-1)
}
