package ledger

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The tail of a Badger log that a writer's open would discard.
//
// Badger replays each memtable log (.mem) entry by entry and keeps it up
// to the end of the last whole transaction; a writer's open then cuts the
// file there, and what followed is gone. A process killed in the middle
// of a commit leaves such a tail, harmless: part of a transaction that was
// never acknowledged, then the zeros Badger wrote ahead of it. Damage
// leaves another: an entry that fails its checksum, and after it the whole
// commits that were acknowledged and are now discarded with it. readLogTail
// tells the two apart by reading on past the damage.
//
// The entry format is Badger's (v4, value.go and memtable.go): a header
// (meta byte, user-meta byte, uvarint key length, uvarint value length,
// uvarint expiry), the key (the user key then 8 bytes of version), the
// value, and a big-endian CRC-32 (Castagnoli) of all that. The entries of
// a transaction carry bitTxn; the transaction ends with an entry carrying
// bitFinTxn whose key is !badger!txn.

// Bits of an entry's meta byte, as Badger sets them (value.go).
const (
	logBitTxn    = 1 << 6
	logBitFinTxn = 1 << 7
	// logKnownBits are every bit Badger defines; an entry with another
	// set is not one of its entries.
	logKnownBits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | logBitTxn | logBitFinTxn
	// logMaxKey is the longest key Badger reads back (safeRead.Entry).
	logMaxKey  = 1 << 16
	logVersion = 8 // the bytes of version after each user key
)

// logEntry is one entry read from a log.
type logEntry struct {
	meta  byte
	key   []byte // the user key, without its version
	value []byte
}

// entryState says what decodeLogEntry found.
type entryState int

const (
	entryOK    entryState = iota // a whole entry whose checksum holds
	entryBad                     // a whole entry whose checksum fails
	entryShort                   // a header whose entry runs past the bytes given
	entryNone                    // no header of an entry
)

// decodeLogEntry reads the entry at the start of b: what it is and, for a
// whole entry (entryOK or entryBad), its length.
func decodeLogEntry(b []byte) (logEntry, int, entryState) {
	if len(b) < 2 || b[0]&^logKnownBits != 0 {
		return logEntry{}, 0, entryNone
	}
	i := 2
	var v [3]uint64
	for j := range v {
		n, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return logEntry{}, 0, entryNone
		}
		v[j], i = n, i+k
	}
	klen, vlen := v[0], v[1]
	if klen < logVersion || klen > logMaxKey {
		return logEntry{}, 0, entryNone
	}
	if vlen > uint64(len(b)) || uint64(i)+klen+vlen+4 > uint64(len(b)) {
		return logEntry{}, 0, entryShort
	}
	end := i + int(klen) + int(vlen)
	e := logEntry{meta: b[0], key: b[i : i+int(klen)-logVersion], value: b[i+int(klen) : end]}
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return e, end + 4, entryBad
	}
	return e, end + 4, entryOK
}

// LogTail is the part of a Badger log past what Badger reads whole, when
// it holds commits that were made: a writer's open would discard them.
type LogTail struct {
	File string // the log file
	End  int64  // Badger reads the file whole up to this byte
	Used int64  // one past the file's last byte that is not zero
	// Commits counts the whole commits read after the damage.
	Commits int
	// First and Last are the lowest and highest seq of the actions read
	// in the tail (0 when no action was read in it).
	First, Last uint64
}

// Seqs says which actions the tail holds: "seqs 41–57", or "no action
// that reads" when none of its entries named one.
func (t LogTail) Seqs() string {
	switch {
	case t.First == 0:
		return "no action that reads"
	case t.First == t.Last:
		return fmt.Sprintf("seq %d", t.First)
	}
	return fmt.Sprintf("seqs %d–%d", t.First, t.Last)
}

func (t LogTail) String() string {
	what := "commits"
	if filepath.Ext(t.File) == ".vlog" {
		what = "values" // a value log's entries stand alone
	}
	return fmt.Sprintf("%s reads whole up to byte %d of %d; after the damage it holds %d whole %s (%s)",
		t.File, t.End, t.Used, t.Commits, what, t.Seqs())
}

