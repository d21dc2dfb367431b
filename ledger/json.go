package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/rtfs"
)

// TimeFormat is how the JSON form writes timestamps: RFC 3339 in UTC with
// all nine digits of nanoseconds, so that they sort as text.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// MarshalJSON writes the JSON form of DESIGN §6: snake_case fields, the
// type by name, RFC 3339 nanosecond timestamps, lower-case hex hashes and
// RTFS values as JSON where they map naturally (see AppendValueJSON).
func (a Action) MarshalJSON() ([]byte, error) {
	return AppendJSON(nil, &a), nil
}

// AppendJSON appends a's JSON form (one line, no newline) to buf.
func AppendJSON(buf []byte, a *Action) []byte {
	buf = append(buf, `{"seq":`...)
	buf = strconv.AppendUint(buf, a.Seq, 10)
	buf = appendField(buf, "run_id", a.RunID)
	buf = appendField(buf, "action_id", a.ActionID)
	buf = appendOptField(buf, "parent_action_id", a.ParentActionID)
	buf = appendField(buf, "plan_id", a.PlanID)
	buf = appendField(buf, "intent_id", a.IntentID)
	buf = appendField(buf, "action_type", a.Type.String())
	buf = appendField(buf, "function_name", a.FunctionName)
	buf = append(buf, `,"arguments":[`...)
	for i, v := range a.Arguments {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendValueJSON(buf, v)
	}
	buf = append(buf, `],"result":`...)
	buf = AppendValueJSON(buf, a.Result)
	buf = append(buf, `,"success":`...)
	buf = strconv.AppendBool(buf, a.Success)
	buf = appendOptField(buf, "error_message", a.ErrorMessage)
	buf = append(buf, `,"cost":`...)
	buf = strconv.AppendFloat(buf, a.Cost, 'g', -1, 64)
	buf = append(buf, `,"duration_ms":`...)
	buf = strconv.AppendInt(buf, a.DurationMS, 10)
	buf = append(buf, `,"timestamp":"`...)
	buf = a.Timestamp.UTC().AppendFormat(buf, TimeFormat)
	buf = append(buf, `","metadata":{`...)
	for i, k := range sortedKeys(a.Metadata) {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, k)
		buf = append(buf, ':')
		buf = AppendValueJSON(buf, a.Metadata[k])
	}
	buf = append(buf, '}')
	buf = appendField(buf, "action_hash", a.ActionHash.String())
	buf = appendField(buf, "chain_hash", a.ChainHash.String())
	buf = append(buf, `,"checkpoint_seq":`...)
	buf = strconv.AppendUint(buf, a.CheckpointSeq, 10)
	return append(buf, '}')
}

func appendField(buf []byte, name, val string) []byte {
	buf = append(buf, ',', '"')
	buf = append(buf, name...)
	buf = append(buf, '"', ':')
	return appendJSONString(buf, val)
}

// appendOptField writes null for an empty string.
func appendOptField(buf []byte, name, val string) []byte {
	if val != "" {
		return appendField(buf, name, val)
	}
	buf = append(buf, ',', '"')
	buf = append(buf, name...)
	return append(buf, `":null`...)
}

