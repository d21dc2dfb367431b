package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/rtfs"
)

// EncodingVersion is the first byte of every canonical action encoding.
const EncodingVersion = 1

// seqOffset is where seq sits in a canonical encoding: right after the
// version byte. The writer patches it in once seq is known.
const seqOffset = 1

// Limits on the string fields of an action, checked by Append and Import.
const (
	maxIDLen = 1024 // ids and function names: they become index keys
)

// AppendCanonical appends the canonical encoding of a to buf and returns
// the extended buffer. The encoding covers every field except ActionHash,
// ChainHash and CheckpointSeq; docs/ledger.md describes it byte by byte.
// a must be valid (see Validate).
func AppendCanonical(buf []byte, a *Action) []byte {
	buf = append(buf, EncodingVersion)
	buf = binary.BigEndian.AppendUint64(buf, a.Seq)
	buf = appendStr(buf, a.RunID)
	buf = appendStr(buf, a.ActionID)
	buf = appendStr(buf, a.ParentActionID)
	buf = appendStr(buf, a.PlanID)
	buf = appendStr(buf, a.IntentID)
	buf = appendStr(buf, a.Type.String())
	buf = appendStr(buf, a.FunctionName)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(a.Arguments)))
	for _, v := range a.Arguments {
		buf = appendValue(buf, v)
	}
	buf = appendValue(buf, a.Result)
	if a.Success {
		buf = append(buf, 1)
	} else {
		buf = append(buf, 0)
	}
	buf = appendStr(buf, a.ErrorMessage)
	buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(a.Cost))
	buf = binary.BigEndian.AppendUint64(buf, uint64(a.DurationMS))
	buf = binary.BigEndian.AppendUint64(buf, uint64(a.Timestamp.UnixNano()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(a.Metadata)))
	for _, k := range sortedKeys(a.Metadata) {
		buf = appendStr(buf, k)
		buf = appendValue(buf, a.Metadata[k])
	}
	return buf
}

func appendStr(buf []byte, s string) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
	return append(buf, s...)
}

// appendValue writes v's canonical RTFS text, length-prefixed, without an
// intermediate string.
func appendValue(buf []byte, v rtfs.Value) []byte {
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf = rtfs.AppendValue(buf, v)
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return buf
}

func sortedKeys(m map[string]rtfs.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ComputeActionHash returns SHA-256 of a's canonical encoding.
func ComputeActionHash(a *Action) Hash {
	return sha256.Sum256(AppendCanonical(nil, a))
}

// ChainLink returns chain_hash[seq] = SHA-256(prev ‖ actionHash ‖ be64(seq)).
func ChainLink(prev, actionHash Hash, seq uint64) Hash {
	var in [72]byte
	copy(in[:32], prev[:])
	copy(in[32:64], actionHash[:])
	binary.BigEndian.PutUint64(in[64:], seq)
	return sha256.Sum256(in[:])
}

// Validate reports the first reason a cannot be recorded: an invalid type,
// a missing or oversized id, text that is not UTF-8, a function value (it
// has no canonical text that reads back), a cost that is not finite, a
// negative duration or a timestamp outside what Unix nanoseconds can hold.
func Validate(a *Action) error {
	if !a.Type.Valid() {
		return fmt.Errorf("action_type %s is not a known type", a.Type)
	}
	if a.ActionID == "" {
		return errors.New("action_id is empty")
	}
	for _, f := range [...]struct{ name, val string }{
		{"run_id", a.RunID}, {"action_id", a.ActionID}, {"parent_action_id", a.ParentActionID},
		{"plan_id", a.PlanID}, {"intent_id", a.IntentID}, {"function_name", a.FunctionName},
	} {
		if len(f.val) > maxIDLen {
			return fmt.Errorf("%s is %d bytes; at most %d are allowed", f.name, len(f.val), maxIDLen)
		}
		if !utf8.ValidString(f.val) {
			return fmt.Errorf("%s is not valid UTF-8", f.name)
		}
	}
	if a.ParentActionID == a.ActionID {
		return fmt.Errorf("action %s names itself as its parent", a.ActionID)
	}
	if !utf8.ValidString(a.ErrorMessage) {
		return errors.New("error_message is not valid UTF-8")
	}
	if math.IsNaN(a.Cost) || math.IsInf(a.Cost, 0) {
		return fmt.Errorf("cost %v is not a finite number", a.Cost)
	}
	if a.DurationMS < 0 {
		return fmt.Errorf("duration_ms %d is negative", a.DurationMS)
	}
	if err := checkTime(a.Timestamp); err != nil {
		return err
	}
	for i, v := range a.Arguments {
		if err := checkData(v); err != nil {
			return fmt.Errorf("arguments[%d]: %w", i, err)
		}
	}
	if err := checkData(a.Result); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	for k, v := range a.Metadata {
		if k == "" || !utf8.ValidString(k) {
			return fmt.Errorf("metadata key %q must be non-empty UTF-8", k)
		}
		if err := checkData(v); err != nil {
			return fmt.Errorf("metadata %q: %w", k, err)
		}
	}
	return nil
}

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func checkTime(t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return fmt.Errorf("timestamp %s is outside the years 1678–2262 that the ledger can hold", t.Format(time.RFC3339))
	}
	return nil
}

