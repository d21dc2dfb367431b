package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// A loop whose iterations end in Workspace.Commit leaves one commit per
// iteration on its branch, each named by its IterationCompleted, and
// LastCommit is the branch's tip.
func TestLoopCommitsEachIterationToItsBranch(t *testing.T) {
	gitHome(t)
	ctx := ctxT(t)
	bare, _ := sharedRemote(t)
	runID := loop.NewID()
	ws, err := PrepareWorkspace(ctx, bare, "", filepath.Join(t.TempDir(), "ws"), runID, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
[intent]
goal = "write out.txt"
[plan]
rtfs = '(step "Write" (call :fs.write {:path "out.txt" :content (str "iteration " (:iteration ctx))}))'
[[stop]]
kind = "max_iterations"
max = 3
`), filepath.Join(ws.Dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	run, err := assemble.NewRun(ctx, cfg, assemble.RunOptions{Open: assemble.InMemory, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	store := run.Store
	t.Cleanup(func() { store.Close() })
	run.Options.OnIterationEnd = func(ctx context.Context, iteration int) (map[string]rtfs.Value, error) {
		sha, err := ws.Commit(ctx, iteration)
		return map[string]rtfs.Value{"commit": rtfs.String(sha), "branch": rtfs.String(ws.Branch)}, err
	}
	r, err := run.NewRunner()
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(ctx)
	if err != nil || out.Iterations != 3 {
		t.Fatalf("run: %+v %v", out, err)
	}
	acts, err := store.ByRun(runID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range acts {
		if a.Type != ledger.IterationCompleted {
			continue
		}
		n++
		sha := a.Metadata["commit"].Str()
		if subject := mustGit(t, bare, "log", "-1", "--format=%s", sha); subject != fmt.Sprintf("ralph %s iteration %d", runID, n) {
			t.Errorf("iteration %d's commit %s is %q", n, sha, subject)
		}
		if content := mustGit(t, bare, "show", sha+":out.txt"); content != fmt.Sprintf("iteration %d", n) {
			t.Errorf("iteration %d's out.txt is %q", n, content)
		}
		if a.Metadata["branch"].Str() != "ralph/"+runID {
			t.Errorf("iteration %d's branch %q", n, a.Metadata["branch"].Str())
		}
	}
	if got := branchLog(t, bare, "ralph/"+runID); len(got) != 4 {
		t.Errorf("branch log %q, want 3 iterations on the seed", got)
	}
	if tip := mustGit(t, bare, "rev-parse", "ralph/"+runID); loop.LastCommit(acts) != tip {
		t.Errorf("LastCommit %s, branch tip %s", loop.LastCommit(acts), tip)
	}
}
