package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

// BenchmarkAgentFlood measures the whole reading path of a real process's
// output, in MB/s: the pipe, the line reader, the parser, the accumulator
// and the output file (written and hashed), for a plain-text agent (cli
// "command") and for Claude's stream-json (the recorded transcript
// repeated). The agent is cat of a 64 MiB file; events go nowhere.
func BenchmarkAgentFlood(b *testing.B) {
	dir := b.TempDir()
	var plain strings.Builder
	for i := 0; plain.Len() < 64<<20; i++ {
		plain.WriteString("line of the flood: the agent explains, at some length, what it changes and why it does.\n")
	}
	claude := transcript(b, "claude.jsonl")
	var cl strings.Builder
	for cl.Len() < 64<<20 {
		cl.WriteString(claude)
	}
	for _, c := range []struct{ name, cli, data string }{{"plain", "command", plain.String()}, {"claude", "claude", cl.String()}} {
		src := filepath.Join(dir, c.name)
		if err := os.WriteFile(src, []byte(c.data), 0o600); err != nil {
			b.Fatal(err)
		}
		cat := testenv.Tool(b, "cat")
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			o := Options{CLI: c.cli, Command: []string{cat, src}, Dir: dir, OutputFile: filepath.Join(dir, "out", c.name+".out"),
				LookPath: func(string) (string, error) { return filepath.Join(dir, "claude-"+c.name), nil }}
			if c.cli == "claude" { // a claude that prints the file
				script := "#!/bin/sh\nexec " + cat + " " + src + "\n"
				if err := os.WriteFile(filepath.Join(dir, "claude-"+c.name), []byte(script), 0o700); err != nil {
					b.Fatal(err)
				}
			} else {
				o.LookPath = exec.LookPath
			}
			for b.Loop() {
				res, err := Run(context.Background(), o)
				if err != nil || res.Output.Bytes != int64(len(c.data)) {
					b.Fatalf("err %v, %d bytes written of %d", err, res.Output.Bytes, len(c.data))
				}
			}
		})
	}
}
