package loop

import (
	"context"
	"errors"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/rtfs"
)

// MetaCheckpoint is the metadata key of RunStarted (iteration 0) and
// IterationCompleted that holds the checkpoint commit of the work tree
// (DESIGN §19).
const MetaCheckpoint = "checkpoint"

// checkpoints is a run's checkpointer, opened on first use: nil c with
// done set means checkpoints are off for this run (the config says so,
// or the workdir is not in a git work tree, which is said once).
type checkpoints struct {
	done bool
	c    *gitx.Checkpointer
}

// checkpoint commits the work tree as the checkpoint after iteration n
// (0: the state the run starts from) and puts its hash on meta. A
// checkpoint that cannot be written is logged and left out: the run goes
// on, and its record says which iterations have none.
func (r *Runner) checkpoint(ctx context.Context, runID string, n int, meta map[string]rtfs.Value) {
	cp := &r.ckpt
	if !cp.done {
		cp.done = true
		cp.c = r.openCheckpoints(ctx, runID)
	}
	if cp.c == nil {
		return
	}
	commit, err := cp.c.Checkpoint(context.WithoutCancel(ctx), n)
	if err != nil {
		r.log.Warn("no checkpoint for this iteration", "iteration", n, "error", err)
		return
	}
	meta[MetaCheckpoint] = rtfs.String(commit)
}

func (r *Runner) openCheckpoints(ctx context.Context, runID string) *gitx.Checkpointer {
	loopCfg := r.o.Config.Loop
	if !loopCfg.CheckpointsOn() {
		return nil
	}
	repo, err := gitx.Open(ctx, loopCfg.Workdir)
	if errors.Is(err, gitx.ErrNotRepo) {
		r.log.Warn("checkpoints are off: the workdir is not in a git work tree, so ralph diff and ralph rollback have nothing to show; run git init there to have them, or set [loop] checkpoints = false to silence this",
			"workdir", loopCfg.Workdir)
		return nil
	}
	if err == nil {
		var c *gitx.Checkpointer
		if c, err = gitx.NewCheckpointer(repo, runID, loopCfg.Workdir, r.o.Store.Dir()); err == nil {
			return c
		}
	}
	r.log.Warn("checkpoints are off: git cannot be used in the workdir", "workdir", loopCfg.Workdir, "error", err)
	return nil
}

// closeCheckpoints removes the checkpointer's index when the run ends.
func (r *Runner) closeCheckpoints() {
	if r.ckpt.c == nil {
		return
	}
	if err := r.ckpt.c.Close(); err != nil {
		r.log.Warn("cannot remove the checkpoints' index", "error", err)
	}
}
