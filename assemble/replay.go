package assemble

import (
	"context"

	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// ReplayOptions say how Replay treats the conditions that read the world
// (command, file_exists, file_contains) when they differ from the run's.
type ReplayOptions struct {
	// Rerun checks them against each iteration's checkpoint in a
	// temporary git worktree, Jobs iterations at once; without it they
	// are unknown. ralph web never sets it: a page runs no command.
	Rerun bool
	Jobs  int
}

// Replay evaluates the [[stop]] conditions of cfg against a recorded run,
// given as its actions (acts; runArg is how the user named it), through the
// same evaluator the runner uses: where cfg would have stopped it and why
// (ralph replay, ralph view --replay, ralph web's what-if form). A config
// without conditions, or a Rerun of a run without checkpoints, is a usage
// error; a config the conditions cannot be built from is a *ConfigError.
func Replay(ctx context.Context, cfg *config.Config, acts []ledger.Action, runArg string, o ReplayOptions) (*stop.ReplayResult, error) {
	chk, err := Check(cfg, CheckOptions{Paths: NoPaths})
	if err != nil {
		return nil, err
	}
	conds := chk.Conditions
	if len(conds) == 0 {
		return nil, usage.Errorf("%s has no [[stop]] conditions to replay; add the ones to try, such as a max_iterations", cfg.File)
	}
	rc, err := loop.ReadCheckpoints(loop.RunIDOf(acts, runArg), acts)
	if err != nil {
		return nil, err
	}
	ro := stop.ReplayOptions{Specs: cfg.Stop, Conditions: conds, Workdir: cfg.Loop.Workdir, RecordedWorkdir: rc.Workdir,
		EchoesStored: func(id string) bool { s, ok := builtin.Lookup(id); return ok && s.EchoesStored }}
	if rc.Config != nil {
		ro.RecordedSpecs = rc.Config.Stop
	}
	repo := rc.Repo(ctx)
	if repo != nil {
		ro.Workspace = func(n int) string {
			c, ok := rc.Commits[n]
			if !ok {
				return ""
			}
			t, err := repo.Tree(ctx, c, "")
			if err != nil {
				return ""
			}
			return t
		}
	}
	if o.Rerun {
		if repo == nil {
			return nil, usage.Errorf("--rerun checks conditions against the run's checkpoints, and run %s has none in a git work tree; replay without --rerun", rc.RunID)
		}
		ro.Rerun = &stop.Rerun{Dir: loop.NewWorktrees(repo, rc).Dir, Jobs: max(o.Jobs, 1)}
	}
	res, err := stop.Replay(ctx, acts, ro)
	if err != nil {
		return nil, err
	}
	if n := rc.Closing; n != nil {
		res.RecordedIterations = int(n.Metadata["iterations"].AsInt())
	}
	return res, nil
}
