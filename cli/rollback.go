package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/serve"
)

func newRollbackCmd() *cobra.Command {
	var storeFlag, to string
	var force bool
	cmd := &cobra.Command{
		Use:   "rollback RUN_ID --to ITERATION",
		Short: "Put a run's work tree back as it was after an iteration",
		Long: `Put the work tree of an ended run back as it was after iteration ITERATION
(0: before the run), from its checkpoint. Files the iteration did not have are
removed, ignored files are left alone, and HEAD, the branch, the index and the
stash are not touched.

It refuses when the work tree has changes that no checkpoint of the run holds,
naming them, unless --force. Either way it first commits the present state on
refs/ralph/RUN_ID/rollback/K, so the rollback can be undone, and records a
WorkspaceRestored action on the run's chain.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("rollback takes one RUN_ID, got %d argument(s)", len(args))
			}
			if to == "" {
				return usageErrorf("rollback needs --to ITERATION (0 is the state before the run)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseIteration(to)
			if err != nil {
				return err
			}
			dir, err := existingStoreDir(storeFlag)
			if err != nil {
				return err
			}
			st, err := openStore(ledger.Options{Dir: dir}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			runID, err := resolveRunRef(serve.LocalReader{Store: st}, runRefArg(args, 0), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return rollback(cmd, st, runID, n, force)
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.Flags().StringVar(&to, "to", "", "the `ITERATION` whose checkpoint to restore (0: before the run)")
	cmd.Flags().BoolVar(&force, "force", false, "restore even over changes no checkpoint holds (they are saved first)")
	return cmd
}

func rollback(cmd *cobra.Command, st *ledger.Store, runID string, n int, force bool) error {
	ctx := cmd.Context()
	acts, err := st.ByRun(runID)
	if err != nil {
		return exitError(ExitFailure, err)
	}
	if len(acts) == 0 {
		return exitError(ExitUsage, fmt.Errorf("run %s is not in store %s; pass the --store that recorded it (`ralph runs` lists this one's)", runID, st.Dir()))
	}
	rc, err := readCheckpoints(runID, acts)
	if err != nil {
		return err
	}
	if rc.closing == nil {
		return exitError(ExitUsage, fmt.Errorf("run %s has not ended: it is running or was interrupted; let it end (or `ralph resume %s` it to its end) before rolling its work tree back", runID, runID))
	}
	repo, cs, err := rc.need(ctx, n)
	if err != nil {
		return err
	}
	target := cs[0]
	dirRel, _ := repo.Rel(rc.workdir) // need opened repo from the workdir, so it is inside
	snap := gitx.Snapshotter{Repo: repo, Dir: dirRel, Index: filepath.Join(repo.GitDir, "ralph", "index-rollback-"+runID)}
	if rel, ok := repo.Rel(st.Dir()); ok {
		snap.Exclude = []string{rel}
	}
	defer removeIndex(cmd, snap.Index)
	at := rc.position()
	now, err := snap.Snapshot(ctx, at, fmt.Sprintf("ralph %s before rollback to iteration %d", runID, n))
	if err != nil {
		return exitError(ExitFailure, err)
	}
	held, err := rc.holds(ctx, repo, now)
	if err != nil {
		return exitError(ExitFailure, err)
	}
	if !held && !force {
		paths, err := repo.ChangedPaths(ctx, at, now)
		if err != nil {
			return exitError(ExitFailure, err)
		}
		return exitError(ExitFailure, fmt.Errorf("the work tree has changes that no checkpoint of run %s holds: %s; commit or stash them first, or pass --force to save them on a ref and roll back anyway; nothing was changed",
			runID, listPaths(paths)))
	}
	saved := fmt.Sprintf("refs/ralph/%s/rollback/%d", runID, len(rc.restores)+1)
	if err := repo.UpdateRef(ctx, saved, now); err != nil {
		return exitError(ExitFailure, err)
	}
	if err := repo.Restore(ctx, rc.workdir, now, target); err != nil {
		return exitError(ExitFailure, fmt.Errorf("%w; the state before is saved on %s", err, saved))
	}
	a := &ledger.Action{Type: ledger.WorkspaceRestored, RunID: runID, IntentID: rc.started.IntentID,
		ParentActionID: rc.started.ActionID, FunctionName: "rollback", Success: true,
		Metadata: map[string]rtfs.Value{
			"iteration": rtfs.Int(int64(n)), loop.MetaCheckpoint: rtfs.String(target),
			"before": rtfs.String(now), "before_ref": rtfs.String(saved), "workdir": rtfs.String(rc.workdir),
			"forced": rtfs.Bool(force && !held),
		}}
	if _, err := st.Append(context.WithoutCancel(ctx), a); err != nil {
		return exitError(ExitFailure, fmt.Errorf("the work tree is restored to iteration %d, but the chain could not record it: %w", n, err))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "restored the work tree of run %s to iteration %d (%s); the state before is on %s (seq %d)\n",
		runID, n, short(target), saved, a.Seq)
	return nil
}

// position is the checkpoint the work tree was last put at: the last
// rollback's, else the run's last.
func (rc *runCheckpoints) position() string {
	if k := len(rc.restores); k > 0 {
		return rc.restores[k-1].Metadata[loop.MetaCheckpoint].Str()
	}
	return rc.commits[rc.last]
}

// holds reports whether some checkpoint of the run (an iteration's, or a
// state saved before a rollback) has exactly the tree of commit.
func (rc *runCheckpoints) holds(ctx context.Context, repo *gitx.Repo, commit string) (bool, error) {
	want, err := repo.Tree(ctx, commit, "")
	if err != nil {
		return false, err
	}
	var cs []string
	for _, c := range rc.commits {
		cs = append(cs, c)
	}
	for _, r := range rc.restores {
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

func removeIndex(cmd *cobra.Command, path string) {
	if err := removeIfExists(path); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "ralph: cannot remove the temporary index %s: %v\n", path, err)
	}
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
