package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// precheck reads the manifest and opens every table it lists, as Badger's
// open is about to, but in this goroutine and with panics recovered.
// Badger opens tables in goroutines of its own, where a damaged table
// panics (table.initBiggestAndSmallest, reading an index past the file's
// end) beyond any recover of ours and kills the process; and it skips a
// table whose index fails its checksum, with a log line, losing what the
// table held. Here either is an error naming the file.
func precheck(bopts badger.Options, dir string) error {
	dataPath := bopts.Dir
	if err := checkLogHeaders(dataPath, dir); err != nil {
		return err
	}
	mpath := filepath.Join(dataPath, badger.ManifestFilename)
	f, err := os.Open(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new store
	}
	if err != nil {
		return fmt.Errorf("open ledger store %s: %w", dir, err)
	}
	defer f.Close()
	m, end, err := replayManifest(f, bopts)
	if err != nil {
		return damagedFileError(dir, mpath, err)
	}
	// Badger appends each change whole, with one write, so a kill leaves
	// none half written; a tail that does not read as a change is damage,
	// and Badger would cut it, and with it the tables it listed.
	if fi, err := f.Stat(); err == nil && fi.Size() > end {
		return damagedFileError(dir, mpath, fmt.Errorf("it reads whole up to byte %d of %d", end, fi.Size()))
	}
	if err := checkKeyRegistry(dataPath); err != nil {
		return damagedFileError(dir, filepath.Join(dataPath, badger.KeyRegistryFileName), err)
	}
	for id, tm := range m.Tables {
		path := table.NewFilename(id, dataPath)
		if err := checkTableOpens(path, tm.Compression, bopts); err != nil {
			return damagedFileError(dir, path, err)
		}
	}
	return nil
}

// damagedFileError names the damaged file of a store and what to do.
func damagedFileError(dir, file string, err error) error {
	return fmt.Errorf("ledger store %s is corrupted: %s cannot be read (%v); restore the store from a copy or a bundle", dir, file, err)
}

func replayManifest(f *os.File, bopts badger.Options) (m badger.Manifest, end int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s", strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	return badger.ReplayManifestFile(f, bopts.ExternalMagicVersion, bopts)
}

// checkKeyRegistry reads the key registry read-only, as Badger's open does.
func checkKeyRegistry(dataPath string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s", strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	kr, err := badger.OpenKeyRegistry(badger.KeyRegistryOptions{Dir: dataPath, ReadOnly: true})
	if err != nil {
		return err
	}
	return kr.Close()
}

// checkTableOpens opens one table read-only as Badger's open does (its
// index, smallest and biggest keys) and closes it.
func checkTableOpens(path string, c options.CompressionType, bopts badger.Options) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		if mf == nil {
			return err
		}
	}
	defer func() {
		if r := recover(); r != nil {
			// Badger's panic text spans lines and says little more.
			err = errors.New("its index is cut or damaged")
			mf.Close(-1)
		}
	}()
	t, err := table.OpenTable(mf, table.Options{
		ChkMode:     options.NoVerification,
		BlockSize:   bopts.BlockSize,
		Compression: c,
		TableSize:   uint64(bopts.BaseTableSize),
	})
	if err != nil {
		mf.Close(-1)
		return err
	}
	return t.MmapFile.Close(-1)
}

// logHeaderLen is the header every value log and memtable log begins with
// (a key id and an IV); Badger creates a log at its full size and writes
// the header at once, so a crash leaves a log empty or whole.
const logHeaderLen = 20

// checkLogHeaders refuses a log cut inside its header: Badger would fail
// an assertion on it, which ends the process.
func checkLogHeaders(dataPath, dir string) error {
	entries, err := os.ReadDir(dataPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open ledger store %s: %w", dir, err)
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext != ".mem" && ext != ".vlog" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if n := fi.Size(); n > 0 && n < logHeaderLen {
			return damagedFileError(dir, filepath.Join(dataPath, e.Name()), fmt.Errorf("it is %d bytes, shorter than the %d-byte header every log begins with", n, logHeaderLen))
		}
	}
	return nil
}
