package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchStream repeats a recorded transcript until it is about 10 MB.
func benchStream(b *testing.B, file string) []byte {
	b.Helper()
	one := []byte(transcript(b, file))
	var buf bytes.Buffer
	for buf.Len() < 10<<20 {
		buf.Write(one)
	}
	return buf.Bytes()
}

// realStream is every transcript recorded from the real CLI (testdata/real/
// CLI-VERSION-*.jsonl, in name order) repeated until about 10 MB.
func realStream(b *testing.B, cli string) []byte {
	b.Helper()
	files, err := filepath.Glob("testdata/real/" + cli + "-*.jsonl")
	if err != nil || len(files) == 0 {
		b.Fatalf("no recorded %s transcripts: %v", cli, err)
	}
	var one []byte
	for _, f := range files {
		t, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		one = append(one, t...)
		if len(t) > 0 && t[len(t)-1] != '\n' {
			one = append(one, '\n')
		}
	}
	var buf bytes.Buffer
	for buf.Len() < 10<<20 {
		buf.Write(one)
	}
	return buf.Bytes()
}

// BenchmarkAgent measures the stream parsers in MB/s, each beside the
// baseline of decoding the same lines into map[string]any with
// encoding/json: on the hand-written transcripts (parse-claude,
// parse-codex) and on every transcript recorded from the real CLIs
// (parse-claude-real, parse-codex-real).
func BenchmarkAgent(b *testing.B) {
	for _, f := range []struct {
		name, cli string
		stream    []byte
	}{
		{"claude", "claude", benchStream(b, "claude.jsonl")},
		{"codex", "codex", benchStream(b, "codex.jsonl")},
		{"claude-real", "claude", realStream(b, "claude")},
		{"codex-real", "codex", realStream(b, "codex")},
	} {
		stream := f.stream
		b.Run("parse-"+f.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			var n int
			emit := func(Event) { n++ }
			for b.Loop() {
				p := backendFor(f.cli).newParser(time.Now)
				scanLines(bytes.NewReader(stream), func(l []byte) { p.line(l, emit) })
			}
			if n == 0 {
				b.Fatal("no events")
			}
		})
		b.Run("json-map-"+f.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				scanLines(bytes.NewReader(stream), func(l []byte) {
					var m map[string]any
					if err := json.Unmarshal(l, &m); err != nil {
						b.Fatal(err)
					}
				})
			}
		})
	}
}
