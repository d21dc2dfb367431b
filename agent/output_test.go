package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/testenv"
)

// floodData is 64 MiB of numbered text lines with one line longer than
// MaxLine in the middle, and no newline at the end.
func floodData(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.Grow(64<<20 + MaxLine + 64)
	for i := 0; b.Len() < 32<<20; i++ {
		b.WriteString("flood line ")
		b.WriteString(strings.Repeat("abcdefgh", i%16))
		b.WriteString(" end\n")
	}
	b.WriteString(strings.Repeat("L", MaxLine+12345))
	b.WriteByte('\n')
	for i := 0; b.Len() < 64<<20; i++ {
		b.WriteString("second half ")
		b.WriteString(strings.Repeat("ß", i%7)) // multi-byte characters at the cut
		b.WriteByte('\n')
	}
	b.WriteString("last words")
	return b.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRunOutputFileFlood(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := floodData(t)
	src := filepath.Join(dir, "flood.txt")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "logs", "run", "step.out")
	var events, longest int
	res, err := Run(context.Background(), Options{CLI: "command", Command: []string{"cat", src}, Dir: dir,
		OutputFile: out, OnEvent: func(e Event) {
			events++
			longest = max(longest, len(e.Text))
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 0 || res.Output.Err != nil {
		t.Fatalf("exit %d, output error %v", res.Exit, res.Output.Err)
	}
	if res.Output.Path != out || res.Output.Bytes != int64(len(data)) || res.Output.SHA256 != sha(data) {
		t.Errorf("output %s %d bytes sha256 %s, want %s %d bytes %s", res.Output.Path, res.Output.Bytes, res.Output.SHA256,
			out, len(data), sha(data))
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("the output file differs from what the agent printed (%d bytes, want %d)", len(got), len(data))
	}
	for p, want := range map[string]os.FileMode{out: 0o600, filepath.Dir(out): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "run", "step.err")); !os.IsNotExist(err) {
		t.Errorf("a silent standard error left a file: %v", err)
	}
	// What stays in memory is bounded: the text's tail, a line cut at MaxLine.
	if len(res.Text) > MaxText || !strings.HasSuffix(res.Text, "\nlast words") || !utf8.ValidString(res.Text) {
		t.Errorf("text: %d bytes, valid UTF-8 %v, ending %q", len(res.Text), utf8.ValidString(res.Text), res.Text[max(0, len(res.Text)-20):])
	}
	lines := bytes.Count(data, []byte{'\n'}) + 1
	textBytes := int64(len(data)) - 12345 // the long line is parsed up to MaxLine; newlines join the lines again
	if res.TextCut != textBytes-int64(len(res.Text)) {
		t.Errorf("TextCut %d, want %d", res.TextCut, textBytes-int64(len(res.Text)))
	}
	// A plain-text agent's lines come in one event per read, the long line alone, cut at MaxLine.
	if events > lines/50 || longest != MaxLine {
		t.Errorf("%d events for %d lines, longest %d bytes; want one per read, the longest cut at %d", events, lines, longest, MaxLine)
	}
}

func TestRunOutputBinaryAndStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := make([]byte, 300<<10)
	for i := range bin {
		bin[i] = byte(i * 7 % 251) // NULs, invalid UTF-8, lone carriage returns, few newlines
	}
	src := filepath.Join(dir, "bin")
	if err := os.WriteFile(src, bin, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "logs", "call.out")
	res, err := Run(context.Background(), Options{CLI: "command", Dir: dir, OutputFile: out,
		Command: []string{"sh", "-c", `cat "$1"; printf 'oops\n' >&2; exit 3`, "sh", src}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 3 || res.Output.Bytes != int64(len(bin)) || res.Output.SHA256 != sha(bin) {
		t.Errorf("exit %d, output %d bytes %s; want 3, %d bytes %s", res.Exit, res.Output.Bytes, res.Output.SHA256, len(bin), sha(bin))
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, bin) {
		t.Error("the output file differs from the binary the agent printed")
	}
	errFile := filepath.Join(dir, "logs", "call.err")
	if res.ErrOutput.Path != errFile || res.ErrOutput.Bytes != 5 || res.ErrOutput.SHA256 != sha([]byte("oops\n")) {
		t.Errorf("stderr output %+v", res.ErrOutput)
	}
	if got, _ := os.ReadFile(errFile); string(got) != "oops\n" {
		t.Errorf("stderr file %q", got)
	}
	if len(res.Text) > MaxText {
		t.Errorf("text %d bytes, more than MaxText", len(res.Text))
	}
}

func TestRunOutputFileRedacted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := "sk-secret-0123456789"
	out := filepath.Join(dir, "x.out")
	res, err := Run(context.Background(), Options{CLI: "command", Dir: dir, OutputFile: out, Redact: []string{secret, "short"},
		Command: []string{"sh", "-c", `printf 'key=%s short\n' "$1"; printf '%s' "$1" >&2`, "sh", secret}})
	if err != nil {
		t.Fatal(err)
	}
	want := "key=[REDACTED] short\n"
	if got, _ := os.ReadFile(out); string(got) != want || res.Output.SHA256 != sha([]byte(want)) || res.Output.Bytes != int64(len(want)) {
		t.Errorf("file %q, output %+v; want %q and its digest", got, res.Output, want)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "x.err")); string(got) != "[REDACTED]" {
		t.Errorf("stderr file %q", got)
	}
}

func TestRunOutputFileUnwritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	block := filepath.Join(dir, "file")
	if err := os.WriteFile(block, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), Options{CLI: "command", Dir: dir, OutputFile: filepath.Join(block, "x.out"),
		Command: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "logs directory") {
		t.Errorf("err = %v, want one naming the output directory and the fix", err)
	}
}

