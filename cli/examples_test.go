package cli_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite examples/rtfs/*.out from the current output")

// TestExamples evaluates every program in examples/rtfs through the CLI and
// compares its output with the golden file beside it (NAME.out). Regenerate
// the golden files with: go test ./cli -run TestExamples -update
func TestExamples(t *testing.T) {
	t.Parallel()
	progs, err := filepath.Glob(filepath.Join("..", "examples", "rtfs", "*.rtfs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(progs) == 0 {
		t.Fatal("no examples found in examples/rtfs")
	}
	for _, prog := range progs {
		name := strings.TrimSuffix(filepath.Base(prog), ".rtfs")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := run(t, context.Background(), "", "eval", prog)
			if code != 0 {
				t.Fatalf("ralph eval %s: exit %d: %s", prog, code, errOut)
			}
			golden := strings.TrimSuffix(prog, ".rtfs") + ".out"
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (create it with -update)", err)
			}
			if diff := cmp.Diff(string(want), out); diff != "" {
				t.Errorf("ralph eval %s differs from %s (-want +got):\n%s", prog, golden, diff)
			}

			// fmt is idempotent on every example.
			canon, errOut, code := run(t, context.Background(), "", "fmt", prog)
			if code != 0 {
				t.Fatalf("ralph fmt %s: exit %d: %s", prog, code, errOut)
			}
			again, errOut, code := run(t, context.Background(), canon, "fmt", "-")
			if code != 0 {
				t.Fatalf("ralph fmt of the canonical %s: exit %d: %s", prog, code, errOut)
			}
			if diff := cmp.Diff(canon, again); diff != "" {
				t.Errorf("ralph fmt is not idempotent on %s (-once +twice):\n%s", prog, diff)
			}
		})
	}
}
