package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseChecklist: any bytes are read without a panic; a refusal is an
// *Error at a real position; ticking any open task changes one byte, and
// the file reads back the same but for that task's Done.
func FuzzParseChecklist(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "sources", "checklist", "*.md"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("- [ ] a\n    - [ ] b\n\t* [X] c\n```\n- [ ] d"))
	f.Fuzz(func(t *testing.T, src []byte) {
		items, err := parseChecklist("c.md", src)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Pos.Line < 1 || e.Pos.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		for i, it := range items {
			if i == 50 {
				break // each check re-reads the file: 50 are enough to find a fault, and keep a big input fast
			}
			if src[it.box-1] != '[' || src[it.box+1] != ']' {
				t.Fatalf("task %s's box is not at %d", it.task.ID, it.box)
			}
			out, err := markChecklist("c.md", src, it.task)
			if err != nil {
				t.Fatalf("tick %s: %v", it.task.ID, err)
			}
			if out == nil {
				if !it.task.Done {
					t.Fatalf("ticking open task %s changed nothing", it.task.ID)
				}
				continue
			}
			back, err := parseChecklist("c.md", out)
			if err != nil || len(back) != len(items) {
				t.Fatalf("ticked file reads back as %d items, %v", len(back), err)
			}
			for j := range items {
				want := items[j].task
				if j == i {
					want.Done = true
				}
				if diff := cmp.Diff(want, back[j].task); diff != "" {
					t.Fatalf("task %d after ticking %s (-want +got):\n%s", j, it.task.ID, diff)
				}
			}
		}
	})
}
