package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWitnessFileSlots follows a witness file through its life: written
// whole, advanced in place into alternating slots (the file never grows),
// read back as the newest whole slot; a slot cut short or flipped by a
// kill mid-write leaves the other one to read; a note too big for a slot
// makes the file be written again, whole.
func TestWitnessFileSlots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w")
	w := &witnessWriter{path: path}
	defer w.close()
	note := func(seq int) []byte { return []byte(strings.Repeat("n", 100) + string(rune('a'+seq%26)) + "\n") }
	read := func() []byte {
		t.Helper()
		b, err := ReadCheckpointFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := w.rewrite(1, note(1)); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	size := st.Size()
	if size != witnessHeaderSize+2*witnessMinSlot {
		t.Fatalf("a new witness file is %d bytes, want %d", size, witnessHeaderSize+2*witnessMinSlot)
	}
	for seq := 2; seq <= 5; seq++ {
		if err := w.advance(uint64(seq), note(seq)); err != nil {
			t.Fatal(err)
		}
		if got := read(); !bytes.Equal(got, note(seq)) {
			t.Fatalf("after advancing to %d the file reads %q", seq, got)
		}
		if st, _ := os.Stat(path); st.Size() != size {
			t.Fatalf("advancing grew the file from %d to %d bytes", size, st.Size())
		}
	}
	// Seq 5 went to slot 0 (1: slot 0, 2: slot 1, 3: 0, 4: 1, 5: 0). A
	// kill while seq 6 is written into slot 1 leaves it damaged: 5 is read.
	b, _ := os.ReadFile(path)
	next := encodeWitnessSlot(6, note(6))
	for _, cut := range []int{3, 10, 13, 40, len(next) - 2} {
		d := bytes.Clone(b)
		copy(d[witnessHeaderSize+witnessMinSlot:], next[:cut])
		got, err := decodeWitnessFile(path, d)
		if err != nil || !bytes.Equal(got.note, note(5)) || got.seq != 5 {
			t.Fatalf("seq 6 cut after %d bytes: read seq %d %q, %v; want seq 5", cut, got.seq, got.note, err)
		}
	}
	// Both slots damaged: an error naming the file, never a wrong note.
	d := bytes.Clone(b)
	d[witnessHeaderSize+witnessSlotHead+1] ^= 1
	d[witnessHeaderSize+witnessMinSlot+witnessSlotHead+1] ^= 1
	if _, err := decodeWitnessFile(path, d); err == nil || !strings.Contains(err.Error(), "witness file "+path+" is damaged (neither of its slots holds a whole checkpoint)") {
		t.Fatalf("both slots damaged: %v", err)
	}
	// A note larger than a slot: the file is written again with larger slots.
	big := bytes.Repeat([]byte("x"), 3*witnessMinSlot)
	if err := w.advance(7, big); err != nil {
		t.Fatal(err)
	}
	if got := read(); !bytes.Equal(got, big) {
		t.Fatal("the big note does not read back")
	}
	if err := w.advance(8, note(8)); err != nil {
		t.Fatal(err)
	}
	if got := read(); !bytes.Equal(got, note(8)) {
		t.Fatalf("after the big note, seq 8 reads %q", got)
	}
}

// TestWitnessFileWrittenWholeByAnEarlierRalph reads a witness file that
// holds a note written whole, as ralph wrote it before the slots.
func TestWitnessFileWrittenWholeByAnEarlierRalph(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w")
	note := []byte("origin\n12\nroot\n\n— sig\n")
	if err := os.WriteFile(path, note, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCheckpointFile(path)
	if err != nil || !bytes.Equal(got, note) {
		t.Fatalf("read %q, %v", got, err)
	}
}

// FuzzWitnessFile: any bytes decode to a note that was written whole into
// a slot, or to an error naming the file; never a panic.
func FuzzWitnessFile(f *testing.F) {
	f.Add(encodeWitnessFile(3, []byte("note\n")))
	f.Add([]byte(witnessMagic + "4096"))
	f.Add([]byte(witnessMagic + "99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeWitnessFile("F", b)
		if err != nil {
			if !strings.Contains(err.Error(), "witness file F") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if w.newest >= 0 && !bytes.Contains(b, w.note) {
			t.Fatal("decoded a note the file does not hold")
		}
	})
}