// AppendValueJSON appends v as JSON: nil, booleans, ints and finite floats
// as themselves (a float always has a '.' or an exponent, so it reads back
// as a float); strings as strings, or tagged when JSON cannot carry them
// exactly ({"$base64":…} for bytes that are not UTF-8, {"$string":…} for
// text that would read back as a keyword or a set; a map with such a key
// as {"$map":[[k,v],…]}); keywords as ":kw" strings; vectors as
// arrays; maps as objects whose keys are the string, ":keyword" or, for
// other keys, canonical text; everything else (lists, symbols, regexes,
// NaN and infinities) as its canonical RTFS text in a string.
func AppendValueJSON(buf []byte, v rtfs.Value) []byte {
	switch v.Kind() {
	case rtfs.KindNil:
		return append(buf, "null"...)
	case rtfs.KindBool:
		return strconv.AppendBool(buf, v.AsBool())
	case rtfs.KindInt:
		return strconv.AppendInt(buf, v.AsInt(), 10)
	case rtfs.KindFloat:
		if f := v.AsFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			return appendJSONString(buf, rtfs.Print(v))
		}
		return rtfs.AppendValue(buf, v)
	case rtfs.KindString:
		return appendStringValue(buf, v.Str())
	case rtfs.KindKeyword:
		return appendJSONString(buf, rtfs.Print(v))
	case rtfs.KindVector:
		buf = append(buf, '[')
		for i, it := range v.Items() {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = AppendValueJSON(buf, it)
		}
		return append(buf, ']')
	case rtfs.KindMap:
		if needsPairs(v.AsMap()) {
			return appendPairs(buf, v.AsMap())
		}
		buf = append(buf, '{')
		first := true
		v.AsMap().Range(func(k, val rtfs.Value) bool {
			if !first {
				buf = append(buf, ',')
			}
			first = false
			if k.Kind() == rtfs.KindString {
				buf = appendJSONString(buf, k.Str())
			} else {
				buf = appendJSONString(buf, rtfs.Print(k))
			}
			buf = append(buf, ':')
			buf = AppendValueJSON(buf, val)
			return true
		})
		return append(buf, '}')
	}
	return appendJSONString(buf, rtfs.Print(v))
}

// Tags of the JSON form's escapes: a one-key object whose key is one of
// these stands for a value plain JSON cannot carry exactly (docs/ledger.md §8).
const (
	tagBase64 = "$base64" // a string that is not UTF-8: its bytes in standard base64
	tagString = "$string" // a string plain JSON would read back as a keyword or a set
	tagMap    = "$map"    // a map as [key, value] pairs, for keys that need a tag
)

// appendStringValue appends the RTFS string s so that it reads back as
// exactly s: plain when it can be, else tagged.
func appendStringValue(buf []byte, s string) []byte {
	switch {
	case !utf8.ValidString(s):
		buf = append(buf, `{"`+tagBase64+`":"`...)
		buf = base64.StdEncoding.AppendEncode(buf, []byte(s))
		return append(buf, `"}`...)
	case misread(s):
		buf = append(buf, `{"`+tagString+`":`...)
		buf = appendJSONString(buf, s)
		return append(buf, '}')
	}
	return appendJSONString(buf, s)
}

// misread reports whether the string s, written plainly, would read back
// as a keyword or a set.
func misread(s string) bool {
	return len(s) > 1 && (s[0] == ':' || s[0] == '#' && s[1] == '{') && stringOrKeyword(s).Kind() != rtfs.KindString
}

// needsPairs reports whether m must be written as [key, value] pairs: it
// has a string key plain JSON cannot carry exactly, or it would read back
// as one of the tags.
func needsPairs(m *rtfs.Map) bool {
	need := false
	m.Range(func(k, _ rtfs.Value) bool {
		if k.Kind() == rtfs.KindString {
			s := k.Str()
			need = !utf8.ValidString(s) || misread(s) ||
				(m.Len() == 1 && (s == tagBase64 || s == tagString || s == tagMap))
		}
		return !need
	})
	return need
}

// appendPairs writes m as {"$map":[[key,value],…]} in canonical key order.
func appendPairs(buf []byte, m *rtfs.Map) []byte {
	buf = append(buf, `{"`+tagMap+`":[`...)
	first := true
	m.Range(func(k, val rtfs.Value) bool {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, '[')
		buf = AppendValueJSON(buf, k)
		buf = append(buf, ',')
		buf = AppendValueJSON(buf, val)
		buf = append(buf, ']')
		return true
	})
	return append(buf, "]}"...)
}

// appendJSONString quotes s as JSON does, replacing invalid UTF-8 with
// U+FFFD and escaping U+2028 and U+2029 so the line is safe in JavaScript.
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&15])
		default:
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}

