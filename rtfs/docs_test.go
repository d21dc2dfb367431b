package rtfs

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestDocsExamples runs every ```rtfs block of docs/rtfs.md: the program's
// value must print as the block's ";=> " line, or its error must contain
// the ";=! " text.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../docs/rtfs.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for i, chunk := range strings.Split(string(data), "```rtfs\n")[1:] {
		block, _, ok := strings.Cut(chunk, "```")
		if !ok {
			t.Fatalf("block %d is not closed", i)
		}
		var prog []string
		var want, wantErr string
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			switch {
			case strings.HasPrefix(line, ";=> "):
				want = strings.TrimPrefix(line, ";=> ")
			case strings.HasPrefix(line, ";=! "):
				wantErr = strings.TrimPrefix(line, ";=! ")
			default:
				prog = append(prog, line)
			}
		}
		if want == "" && wantErr == "" {
			t.Errorf("block %d has no ;=> or ;=! line", i)
			continue
		}
		blocks++
		src := strings.Join(prog, "\n")
		p, err := CompileString(src, Options{File: "doc"})
		var v Value
		if err == nil {
			v, err = p.Eval(context.Background())
		}
		switch {
		case wantErr != "":
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("block %d:\n%s\ngot %v, want an error containing %q", i, src, err, wantErr)
			}
		case err != nil:
			t.Errorf("block %d:\n%s\nfailed: %v", i, src, err)
		case Print(v) != want:
			t.Errorf("block %d:\n%s\ngot  %s\nwant %s", i, src, Print(v), want)
		}
	}
	if blocks < 10 {
		t.Errorf("only %d checked examples in docs/rtfs.md", blocks)
	}
}
