package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// Restored is what Rollback did: the checkpoint it put the work tree at,
// the ref the state before was saved on, and the seq of the
// WorkspaceRestored it recorded.
type Restored struct {
	Target, Saved string
	Seq           uint64
}

// Rollback puts the work tree of the ended run runID back as it was after
// iteration n (ralph rollback): it saves the state before on a ref, refuses
// (unless force) when that state has changes no checkpoint of the run holds,
// restores the checkpoint and records a WorkspaceRestored on st. A warning
// that cannot change the result goes to errOut.
func Rollback(ctx context.Context, st *ledger.Store, runID string, n int, force bool, errOut io.Writer) (Restored, error) {
	acts, err := st.ByRun(runID)
	if err != nil {
		return Restored{}, err
	}
	if len(acts) == 0 {
		return Restored{}, usage.Wrap(fmt.Errorf("run %s is not in store %s; pass the --store that recorded it (`ralph runs` lists this one's)", runID, st.Dir()))
	}
	rc, err := ReadCheckpoints(runID, acts)
	if err != nil {
		return Restored{}, err
	}
	if rc.Closing == nil {
		return Restored{}, usage.Wrap(fmt.Errorf("run %s has not ended: it is running or was interrupted; let it end (or `ralph resume %s` it to its end) before rolling its work tree back", runID, runID))
	}
	repo, cs, err := rc.Need(ctx, n)
	if err != nil {
		return Restored{}, err
	}
	target := cs[0]
	dirRel, _ := repo.Rel(rc.Workdir) // need opened repo from the workdir, so it is inside
	snap := gitx.Snapshotter{Repo: repo, Dir: dirRel, Index: filepath.Join(repo.GitDir, "ralph", "index-rollback-"+runID)}
	if rel, ok := repo.Rel(st.Dir()); ok {
		snap.Exclude = []string{rel}
	}
	defer removeIndex(errOut, snap.Index)
	at := rc.Position()
	now, err := snap.Snapshot(ctx, at, fmt.Sprintf("ralph %s before rollback to iteration %d", runID, n))
	if err != nil {
		return Restored{}, err
	}
	held, err := rc.Holds(ctx, repo, now)
	if err != nil {
		return Restored{}, err
	}
	if !held && !force {
		paths, err := repo.ChangedPaths(ctx, at, now)
		if err != nil {
			return Restored{}, err
		}
		return Restored{}, fmt.Errorf("the work tree has changes that no checkpoint of run %s holds: %s; commit or stash them first, or pass --force to save them on a ref and roll back anyway; nothing was changed",
			runID, listPaths(paths))
	}
	saved := fmt.Sprintf("refs/ralph/%s/rollback/%d", runID, len(rc.Restores)+1)
	if err := repo.UpdateRef(ctx, saved, now); err != nil {
		return Restored{}, err
	}
	if err := repo.Restore(ctx, rc.Workdir, now, target); err != nil {
		return Restored{}, fmt.Errorf("%w; the state before is saved on %s", err, saved)
	}
	a := &ledger.Action{Type: ledger.WorkspaceRestored, RunID: runID, IntentID: rc.Started.IntentID,
		ParentActionID: rc.Started.ActionID, FunctionName: "rollback", Success: true,
		Metadata: map[string]rtfs.Value{
			"iteration": rtfs.Int(int64(n)), MetaCheckpoint: rtfs.String(target),
			"before": rtfs.String(now), "before_ref": rtfs.String(saved), "workdir": rtfs.String(rc.Workdir),
			"forced": rtfs.Bool(force && !held),
		}}
	if _, err := st.Append(context.WithoutCancel(ctx), a); err != nil {
		return Restored{}, fmt.Errorf("the work tree is restored to iteration %d, but the chain could not record it: %w", n, err)
	}
	return Restored{Target: target, Saved: saved, Seq: a.Seq}, nil
}

// Position is the checkpoint the work tree was last put at: the last
// rollback's, else the run's last.
func (rc *RunCheckpoints) Position() string {
	if k := len(rc.Restores); k > 0 {
		return rc.Restores[k-1].Metadata[MetaCheckpoint].Str()
	}
	return rc.Commits[rc.Last]
}

// Holds reports whether some checkpoint of the run (an iteration's, or a
// state saved before a rollback) has exactly the tree of commit.
func (rc *RunCheckpoints) Holds(ctx context.Context, repo *gitx.Repo, commit string) (bool, error) {
	want, err := repo.Tree(ctx, commit, "")
	if err != nil {
		return false, err
	}
	var cs []string
	for _, c := range rc.Commits {
		cs = append(cs, c)
	}
	for _, r := range rc.Restores {
		cs = append(cs, r.Metadata["before"].Str())
	}
	for _, c := range cs {
		if t, err := repo.Tree(ctx, c, ""); err == nil && t == want {
			return true, nil
		}
	}
	return false, nil
}

func listPaths(paths []string) string {
	if len(paths) > 10 {
		return strings.Join(paths[:10], ", ") + fmt.Sprintf(" and %d more", len(paths)-10)
	}
	return strings.Join(paths, ", ")
}

func removeIndex(errOut io.Writer, path string) {
	if err := removeIfExists(path); err != nil {
		fmt.Fprintf(errOut, "ralph: cannot remove the temporary index %s: %v\n", path, err)
	}
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
