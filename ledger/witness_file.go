package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
)

// The witness file holds two slots, so that advancing it costs one write
// in place and one fdatasync, with no file created, renamed or grown:
//
//	ralph-witness 2 <slot size>\n   the header, padded with spaces to 64 bytes
//	slot 0                          at byte 64
//	slot 1                          at byte 64 + slot size
//
// A slot is the witnessed seq (8 bytes, big-endian), the note's length
// (4 bytes), the CRC-32C of seq, length and note (4 bytes), then the
// note, a signed checkpoint (checkpoint.go). An advance overwrites the
// slot that does not hold the newest note, so a write cut short by a kill
// leaves the other slot whole: a reader takes the whole slot with the
// highest seq. A note that does not fit a slot makes the file be written
// again, whole, with slots twice its size (writeFileAtomic), as the first
// write of each process is. A file without the header is a note written
// whole by an earlier ralph, and is read as that note.

const (
	witnessMagic      = "ralph-witness 2 "
	witnessHeaderSize = 64
	witnessSlotHead   = 16
	witnessMinSlot    = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// witnessSlotSize is the slot size a file holding note is written with.
func witnessSlotSize(note []byte) int {
	n := witnessMinSlot
	for n < 2*(witnessSlotHead+len(note)) {
		n *= 2
	}
	return n
}

// encodeWitnessSlot returns slot bytes holding note, witnessed at seq.
func encodeWitnessSlot(seq uint64, note []byte) []byte {
	b := make([]byte, witnessSlotHead+len(note))
	binary.BigEndian.PutUint64(b[0:8], seq)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(note)))
	copy(b[witnessSlotHead:], note)
	binary.BigEndian.PutUint32(b[12:16], slotCRC(b[0:12], note))
	return b
}

// slotCRC is the CRC-32C of a slot's seq and length (head) and its note.
func slotCRC(head, note []byte) uint32 {
	return crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, note)
}

// encodeWitnessFile returns a whole witness file whose slot 0 holds note,
// witnessed at seq, and whose slot 1 is empty.
func encodeWitnessFile(seq uint64, note []byte) []byte {
	size := witnessSlotSize(note)
	b := bytes.Repeat([]byte{' '}, witnessHeaderSize)
	copy(b, witnessMagic+strconv.Itoa(size))
	b[witnessHeaderSize-1] = '\n'
	b = append(b, make([]byte, 2*size)...)
	copy(b[witnessHeaderSize:], encodeWitnessSlot(seq, note))
	return b
}

// witnessSlots is a witness file read: the whole slot with the highest
// seq (newest: -1 when neither slot is whole).
type witnessSlots struct {
	seq    uint64
	note   []byte
	newest int
}

// decodeWitnessFile reads a witness file's bytes. A file without the
// header is returned as a note written whole (size 0).
func decodeWitnessFile(path string, b []byte) (witnessSlots, error) {
	if !bytes.HasPrefix(b, []byte(witnessMagic)) {
		return witnessSlots{note: b, newest: -1}, nil
	}
	damaged := func(why string) error {
		return fmt.Errorf("witness file %s is damaged (%s); remove it to start a new witness, or restore a copy", path, why)
	}
	if len(b) < witnessHeaderSize {
		return witnessSlots{}, damaged("its header is cut short")
	}
	size, err := strconv.Atoi(string(bytes.TrimSpace(b[len(witnessMagic):witnessHeaderSize])))
	if err != nil || size < witnessMinSlot || size > 1<<24 {
		return witnessSlots{}, damaged("its header names no slot size")
	}
	w := witnessSlots{newest: -1}
	for i := range 2 {
		off := witnessHeaderSize + i*size
		if off+witnessSlotHead > len(b) {
			continue
		}
		slot := b[off:min(off+size, len(b))]
		seq := binary.BigEndian.Uint64(slot[0:8])
		n := int(binary.BigEndian.Uint32(slot[8:12]))
		if n == 0 || witnessSlotHead+n > len(slot) {
			continue
		}
		note := slot[witnessSlotHead : witnessSlotHead+n]
		if slotCRC(slot[0:12], note) != binary.BigEndian.Uint32(slot[12:16]) {
			continue
		}
		if w.newest < 0 || seq > w.seq {
			w.seq, w.note, w.newest = seq, note, i
		}
	}
	if w.newest < 0 {
		return witnessSlots{}, damaged("neither of its slots holds a whole checkpoint")
	}
	return w, nil
}

// witnessWriter advances one store's witness file in place. It is used
// under Store.witnessMu.
type witnessWriter struct {
	path string
	f    *os.File
	size int // slot size
	next int // the slot the next advance overwrites
}

// rewrite writes the file whole, holding note at seq, and opens it for
// the next advances.
func (w *witnessWriter) rewrite(seq uint64, note []byte) error {
	w.close()
	if err := writeFileAtomic(w.path, encodeWitnessFile(seq, note), 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", w.path, err)
	}
	w.f, w.size, w.next = f, witnessSlotSize(note), 1
	return nil
}

// advance writes note, witnessed at seq, into the slot not holding the
// newest note, and makes it durable.
func (w *witnessWriter) advance(seq uint64, note []byte) error {
	if w.f == nil || witnessSlotHead+len(note) > w.size {
		return w.rewrite(seq, note)
	}
	off := int64(witnessHeaderSize + w.next*w.size)
	if _, err := w.f.WriteAt(encodeWitnessSlot(seq, note), off); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("write %s: sync: %w", w.path, err)
	}
	w.next = 1 - w.next
	return nil
}

func (w *witnessWriter) close() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// ReadCheckpointFile returns the checkpoint note saved at path: a note
// saved whole (ralph chain checkpoint > FILE), or the newest whole note of
// a witness file.
func ReadCheckpointFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, witnessHeaderSize+2<<24))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	w, err := decodeWitnessFile(path, b)
	if err != nil {
		return nil, err
	}
	if len(w.note) == 0 {
		return nil, errors.New("witness file " + path + " is empty; remove it to start a new witness")
	}
	return w.note, nil
}
