package agent

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONScanValidity(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{}`, `[]`, ` {"a":1} `, `{"a":[1,2,{"b":null}],"c":"x\"y\u00e9\ud83d\ude00"}`, `"s"`, `-0.5e+10`, `true`, `null`,
		``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `1.`, `.5`, `-`, `1e`, `tru`, `nul`, `"\x"`,
		`"\u12"`, "\"a\x01\"", `{"a":1}x`, `{"a":1}{"b":2}`, `{1:2}`, `"\ud800"`, "\"\xff\"", `[` + strings.Repeat(`[`, 20) + strings.Repeat(`]`, 21),
	} {
		var d jdoc
		if got, want := d.parse([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("parse(%q) = %t, json.Valid says %t", in, got, want)
		}
	}
}

func TestJSONScanReaders(t *testing.T) {
	t.Parallel()
	var d jdoc
	src := `{"s":"a\nb\u00e9","i":-42,"f":1.5,"b":true,"n":null,"arr":[{"k":"v1"},{"k":"v2"}],"obj":{ "x" : [ 1, "two" ] },"dup":1,"dup":2,"e\u0073c":"yes"}`
	if !d.parse([]byte(src)) {
		t.Fatal("parse failed")
	}
	root := 0
	if s, ok := d.str(d.field(root, "s")); !ok || s != "a\nbé" {
		t.Errorf("s = %q, %t", s, ok)
	}
	if i, ok := d.int(d.field(root, "i")); !ok || i != -42 {
		t.Errorf("i = %d, %t", i, ok)
	}
	if _, ok := d.int(d.field(root, "f")); ok {
		t.Error("1.5 read as an integer")
	}
	if f, ok := d.float(d.field(root, "f")); !ok || f != 1.5 {
		t.Errorf("f = %v, %t", f, ok)
	}
	if b, ok := d.bool(d.field(root, "b")); !ok || !b {
		t.Errorf("b = %t, %t", b, ok)
	}
	if s, ok := d.str(d.field(root, "n")); !ok || s != "" {
		t.Errorf("null as string = %q, %t", s, ok)
	}
	if _, ok := d.str(d.field(root, "i")); ok {
		t.Error("a number read as a string")
	}
	var ks []string
	d.elems(d.field(root, "arr"), func(e int) {
		k, _ := d.str(d.field(e, "k"))
		ks = append(ks, k)
	})
	if strings.Join(ks, ",") != "v1,v2" {
		t.Errorf("arr keys %q", ks)
	}
	if got := d.compact(d.field(root, "obj"), 200); got != `{"x":[1,"two"]}` {
		t.Errorf("compact = %q", got)
	}
	if i, _ := d.int(d.field(root, "dup")); i != 2 {
		t.Errorf("dup = %d, want the last", i)
	}
	if !d.is(d.field(root, "esc"), "yes") || d.path(root, "obj", "x") < 0 || d.path(root, "obj", "y") >= 0 {
		t.Error("escaped key, path")
	}
}

// FuzzJSONScan holds the scanner to encoding/json: the same verdict on
// validity, and the same strings and numbers.
func FuzzJSONScan(f *testing.F) {
	for _, s := range []string{"claude.jsonl", "codex.jsonl", "gemini.jsonl", "opencode.jsonl"} {
		for _, l := range strings.Split(transcript(f, s), "\n") {
			f.Add(l)
		}
	}
	f.Add(`{"a":"\ud83d\ude00\ud800x\u0041\"","n":-12345678901234567890,"f":1e400}`)
	f.Fuzz(func(t *testing.T, in string) {
		var d jdoc
		ok := d.parse([]byte(in))
		if ok != json.Valid([]byte(in)) {
			t.Fatalf("parse = %t, json.Valid = %t", ok, !ok)
		}
		if !ok {
			return
		}
		for i, n := range d.nodes {
			switch n.kind {
			case jString:
				var want string
				if err := json.Unmarshal(d.raw(i), &want); err != nil {
					t.Fatal(err)
				}
				if got, _ := d.str(i); got != want {
					t.Fatalf("string %s = %q, encoding/json says %q", d.raw(i), got, want)
				}
			case jNumber:
				var want int64
				err := json.Unmarshal(d.raw(i), &want)
				if got, ok := d.int(i); ok != (err == nil) || (ok && got != want) {
					t.Fatalf("int %s = %d, %t; encoding/json says %d, %v", d.raw(i), got, ok, want, err)
				}
				var wantF float64
				errF := json.Unmarshal(d.raw(i), &wantF)
				if got, ok := d.float(i); ok != (errF == nil) || (ok && got != wantF) {
					t.Fatalf("float %s = %v, %t; encoding/json says %v, %v", d.raw(i), got, ok, wantF, errF)
				}
			}
		}
	})
}