func TestRedactorAcrossPieces(t *testing.T) {
	t.Parallel()
	secret := "SECRET-abcdefgh"
	in := "a " + secret + " b " + secret + secret + " c SECRET-abc"
	want := strings.ReplaceAll(in, secret, redacted)
	for size := 1; size <= len(in); size++ {
		r := newRedactor([]string{secret})
		var got []byte
		out := func(p []byte) { got = append(got, p...) }
		for i := 0; i < len(in); i += size {
			r.write([]byte(in[i:min(i+size, len(in))]), out)
		}
		r.flush(out)
		if string(got) != want {
			t.Fatalf("pieces of %d: %q, want %q", size, got, want)
		}
	}
}

func TestTextTail(t *testing.T) {
	t.Parallel()
	var tt textTail
	total := 0
	for i := 0; i < 10000; i++ {
		s := strings.Repeat("é", i%50)
		tt.add(s)
		total += len(s)
		if len(tt.b) > 2*MaxText+1 {
			t.Fatalf("the tail holds %d bytes", len(tt.b))
		}
	}
	total += 9999 // newlines
	text, cut := tt.text()
	if len(text) > MaxText || !utf8.ValidString(text) || int64(len(text))+cut != int64(total) {
		t.Errorf("text %d bytes (valid %v), cut %d, total %d", len(text), utf8.ValidString(text), cut, total)
	}
	if s, cut := tailString("short"); s != "short" || cut != 0 {
		t.Errorf("tailString(short) = %q, %d", s, cut)
	}
	big := strings.Repeat("x", MaxText+10)
	if s, cut := tailString(big); len(s) != MaxText || cut != 10 {
		t.Errorf("tailString(big) = %d bytes, cut %d", len(s), cut)
	}
}

func TestScanBlocks(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200<<10) // past the 64 KiB buffer
	huge := strings.Repeat("y", MaxLine+10)
	for _, in := range []string{
		"a\nb\n" + long + "\nc\nd\n" + huge + "\ne\n\nf",
		long + "\n" + huge,
		huge,
		"one\r\ntwo\r\n",
		"",
	} {
		// Read in pieces of every size class: the result is the same lines.
		for _, piece := range []int{1, 7, 4096, 100 << 10, len(in) + 1} {
			var got []string
			scanBlocks(&pieceReader{s: in, n: piece}, func(b []byte) { got = append(got, strings.Split(string(b), "\n")...) })
			var want []string
			for _, l := range strings.Split(in, "\n") {
				l = strings.TrimSuffix(l, "\r")
				if len(l) > MaxLine {
					l = l[:MaxLine]
				}
				if l != "" { // empty lines may be left out, as scanLines does
					want = append(want, l)
				}
			}
			var gotClean []string
			for _, l := range got {
				if l = strings.TrimSuffix(l, "\r"); l != "" {
					gotClean = append(gotClean, l)
				}
			}
			if strings.Join(gotClean, "\n") != strings.Join(want, "\n") {
				t.Fatalf("input of %d bytes in pieces of %d: %d lines back, want %d", len(in), piece, len(got), len(want))
			}
		}
	}
}

// pieceReader reads s at most n bytes at a time.
type pieceReader struct {
	s string
	n int
}

func (r *pieceReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.s)
	r.s = r.s[k:]
	return k, nil
}

// A disk that fills up (/dev/full) fails the file, not the call: the
// output is still parsed, and the Result says what went wrong.
func TestRunOutputFileWriteError(t *testing.T) {
	t.Parallel()
	testenv.File(t, "/dev/full")
	res, err := Run(context.Background(), Options{CLI: "command", Dir: t.TempDir(), OutputFile: "/dev/full",
		Command: []string{"sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line $i of the output; i=$((i+1)); done"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 0 || res.Output.Err == nil || !strings.Contains(res.Output.Err.Error(), "/dev/full") || res.Output.Bytes != 0 {
		t.Errorf("exit %d, output %+v: want the write error and no byte counted as written", res.Exit, res.Output)
	}
	if !strings.HasSuffix(res.Text, "line 1999 of the output") {
		t.Errorf("text %q: the output was not parsed", res.Text[max(0, len(res.Text)-40):])
	}
}
