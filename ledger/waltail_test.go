package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/eventually"
)

// liveStoreCopy records two iterations (the end of each witnessed) and
// then extra actions, one commit each, in a store with a witness, and
// returns copies of the store and of its witness directory taken while it
// is open: what a kill leaves. Its memtable log mem holds every action.
func liveStoreCopy(t *testing.T, extra int) (copyDir, mem, witness string) {
	t.Helper()
	root := t.TempDir()
	dir, wd := filepath.Join(root, "store"), filepath.Join(root, "witness")
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: wd})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for it := range 2 {
		for j, typ := range []ActionType{IterationStarted, CapabilityCall, IterationCompleted} {
			a := sample(it*3 + j)
			a.ParentActionID, a.Type = "", typ
			if _, err := s.Append(context.Background(), a); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually.Poll(func() bool { return witnessedSeq(s, wd) == 6 })
	appendN(t, s, 6, extra)
	copyDir, witness = copyLiveStore(t, dir), copyStore(t, wd)
	mems, _ := filepath.Glob(filepath.Join(copyDir, dataDir, "*.mem"))
	for _, m := range mems {
		if usedEnd(t, m) > 4<<10 {
			mem = m
		}
	}
	if mem == "" {
		t.Fatalf("the open store has no memtable log with its actions: %v", mems)
	}
	return copyDir, mem, witness
}

// copyLiveStore is copyStore for a store a process holds or left
// unclosed: its logs are copied up to their last byte that is not zero,
// the rest (the room Badger made for them) left a hole.
func copyLiveStore(t *testing.T, src string) string {
	t.Helper()
	used := map[string]int64{}
	logs, _ := filepath.Glob(filepath.Join(src, dataDir, "*.[mv][el][mo]*"))
	for _, l := range logs {
		n, err := lastNonZero(l)
		if err != nil {
			t.Fatal(err)
		}
		used[strings.Replace(l, src, "", 1)] = n
	}
	return copyStoreUsed(t, src, used)
}

// mustReadUsed reads path up to its last byte that is not zero.
func mustReadUsed(t *testing.T, path string) []byte {
	t.Helper()
	n, err := lastNonZero(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// entryOf returns the offset and length of the entry of the log at path
// whose key is action seq's, read with decodeLogEntry from the log's header on.
func entryOf(t *testing.T, path string, seq uint64) (off, n int) {
	t.Helper()
	b := mustReadUsed(t, path)
	for pos := logHeaderLen; pos < len(b); {
		e, n, st := decodeLogEntry(b[pos:])
		if st != entryOK {
			break
		}
		if s, ok := parseActionKey(e.key); ok && s == seq {
			return pos, n
		}
		pos += n
	}
	t.Fatalf("no entry of seq %d in %s", seq, path)
	return 0, 0
}

// TestDamagedTailIsNamed flips a byte in the entry of one action of an
// unclosed store, past the last witnessed checkpoint (seq 6), and checks
// with the witness and without one that: a writer's open refuses to write
// with a TailError naming the log and the seqs after the damage; Verify
// fails at the first of them; and nothing of the store was changed.
func TestDamagedTailIsNamed(t *testing.T) {
	t.Parallel()
	src, srcMem, wd := liveStoreCopy(t, 10) // seqs 7–16, one commit each
	for _, tc := range []struct {
		name    string
		witness string
		seq     uint64 // the action whose entry is damaged
	}{
		{"after the witnessed checkpoint", wd, 9},
		{"no witness", "", 9},
		{"in the last commit but one", "", 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := copyLiveStore(t, src)
			mem := filepath.Join(dir, dataDir, filepath.Base(srcMem))
			off, n := entryOf(t, mem, tc.seq)
			if err := flipByte(mem, int64(off+n/2)); err != nil {
				t.Fatal(err)
			}
			damaged := mustReadUsed(t, mem)
			s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: tc.witness})
			if err != nil {
				t.Fatalf("open for writing: %v", err)
			}
			_, aerr := s.Append(context.Background(), sample(1))
			s.Close()
			var te *TailError
			want := fmt.Sprintf("seqs %d–16", tc.seq)
			if !errors.As(aerr, &te) || !strings.Contains(aerr.Error(), mem) || !strings.Contains(aerr.Error(), want) ||
				!strings.Contains(aerr.Error(), "refuses to write") || te.Head != tc.seq-1 {
				t.Fatalf("append on a store whose log is damaged at seq %d = %v, want a TailError naming %s and %s", tc.seq, aerr, mem, want)
			}
			s, err = Open(Options{Dir: dir, ReadOnly: true})
			if err != nil {
				t.Fatalf("open read-only: %v", err)
			}
			var since []SavedCheckpoint
			if tc.witness != "" {
				since = []SavedCheckpoint{{Name: "W", Note: mustReadWitness(t, wd, s.ID())}}
			}
			rep, verr := s.VerifyWith(context.Background(), VerifyOptions{Since: since})
			s.Close()
			var ie *IntegrityError
			if !errors.As(verr, &ie) || ie.Seq != tc.seq || !strings.Contains(ie.Reason, want) || !strings.Contains(ie.Reason, "chain export --bundle") {
				t.Fatalf("verify = %v, want a failure at seq %d naming %s", verr, tc.seq, want)
			}
			if tc.witness != "" && len(rep.Consistent) != 1 {
				t.Fatalf("the store up to the damage is consistent with its witness, but verify says %+v", rep)
			}
			if !bytes.Equal(mustReadUsed(t, mem), damaged) {
				t.Fatal("opening the damaged store changed its log")
			}
		})
	}
}