// jsonAction is the shape UnmarshalJSON accepts.
type jsonAction struct {
	Seq            uint64         `json:"seq"`
	RunID          string         `json:"run_id"`
	ActionID       string         `json:"action_id"`
	ParentActionID *string        `json:"parent_action_id"`
	PlanID         string         `json:"plan_id"`
	IntentID       string         `json:"intent_id"`
	ActionType     *string        `json:"action_type"`
	FunctionName   string         `json:"function_name"`
	Arguments      []any          `json:"arguments"`
	Result         any            `json:"result"`
	Success        bool           `json:"success"`
	ErrorMessage   *string        `json:"error_message"`
	Cost           float64        `json:"cost"`
	DurationMS     int64          `json:"duration_ms"`
	Timestamp      *string        `json:"timestamp"`
	Metadata       map[string]any `json:"metadata"`
	ActionHash     *Hash          `json:"action_hash"`
	ChainHash      *Hash          `json:"chain_hash"`
	CheckpointSeq  uint64         `json:"checkpoint_seq"`
}

// UnmarshalJSON reads the JSON form. Unknown fields are an error; values
// map back as AppendValueJSON describes (a string ":name" that is a valid
// keyword becomes that keyword; a JSON number with '.', 'e' or 'E' is a
// float, otherwise an int).
func (a *Action) UnmarshalJSON(b []byte) error {
	var j jsonAction
	// One pass: values decode as they are read (numbers kept exact), not
	// as raw messages each decoded again (ValueFromJSON per value cost a
	// decoder and its buffer apiece, most of a line's decoding).
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(&j); err != nil {
		return jsonErr(err)
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	if j.ActionType == nil {
		return errors.New(`"action_type" is missing`)
	}
	t, err := ParseActionType(*j.ActionType)
	if err != nil {
		return err
	}
	if j.Timestamp == nil {
		return errors.New(`"timestamp" is missing`)
	}
	ts, err := time.Parse(time.RFC3339Nano, *j.Timestamp)
	if err != nil {
		return fmt.Errorf(`"timestamp" is not RFC 3339: %q`, *j.Timestamp)
	}
	out := Action{
		Seq: j.Seq, RunID: j.RunID, ActionID: j.ActionID, PlanID: j.PlanID, IntentID: j.IntentID,
		Type: t, FunctionName: j.FunctionName, Success: j.Success, Cost: j.Cost,
		DurationMS: j.DurationMS, Timestamp: ts.UTC(), CheckpointSeq: j.CheckpointSeq,
	}
	if j.ParentActionID != nil {
		out.ParentActionID = *j.ParentActionID
	}
	if j.ErrorMessage != nil {
		out.ErrorMessage = *j.ErrorMessage
	}
	if j.ActionHash != nil {
		out.ActionHash = *j.ActionHash
	}
	if j.ChainHash != nil {
		out.ChainHash = *j.ChainHash
	}
	if len(j.Arguments) > 0 {
		out.Arguments = make([]rtfs.Value, len(j.Arguments))
		for i, x := range j.Arguments {
			if out.Arguments[i], err = fromJSON(x); err != nil {
				return fmt.Errorf("arguments[%d]: %w", i, err)
			}
		}
	}
	if j.Result != nil {
		if out.Result, err = fromJSON(j.Result); err != nil {
			return fmt.Errorf("result: %w", err)
		}
	}
	if len(j.Metadata) > 0 {
		out.Metadata = make(map[string]rtfs.Value, len(j.Metadata))
		for k, x := range j.Metadata {
			if out.Metadata[k], err = fromJSON(x); err != nil {
				return fmt.Errorf("metadata %q: %w", k, err)
			}
		}
	}
	*a = out
	return nil
}

func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%q must be a JSON %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	if s, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", s)
	}
	return err
}

func jsonKind(k string) string {
	switch k {
	case "string", "ptr":
		return "string"
	case "bool":
		return "boolean"
	case "slice":
		return "array"
	case "map", "struct":
		return "object"
	}
	return "number"
}

