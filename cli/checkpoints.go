package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// runCheckpoints is what a run recorded of its checkpoints (DESIGN §19):
// the commit after each iteration (0: before the first), where its work
// tree is, and what ralph rollback did to it since.
type runCheckpoints struct {
	runID    string
	started  *ledger.Action
	closing  *ledger.Action // nil while the run goes on
	commits  map[int]string // by iteration
	last     int            // the last iteration with a checkpoint
	restores []ledger.Action
	cfg      *config.Config // the run's config snapshot (nil when it does not load)
	workdir  string
}

// readCheckpoints reads a run's checkpoints from its actions.
// runIDOf is the id of the run acts recorded (arg when they are none).
func runIDOf(acts []ledger.Action, arg string) string {
	if len(acts) > 0 {
		return acts[0].RunID
	}
	return arg
}

func readCheckpoints(runID string, acts []ledger.Action) (*runCheckpoints, error) {
	rc := &runCheckpoints{runID: runID, commits: map[int]string{}, last: -1}
	for i := range acts {
		a := &acts[i]
		switch a.Type {
		case ledger.RunStarted:
			rc.started = a
			if c := a.Metadata[loop.MetaCheckpoint].Str(); c != "" {
				rc.commits[0], rc.last = c, 0
			}
		case ledger.IterationCompleted:
			if c := a.Metadata[loop.MetaCheckpoint].Str(); c != "" {
				n := int(a.Metadata["iteration"].AsInt())
				rc.commits[n], rc.last = c, max(rc.last, n)
			}
		case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
			rc.closing = a
		case ledger.WorkspaceRestored:
			rc.restores = append(rc.restores, *a)
		}
	}
	if rc.started == nil {
		return nil, exitError(ExitUsage, fmt.Errorf("run %s has no RunStarted on this store's chain; pass the --store that recorded it", runID))
	}
	if cfg, err := config.Parse([]byte(rc.started.Metadata["config"].Str()), "the run's config snapshot", func(string) string { return "" }); err == nil {
		rc.cfg, rc.workdir = cfg, cfg.Loop.Workdir
	}
	return rc, nil
}

// need returns the repository and the commits of iterations ns, or a
// one-sentence error with the fix: no checkpoints, an iteration out of
// range, a workdir that is no git work tree any more, a pruned ref.
func (rc *runCheckpoints) need(ctx context.Context, ns ...int) (*gitx.Repo, []string, error) {
	if len(rc.commits) == 0 {
		return nil, nil, exitError(ExitUsage, fmt.Errorf("run %s recorded no checkpoints: its workdir was not a git work tree or [loop] checkpoints was false; run it again in a git work tree", rc.runID))
	}
	if rc.workdir == "" {
		return nil, nil, exitError(ExitUsage, fmt.Errorf("run %s's config snapshot does not load, so its workdir is unknown; it was recorded by another version of ralph", rc.runID))
	}
	repo, err := gitx.Open(ctx, rc.workdir)
	if errors.Is(err, gitx.ErrNotRepo) {
		return nil, nil, exitError(ExitUsage, fmt.Errorf("run %s's workdir %s is not a git work tree any more; its checkpoints went with it", rc.runID, rc.workdir))
	}
	if err != nil {
		return nil, nil, exitError(ExitUsage, fmt.Errorf("run %s's workdir %s: %w", rc.runID, rc.workdir, err))
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		c, ok := rc.commits[n]
		if !ok {
			return nil, nil, exitError(ExitUsage, fmt.Errorf("run %s has no checkpoint of iteration %d; it has iterations 0 to %d", rc.runID, n, rc.last))
		}
		ref := gitx.Ref(rc.runID, n)
		got, err := repo.Resolve(ctx, ref)
		if err != nil {
			return nil, nil, exitError(ExitFailure, err)
		}
		if got != c {
			return nil, nil, exitError(ExitUsage, fmt.Errorf("the checkpoint of iteration %d (%s) is gone from %s: its ref was pruned or moved; nothing was changed", n, ref, repo.Top))
		}
		out[i] = c
	}
	return repo, out, nil
}

// parseIteration reads an ITERATION argument.
func parseIteration(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, usageErrorf("ITERATION must be a whole number, 0 or more; got %q", s)
	}
	return n, nil
}
