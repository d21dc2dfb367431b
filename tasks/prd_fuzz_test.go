package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParsePRD: any bytes are read without a panic; a refusal is an
// *Error at a real position; an accepted file can have each of its
// stories marked done, and the marked file reads back the same but for
// that story's Done.
func FuzzParsePRD(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "sources", "prd", "*.json"))
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
	f.Add([]byte(`{"userStories":[{"id":"a","title":"b","passes":false,"dependsOn":["a"]}],"branchName":"x"}`))
	f.Add([]byte("{\"userStories\":[{\"id\":\"é\",\"title\":\"\\u00e9\\n\"}]}"))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := parsePRD("f.json", src)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Pos.File != "f.json" {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		for i, s := range d.stories {
			if i == 50 {
				break // each check re-reads the file: 50 are enough to find a fault, and keep a big input fast
			}
			out, err := markPRD("f.json", src, s.task.ID)
			if err != nil {
				t.Fatalf("mark %q: %v", s.task.ID, err)
			}
			if out == nil {
				if !s.task.Done {
					t.Fatalf("mark %q changed nothing, but it was not done", s.task.ID)
				}
				continue
			}
			d2, err := parsePRD("f.json", out)
			if err != nil {
				t.Fatalf("the marked file does not read back: %v\n%s", err, out)
			}
			if len(d2.stories) != len(d.stories) || d2.branch != d.branch {
				t.Fatalf("marking changed the stories or the branch:\n%s", out)
			}
			for j := range d.stories {
				want, got := d.stories[j].task, d2.stories[j].task
				if j == i {
					want.Done = true
				}
				want.Pos, got.Pos = Pos{}, Pos{}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("story %d after marking %q (-want +got):\n%s", j, s.task.ID, diff)
				}
			}
		}
	})
}
