package loop

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
)

func gitInit(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("git", "init", "-q", dir)
	cmd.Env = gitx.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	return dir
}

func TestRunnerCheckpointsEachIteration(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		dir := gitInit(t)
		toml := "[loop]\nworkdir = \"" + dir + "\"\n"
		if !on {
			toml += "checkpoints = false\n"
		}
		toml += "[plan]\nrtfs = '(step \"Echo\" (call :ccos.echo {:message \"hi\"}))'\n[[stop]]\nkind = \"max_iterations\"\nmax = 3\n"
		r, fx := newRunner(t, toml, nil)
		out, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		repo, err := gitx.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		acts := append(runTypes(t, fx, out.RunID, ledger.RunStarted), runTypes(t, fx, out.RunID, ledger.IterationCompleted)...)
		if len(acts) != 4 {
			t.Fatalf("%d RunStarted and IterationCompleted actions, want 4", len(acts))
		}
		prev := ""
		for n, a := range acts {
			got := a.Metadata[MetaCheckpoint].Str()
			ref, err := repo.Resolve(context.Background(), gitx.Ref(out.RunID, n))
			if err != nil {
				t.Fatal(err)
			}
			if !on {
				if got != "" || ref != "" {
					t.Fatalf("checkpoints = false, yet iteration %d has checkpoint %q, ref %q", n, got, ref)
				}
				continue
			}
			if got == "" || got != ref {
				t.Fatalf("iteration %d records checkpoint %q, its ref holds %q", n, got, ref)
			}
			if prev != "" {
				if p, _ := gitx.Run(context.Background(), dir, "rev-parse", got+"^"); p != prev {
					t.Fatalf("checkpoint %d's parent is %s, want %s", n, p, prev)
				}
			}
			prev = got
		}
		if left, _ := filepath.Glob(filepath.Join(repo.GitDir, "ralph", "index-*")); len(left) != 0 {
			t.Fatalf("the checkpoints' index outlived the run: %v", left)
		}
	}
}