// TestTornCommitIsNoLoss cuts the last commit of an unclosed store short,
// as a kill in the middle of writing it does (its first bytes written, the
// rest still zeros): no commit was lost, so a writer opens the store and
// goes on from the commit before.
func TestTornCommitIsNoLoss(t *testing.T) {
	t.Parallel()
	dir, mem, _ := liveStoreCopy(t, 4) // seqs 7–10
	off, n := entryOf(t, mem, 10)
	f, err := os.OpenFile(mem, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, usedEnd(t, mem)-int64(off+n/2)), int64(off+n/2))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	tail, lost, err := readLogTail(mem, int64(off-1))
	if err != nil || lost {
		t.Fatalf("readLogTail on a torn commit = %+v, lost %v, %v", tail, lost, err)
	}
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h := s.Head().Seq; h != 9 {
		t.Fatalf("head after a torn commit = %d, want 9", h)
	}
	if r, err := s.Append(context.Background(), sample(10)); err != nil || r.Seq != 10 {
		t.Fatalf("append after a torn commit = %+v, %v", r, err)
	}
	mustVerify(t, s)
}

// FuzzDecodeLogEntry holds that any bytes decode to a state without a
// panic, that a whole entry's length fits the bytes given, and that the
// entry encodeLogEntry makes decodes back.
func FuzzDecodeLogEntry(f *testing.F) {
	f.Add(encodeLogEntry(logBitTxn, []byte("a/\x00\x00\x00\x00\x00\x00\x00\x07"), []byte("value")))
	f.Add(encodeLogEntry(logBitFinTxn, []byte("!badger!txn"), []byte("12")))
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Add([]byte{0x40, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, st := decodeLogEntry(b)
		if (st == entryOK || st == entryBad) && (n <= 0 || n > len(b)) {
			t.Fatalf("state %d with length %d of %d bytes", st, n, len(b))
		}
		if st == entryOK {
			key := append(append([]byte{}, e.key...), make([]byte, logVersion)...)
			if got, _, st2 := decodeLogEntry(encodeLogEntry(e.meta, key, e.value)); st2 != entryOK || !bytes.Equal(got.key, e.key) || !bytes.Equal(got.value, e.value) {
				t.Fatalf("the re-encoded entry decodes to state %d, %+v", st2, got)
			}
		}
		if size := entrySize(b); size < 0 {
			t.Fatalf("entrySize = %d", size)
		}
		sc := tailScan{}
		sc.walk(b)
	})
}

// encodeLogEntry writes an entry as Badger does (header, key with its
// version, value, CRC-32C).
func encodeLogEntry(meta byte, key, value []byte) []byte {
	b := []byte{meta, 0}
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = binary.AppendUvarint(b, uint64(len(value)))
	b = binary.AppendUvarint(b, 0)
	b = append(append(b, key...), value...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestDamagedValueLogIsNamed damages the first of three actions too large
// for the memtable log (each goes to the value log) in an unclosed store:
// a writer's open would cut the value log there and lose all three, so it
// refuses to write, naming the value log and the seqs.
func TestDamagedValueLogIsNamed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(Options{Dir: dir, MemTableSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 0, 1)
	big := strings.Repeat("x", 1100<<10)
	for i := 1; i <= 3; i++ {
		a := sample(i)
		a.ErrorMessage = big
		if _, err := s.Append(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	cp := copyLiveStore(t, dir)
	s.Close()
	vlog, err := newestValueLog(filepath.Join(cp, dataDir))
	if err != nil || vlog == "" {
		t.Fatalf("no value log in %s: %v", cp, err)
	}
	b := mustReadUsed(t, vlog)
	i := bytes.Index(b, append([]byte(prefixAction), binary.BigEndian.AppendUint64(nil, 2)...))
	if i < 0 {
		t.Fatal("action 2 is not in the value log")
	}
	if err := flipByte(vlog, int64(i+4096)); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Dir: cp, MemTableSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, aerr := s.Append(context.Background(), sample(9))
	s.Close()
	var te *TailError
	if !errors.As(aerr, &te) || !strings.Contains(aerr.Error(), vlog) || !strings.Contains(aerr.Error(), "whole values (seqs 2–4)") {
		t.Fatalf("append on a store whose value log is damaged = %v, want a TailError naming %s and seqs 2–4", aerr, vlog)
	}
}

// BenchmarkLastNonZero finds the written end of a log as a killed process
// leaves it: 64 MiB, sparse, with 100 KiB written at its start.
func BenchmarkLastNonZero(b *testing.B) {
	path := filepath.Join(b.TempDir(), "00001.mem")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{1}, 100<<10)); err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.SetBytes(64 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := lastNonZero(path); err != nil || n != 100<<10 {
			b.Fatalf("lastNonZero = %d, %v", n, err)
		}
	}
}
