package agent

import (
	"bytes"
	"encoding/json"
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

// BenchmarkAgent measures the stream parsers in MB/s, each beside the
// baseline of decoding the same lines into map[string]any with
// encoding/json.
func BenchmarkAgent(b *testing.B) {
	for _, f := range []struct{ cli, file string }{{"claude", "claude.jsonl"}, {"codex", "codex.jsonl"}} {
		stream := benchStream(b, f.file)
		b.Run("parse-"+f.cli, func(b *testing.B) {
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
		b.Run("json-map-"+f.cli, func(b *testing.B) {
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