// ValueFromJSON converts one JSON value to RTFS (the inverse of
// AppendValueJSON where that is not lossy).
func ValueFromJSON(raw []byte) (rtfs.Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return rtfs.Nil, err
	}
	return fromJSON(x)
}

func fromJSON(x any) (rtfs.Value, error) {
	switch x := x.(type) {
	case nil:
		return rtfs.Nil, nil
	case bool:
		return rtfs.Bool(x), nil
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return rtfs.Nil, fmt.Errorf("integer %s does not fit in 64 bits", s)
			}
			return rtfs.Int(i), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return rtfs.Nil, fmt.Errorf("number %s is out of range", s)
		}
		return rtfs.Float(f), nil
	case string:
		return stringOrKeyword(x), nil
	case []any:
		items := make([]rtfs.Value, len(x))
		for i, it := range x {
			v, err := fromJSON(it)
			if err != nil {
				return rtfs.Nil, err
			}
			items[i] = v
		}
		return rtfs.Vector(items), nil
	case map[string]any:
		if len(x) == 1 {
			if v, ok, err := fromTagged(x); ok || err != nil {
				return v, err
			}
		}
		b := rtfs.NewMapBuilder(len(x))
		for k, it := range x {
			v, err := fromJSON(it)
			if err != nil {
				return rtfs.Nil, err
			}
			b.Set(stringOrKeyword(k), v)
		}
		return rtfs.MapValue(b.Map()), nil
	}
	return rtfs.Nil, fmt.Errorf("unexpected JSON value %T", x)
}

// fromTagged reads a one-key object that is one of the escapes; ok is
// false when x is an ordinary object.
func fromTagged(x map[string]any) (v rtfs.Value, ok bool, err error) {
	for k, it := range x {
		switch k {
		case tagBase64:
			s, isStr := it.(string)
			if !isStr {
				return rtfs.Nil, true, fmt.Errorf("%q must hold a base64 string", tagBase64)
			}
			b, err := base64.StdEncoding.Strict().DecodeString(s)
			if err != nil {
				return rtfs.Nil, true, fmt.Errorf("%q holds bad base64: %v", tagBase64, err)
			}
			return rtfs.String(string(b)), true, nil
		case tagString:
			s, isStr := it.(string)
			if !isStr {
				return rtfs.Nil, true, fmt.Errorf("%q must hold a string", tagString)
			}
			return rtfs.String(s), true, nil
		case tagMap:
			pairs, isArr := it.([]any)
			if !isArr {
				return rtfs.Nil, true, fmt.Errorf("%q must hold an array of [key, value] pairs", tagMap)
			}
			b := rtfs.NewMapBuilder(len(pairs))
			for i, p := range pairs {
				kv, isPair := p.([]any)
				if !isPair || len(kv) != 2 {
					return rtfs.Nil, true, fmt.Errorf("%q pair %d must be a [key, value] array", tagMap, i)
				}
				key, err := fromJSON(kv[0])
				if err != nil {
					return rtfs.Nil, true, err
				}
				val, err := fromJSON(kv[1])
				if err != nil {
					return rtfs.Nil, true, err
				}
				b.Set(key, val)
			}
			return rtfs.MapValue(b.Map()), true, nil
		}
	}
	return rtfs.Nil, false, nil
}

// stringOrKeyword reads ":name" as the keyword :name when it is one, and
// "#{…}" as the set it is the canonical text of.
func stringOrKeyword(s string) rtfs.Value {
	if len(s) > 2 && s[0] == '#' && s[1] == '{' {
		if v, err := rtfs.ReadValue(s); err == nil && v.Kind() == rtfs.KindSet && rtfs.Print(v) == s {
			return v
		}
	}
	if len(s) > 1 && s[0] == ':' {
		if v, err := rtfs.ReadValue(s); err == nil && v.Kind() == rtfs.KindKeyword && rtfs.Print(v) == s {
			return v
		}
	}
	return rtfs.String(s)
}
