package ledger

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/rtfs"
)

// setAction is the golden vector of docs/ledger.md §3.1 for sets: an
// InternalStep whose result is a set holding a set, a vector, a keyword
// and a string.
func setAction(t *testing.T) *Action {
	t.Helper()
	v, err := rtfs.ReadValue(`#{:b "a" #{2 1} [1 2]}`)
	if err != nil {
		t.Fatal(err)
	}
	return &Action{ActionID: "set", Type: InternalStep, Result: v, Success: true, Timestamp: time.Unix(0, 0).UTC()}
}

func TestSetCanonicalEncodingGolden(t *testing.T) {
	t.Parallel()
	a := setAction(t)
	if err := Validate(a); err != nil {
		t.Fatal(err)
	}
	enc := AppendCanonical(nil, a)
	const text = `#{"a" #{1 2} :b [1 2]}` // members sorted by their canonical text
	if !strings.Contains(string(enc), "\x00\x00\x00\x16"+text) {
		t.Errorf("encoding does not hold the result as length-prefixed %q:\n%s", text, hex.EncodeToString(enc))
	}
	const wantHash = "cb57eb6b1fe97ddc59e02309dcea9631fb50d9656251f70252cab03edf73b541"
	if got := ComputeActionHash(a).String(); got != wantHash {
		t.Errorf("action hash %s, want %s", got, wantHash)
	}
	back, err := DecodeCanonical(enc)
	if err != nil || !rtfs.Equal(back.Result, a.Result) || back.Result.Kind() != rtfs.KindSet {
		t.Fatalf("decode: %v, %s", err, rtfs.Print(back.Result))
	}
}

func TestSetJSONRoundTrip(t *testing.T) {
	t.Parallel()
	for _, src := range []string{`#{}`, `#{1 2}`, `{:tags #{:a :b} :n #{#{1} #{(quote x) "s"}}}`, `[#{nil} "#{not a set"]`} {
		v, err := rtfs.ReadValue(src)
		if err != nil {
			t.Fatal(err)
		}
		js := AppendValueJSON(nil, v)
		back, err := ValueFromJSON(js)
		if err != nil || rtfs.Print(back) != rtfs.Print(v) || !rtfs.Equal(back, v) {
			t.Errorf("%s → %s → %s (%v)", src, js, rtfs.Print(back), err)
		}
	}
	fn, err := rtfs.CompileString(`#{inc}`, rtfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := fn.Eval(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a := setAction(t)
	a.Result = v
	if err := Validate(a); err == nil || !strings.Contains(err.Error(), "not data") {
		t.Errorf("a set holding a function was accepted: %v", err)
	}
}