// checkData refuses values whose canonical text does not read back:
// functions anywhere inside v.
func checkData(v rtfs.Value) error {
	switch v.Kind() {
	case rtfs.KindFn:
		return fmt.Errorf("a function (%s) is not data and cannot be recorded", rtfs.Print(v))
	case rtfs.KindList, rtfs.KindVector:
		for _, it := range v.Items() {
			if err := checkData(it); err != nil {
				return err
			}
		}
	case rtfs.KindSet:
		for _, x := range v.AsSet().Members() {
			if err := checkData(x); err != nil {
				return err
			}
		}
	case rtfs.KindMap:
		var err error
		v.AsMap().Range(func(k, val rtfs.Value) bool {
			if err = checkData(k); err == nil {
				err = checkData(val)
			}
			return err == nil
		})
		return err
	}
	return nil
}

// DecodeCanonical parses a canonical encoding back into an action. The
// hashes and CheckpointSeq are left zero: they are not part of it.
func DecodeCanonical(b []byte) (Action, error) {
	var a Action
	d := decoder{b: b}
	if v := d.u8(); v != EncodingVersion && d.err == nil {
		return a, fmt.Errorf("unknown action encoding version %d (this build reads %d)", v, EncodingVersion)
	}
	a.Seq = d.u64()
	a.RunID = d.str()
	a.ActionID = d.str()
	a.ParentActionID = d.str()
	a.PlanID = d.str()
	a.IntentID = d.str()
	if name := d.str(); d.err == nil {
		t, err := ParseActionType(name)
		if err != nil {
			return a, err
		}
		a.Type = t
	}
	a.FunctionName = d.str()
	if n := d.count(); n > 0 {
		a.Arguments = make([]rtfs.Value, n)
		for i := range a.Arguments {
			a.Arguments[i] = d.value()
		}
	}
	a.Result = d.value()
	switch d.u8() {
	case 0:
	case 1:
		a.Success = true
	default:
		d.fail("success flag is neither 0 nor 1")
	}
	a.ErrorMessage = d.str()
	a.Cost = math.Float64frombits(d.u64())
	a.DurationMS = int64(d.u64())
	a.Timestamp = time.Unix(0, int64(d.u64())).UTC()
	if n := d.count(); n > 0 {
		a.Metadata = make(map[string]rtfs.Value, n)
		prev := ""
		for i := 0; i < n && d.err == nil; i++ {
			k := d.str()
			if i > 0 && k <= prev {
				d.fail("metadata keys are not sorted and unique")
			}
			prev = k
			a.Metadata[k] = d.value()
		}
	}
	if d.err == nil && d.i != len(b) {
		d.fail(fmt.Sprintf("%d trailing bytes", len(b)-d.i))
	}
	if d.err != nil {
		return a, d.err
	}
	return a, nil
}

// rawHeader holds the fields of an encoding that Verify and the indexes
// need, read without parsing any RTFS value; its fields alias the encoding.
type rawHeader struct {
	seq uint64
	ids [5][]byte // action_id, plan_id, intent_id, run_id, parent_action_id: the order of indexFields
}

// decodeRawHeader reads seq and the id fields of an encoding without
// allocating.
func decodeRawHeader(b []byte) (rawHeader, error) {
	d := decoder{b: b}
	var h rawHeader
	if v := d.u8(); v != EncodingVersion && d.err == nil {
		return h, fmt.Errorf("unknown action encoding version %d", v)
	}
	h.seq = d.u64()
	run := d.take(int(d.u32()))
	action := d.take(int(d.u32()))
	parent := d.take(int(d.u32()))
	plan := d.take(int(d.u32()))
	intent := d.take(int(d.u32()))
	h.ids = [5][]byte{action, plan, intent, run, parent}
	return h, d.err
}

// decoder reads big-endian fields; the first error sticks and every later
// read returns a zero value.
type decoder struct {
	b   []byte
	i   int
	err error
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("malformed action encoding at byte %d: %s", d.i, msg)
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.i < n {
		d.fail(fmt.Sprintf("need %d bytes, %d left", n, len(d.b)-d.i))
		return nil
	}
	p := d.b[d.i : d.i+n]
	d.i += n
	return p
}

func (d *decoder) u8() byte {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// count reads a u32 element count, refusing one larger than the bytes left
// could hold (each element takes at least 4 bytes).
func (d *decoder) count() int {
	n := int(d.u32())
	if d.err == nil && n > (len(d.b)-d.i)/4 {
		d.fail(fmt.Sprintf("count %d exceeds what the remaining bytes can hold", n))
		return 0
	}
	return n
}

func (d *decoder) str() string {
	n := d.u32()
	return string(d.take(int(n)))
}

func (d *decoder) value() rtfs.Value {
	text := d.str()
	if d.err != nil {
		return rtfs.Nil
	}
	switch text {
	case "nil":
		return rtfs.Nil
	case "true":
		return rtfs.True
	case "false":
		return rtfs.False
	}
	v, err := rtfs.ReadValue(text)
	if err != nil {
		d.fail(fmt.Sprintf("value %.40q does not read back: %v", text, err))
		return rtfs.Nil
	}
	if rtfs.Print(v) != text {
		d.fail(fmt.Sprintf("value %.40q is not in canonical form", text))
		return rtfs.Nil
	}
	return v
}
