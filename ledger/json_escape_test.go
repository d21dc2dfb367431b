package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/ralphloop/ralph/rtfs"
)

// Strings JSON cannot carry as they are (bytes that are not UTF-8, text
// that would read back as a keyword or a set) and maps with such keys
// take the tagged escapes, and read back byte for byte.
func TestJSONEscapes(t *testing.T) {
	t.Parallel()
	m := func(kv ...rtfs.Value) rtfs.Value { return rtfs.MapValue(rtfs.NewMap(kv...)) }
	cases := []struct {
		name string
		v    rtfs.Value
		want string
	}{
		{"invalid UTF-8", rtfs.String("\xff\xfe"), `{"$base64":"//4="}`},
		{"mixed", rtfs.String("ok \xe9t\xe9"), `{"$base64":"b2sg6XTp"}`},
		{"string like a keyword", rtfs.String(":ok"), `{"$string":":ok"}`},
		{"string like a set", rtfs.String("#{1}"), `{"$string":"#{1}"}`},
		{"string like a tag", rtfs.String("$base64"), `"$base64"`},
		{"colon alone stays plain", rtfs.String(":"), `":"`},
		{"key not UTF-8", m(rtfs.String("\xff"), rtfs.Int(1), rtfs.Keyword("a"), rtfs.Int(2)),
			`{"$map":[[{"$base64":"/w=="},1],[":a",2]]}`},
		{"key like a keyword", m(rtfs.String(":a"), rtfs.Int(1)), `{"$map":[[{"$string":":a"},1]]}`},
		{"map like a tag", m(rtfs.String("$base64"), rtfs.String("//4=")), `{"$map":[["$base64","//4="]]}`},
		{"tag key among others stays plain", m(rtfs.String("$map"), rtfs.Int(1), rtfs.String("b"), rtfs.Int(2)), `{"$map":1,"b":2}`},
		{"nested", rtfs.Vector([]rtfs.Value{m(rtfs.Keyword("out"), rtfs.String("\x00\x80"))}), `[{":out":{"$base64":"AIA="}}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := string(AppendValueJSON(nil, tc.v))
			if got != tc.want {
				t.Errorf("%s → %s, want %s", rtfs.Print(tc.v), got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("%s is not valid JSON", got)
			}
			back, err := ValueFromJSON([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			if rtfs.Print(back) != rtfs.Print(tc.v) || back.Kind() != tc.v.Kind() {
				t.Errorf("%s came back as %s", rtfs.Print(tc.v), rtfs.Print(back))
			}
		})
	}
	for _, bad := range []string{`{"$base64":"*"}`, `{"$base64":1}`, `{"$string":[]}`, `{"$map":[[1]]}`, `{"$map":{}}`} {
		if _, err := ValueFromJSON([]byte(bad)); err == nil {
			t.Errorf("%s must be refused", bad)
		}
	}
}

// Export then import into an empty store keeps every action hash when
// values hold strings that are not UTF-8 or that look like keywords.
func TestExportImportKeepsHashesOfRawStrings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newMemStore(t)
	raw := []rtfs.Value{
		rtfs.String("\xff\xfe"),
		rtfs.MapValue(rtfs.NewMap(rtfs.String("\xc3"), rtfs.String(":kw"), rtfs.Keyword("k"), rtfs.String("#{}"))),
		rtfs.Vector([]rtfs.Value{rtfs.String("caf\xe9"), rtfs.String("ok")}),
		rtfs.String("plain"),
	}
	var want []Hash
	for i, v := range raw {
		a := sample(i)
		a.Result = v
		a.Arguments = []rtfs.Value{v}
		a.Metadata["raw"] = v
		r, err := src.Append(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ActionHash)
	}
	var out bytes.Buffer
	if _, err := src.Export(&out, Filter{}); err != nil {
		t.Fatal(err)
	}
	dst := newMemStore(t)
	if _, err := dst.Import(ctx, &out); err != nil {
		t.Fatal(err)
	}
	i := 0
	if err := dst.Range(1, func(a Action) error {
		if a.ActionHash != want[i] {
			t.Errorf("action %d: hash %s after import, %s before", i+1, a.ActionHash, want[i])
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if i != len(raw) {
		t.Fatalf("imported %d actions, want %d", i, len(raw))
	}
}