// tailScan is readLogTail's walk over the bytes after the cut.
type tailScan struct {
	tail     LogTail
	badWhole bool // the first entry that failed is whole: damage, not a write cut short
	failed   bool // an entry failed
	// badSeqs are the seqs the keys of whole entries that fail their
	// checksum name: counted in the tail when no higher than its last
	// seq read whole (a damaged key may name any seq).
	badSeqs []uint64
}

// readLogTail reads the log at path past byte end, where Badger stops
// reading it, and reports whether the bytes there are damage hiding whole
// commits (lost) rather than a commit a kill cut short.
func readLogTail(path string, end int64) (tail LogTail, lost bool, err error) {
	used, err := lastNonZero(path)
	if err != nil || used <= end {
		return LogTail{File: path, End: end, Used: used}, false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return LogTail{}, false, err
	}
	defer f.Close()
	b := make([]byte, used-end)
	if _, err := f.ReadAt(b, end); err != nil && err != io.EOF {
		return LogTail{}, false, err
	}
	sc := tailScan{tail: LogTail{File: path, End: end, Used: used}}
	sc.walk(b)
	for _, seq := range sc.badSeqs {
		if seq <= sc.tail.Last {
			sc.tail.First = min(sc.tail.First, seq)
		}
	}
	return sc.tail, sc.tail.Commits > 0 || sc.badWhole, nil
}

// walk reads the entries of b in order. Past an entry whose checksum
// fails it goes on at the end the entry's header gives, if an entry
// starts there; else, and past bytes that are no entry, it looks for the
// next entry byte by byte. Work is bounded: each offset is tried once, and
// checksums are computed over at most 64 times len(b) bytes in all.
func (sc *tailScan) walk(b []byte) {
	budget := 64 * len(b)
	for pos := 0; pos < len(b) && budget > 0; {
		e, n, st := decodeLogEntry(b[pos:])
		budget -= n
		switch {
		case st == entryOK:
			sc.note(e)
			pos += n
			continue
		case st == entryBad && !sc.failed:
			sc.badWhole = true
		}
		sc.failed = true
		if st == entryBad {
			if seq, ok := parseActionKey(e.key); ok && seq > 0 {
				sc.badSeqs = append(sc.badSeqs, seq)
			}
			_, m, next := decodeLogEntry(b[pos+n:])
			budget -= m
			if next == entryOK {
				pos += n
				continue
			}
		}
		pos++
	}
}

// note counts a whole entry read after the cut: a commit when it ends a
// transaction (or stands alone), and the seq of the action or head it
// records.
func (sc *tailScan) note(e logEntry) {
	t := &sc.tail
	if e.meta&logBitFinTxn != 0 || e.meta&logBitTxn == 0 && !strings.HasPrefix(string(e.key), "!badger!") {
		t.Commits++
	}
	seq, ok := parseActionKey(e.key)
	if !ok && string(e.key) == keyHead {
		h, err := decodeHead(e.value)
		seq, ok = h.Seq, err == nil && h.Seq > 0
	}
	if !ok {
		return
	}
	if t.First == 0 || seq < t.First {
		t.First = seq
	}
	t.Last = max(t.Last, seq)
}

// TailError reports a store whose memtable logs hold whole commits after
// damage: Badger reads each log only up to the damage, and a writer's open
// would cut the rest off for good. A writer's Open returns such a store
// open read-only, refusing every append with this error; Verify names it.
type TailError struct {
	Store string    // the store directory
	Head  uint64    // the last action that reads whole
	Tails []LogTail // the damaged logs
}

func (e *TailError) Error() string {
	return fmt.Sprintf("ledger store %s is open read-only and refuses to write, because it has %s; %s",
		e.Store, tailSentence(e.Tails), tailFix(e.Head))
}

// tailFix says what to do about damaged logs, when head actions read.
func tailFix(head uint64) string {
	return fmt.Sprintf("restore the store from a copy, or carry the %s actions that read into a new store with ralph chain export --bundle and ralph chain import", thousands(head))
}

// tailSentence says what the damaged logs tails lose: "a damaged log:
// … holds 3 whole commits (seqs 41–57), which a writer's open would
// discard".
func tailSentence(tails []LogTail) string {
	parts := make([]string, len(tails))
	for i, t := range tails {
		parts[i] = t.String()
	}
	what := "a damaged log"
	if len(tails) > 1 {
		what = fmt.Sprintf("%d damaged logs", len(tails))
	}
	return what + ": " + strings.Join(parts, "; ") + ", which a writer's open would discard"
}

// LostTails returns the damaged tails of the store's logs that a writer's
// open would discard (nil when there are none, or when the store was not
// opened read-only from a store a process left unclosed).
func (s *Store) LostTails() []LogTail {
	if s.scratch == nil {
		return nil
	}
	return s.scratch.cut
}

// firstLost is the seq at which the tails' loss shows: their first action,
// or the one after the head when no action in them reads.
func firstLost(head uint64, tails []LogTail) uint64 {
	first := uint64(0)
	for _, t := range tails {
		if t.First > 0 && (first == 0 || t.First < first) {
			first = t.First
		}
	}
	if first == 0 {
		first = head + 1
	}
	return first
}

// The newest value log (.vlog) holds the values too large for the
// memtable log (over 1 MiB), one entry each, without transaction marks; a
// writer's open reads it from its header on and cuts it at the first entry
// that does not read whole (badger v4 valueLog.open). Badger's read-only
// mode does not read it, so the view does (valueLogTail).

// valueLogTail reads the newest value log of dataPath as a writer's open
// would, and returns its tail when what follows the cut is damage hiding
// whole entries (readLogTail).
func valueLogTail(dataPath string) (LogTail, bool, error) {
	path, err := newestValueLog(dataPath)
	if err != nil || path == "" {
		return LogTail{}, false, err
	}
	end, err := valueLogEnd(path)
	if err != nil {
		return LogTail{}, false, err
	}
	return readLogTail(path, end)
}

// newestValueLog is the value log of dataPath with the highest file id
// ("" when there is none).
func newestValueLog(dataPath string) (string, error) {
	names, err := filepath.Glob(filepath.Join(dataPath, "*.vlog"))
	if err != nil {
		return "", err
	}
	best, bestID := "", -1
	for _, n := range names {
		id, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(n), ".vlog"))
		if err == nil && id > bestID {
			best, bestID = n, id
		}
	}
	return best, nil
}

// valueLogEnd is the offset after the last of the value log's entries
// that read whole from its header on: where a writer's open cuts it. It
// reads one entry at a time, so memory stays within the largest entry.
func valueLogEnd(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var head [2 + 3*binary.MaxVarintLen64]byte
	var buf []byte
	off := int64(logHeaderLen)
	for {
		n, err := f.ReadAt(head[:], off)
		if err != nil && err != io.EOF {
			return 0, err
		}
		size := entrySize(head[:n])
		if size == 0 || off+int64(size) > fi.Size() {
			return off, nil // no entry, or one the file cannot hold
		}
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if m, err := f.ReadAt(buf, off); m < size {
			if err != nil && err != io.EOF {
				return 0, err
			}
			return off, nil // the file ends inside the entry
		}
		if _, _, st := decodeLogEntry(buf); st != entryOK {
			return off, nil
		}
		off += int64(size)
	}
}

// entrySize is the whole length of the entry whose header starts b (0
// when b holds no header).
func entrySize(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	i := 2
	var v [3]uint64
	for j := range v {
		n, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return 0
		}
		v[j], i = n, i+k
	}
	if v[0] > logMaxKey || v[1] > 1<<30 { // 1 GiB: beyond any value log, and within a 32-bit int
		return 0
	}
	return i + int(v[0]) + int(v[1]) + 4
}
