package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
)

// RunCheckpoints is what a run recorded of its checkpoints (DESIGN §19):
// the commit after each iteration (0: before the first), where its work
// tree is, and what ralph rollback did to it since.
type RunCheckpoints struct {
	RunID    string
	Started  *ledger.Action
	Closing  *ledger.Action // nil while the run goes on
	Commits  map[int]string // by iteration
	Last     int            // the last iteration with a checkpoint
	Restores []ledger.Action
	Config   *config.Config // the run's config snapshot (nil when it does not load)
	Workdir  string
}

// RunIDOf is the id of the run acts recorded (arg when they are none).
func RunIDOf(acts []ledger.Action, arg string) string {
	if len(acts) > 0 {
		return acts[0].RunID
	}
	return arg
}

// ReadCheckpoints reads a run's checkpoints from its actions; a run with no
// RunStarted is a usage error.
func ReadCheckpoints(runID string, acts []ledger.Action) (*RunCheckpoints, error) {
	rc := &RunCheckpoints{RunID: runID, Commits: map[int]string{}, Last: -1}
	for i := range acts {
		a := &acts[i]
		switch a.Type {
		case ledger.RunStarted:
			rc.Started = a
			if c := a.Metadata[MetaCheckpoint].Str(); c != "" {
				rc.Commits[0], rc.Last = c, 0
			}
		case ledger.IterationCompleted:
			if c := a.Metadata[MetaCheckpoint].Str(); c != "" {
				n := int(a.Metadata["iteration"].AsInt())
				rc.Commits[n], rc.Last = c, max(rc.Last, n)
			}
		case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
			rc.Closing = a
		case ledger.WorkspaceRestored:
			rc.Restores = append(rc.Restores, *a)
		}
	}
	if rc.Started == nil {
		return nil, usage.Wrap(fmt.Errorf("run %s has no RunStarted on this store's chain; pass the --store that recorded it", runID))
	}
	if cfg, err := config.Parse([]byte(rc.Started.Metadata["config"].Str()), "the run's config snapshot", func(string) string { return "" }); err == nil {
		rc.Config, rc.Workdir = cfg, cfg.Loop.Workdir
	}
	return rc, nil
}

// Need returns the repository and the commits of iterations ns, or a
// one-sentence error with the fix: no checkpoints, an iteration out of
// range, a workdir that is no git work tree any more, a pruned ref.
func (rc *RunCheckpoints) Need(ctx context.Context, ns ...int) (*gitx.Repo, []string, error) {
	if len(rc.Commits) == 0 {
		return nil, nil, usage.Wrap(fmt.Errorf("run %s recorded no checkpoints: its workdir was not a git work tree or [loop] checkpoints was false; run it again in a git work tree", rc.RunID))
	}
	if rc.Workdir == "" {
		return nil, nil, usage.Wrap(fmt.Errorf("run %s's config snapshot does not load, so its workdir is unknown; it was recorded by another version of ralph", rc.RunID))
	}
	repo, err := gitx.Open(ctx, rc.Workdir)
	if errors.Is(err, gitx.ErrNotRepo) {
		return nil, nil, usage.Wrap(fmt.Errorf("run %s's workdir %s is not a git work tree any more; its checkpoints went with it", rc.RunID, rc.Workdir))
	}
	if err != nil {
		return nil, nil, usage.Wrap(fmt.Errorf("run %s's workdir %s: %w", rc.RunID, rc.Workdir, err))
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		c, ok := rc.Commits[n]
		if !ok {
			return nil, nil, usage.Wrap(fmt.Errorf("run %s has no checkpoint of iteration %d; it has iterations 0 to %d", rc.RunID, n, rc.Last))
		}
		ref := gitx.Ref(rc.RunID, n)
		got, err := repo.Resolve(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		if got != c {
			return nil, nil, usage.Wrap(fmt.Errorf("the checkpoint of iteration %d (%s) is gone from %s: its ref was pruned or moved; nothing was changed", n, ref, repo.Top))
		}
		out[i] = c
	}
	return repo, out, nil
}

// Repo is the git work tree of the run's checkpoints, or nil when the run
// has none there.
func (rc *RunCheckpoints) Repo(ctx context.Context) *gitx.Repo {
	if len(rc.Commits) == 0 || rc.Workdir == "" {
		return nil
	}
	repo, err := gitx.Open(ctx, rc.Workdir)
	if err != nil {
		return nil
	}
	return repo
}

// Worktrees checks iterations' checkpoints out in temporary git worktrees:
// a checkpoint's root is the run's workdir, so the worktree is the workdir
// as it was.
type Worktrees struct {
	repo *gitx.Repo
	rc   *RunCheckpoints
	mu   sync.Mutex // git worktree add and remove, one at a time
}

// NewWorktrees checks the checkpoints of rc out of repo (rc.Repo).
func NewWorktrees(repo *gitx.Repo, rc *RunCheckpoints) *Worktrees {
	return &Worktrees{repo: repo, rc: rc}
}

// Dir is a stop.Rerun's Dir: iteration n's checkpoint checked out in a
// temporary worktree, and the function that removes it.

func (w *Worktrees) Dir(ctx context.Context, n int) (string, func(), error) {
	c, ok := w.rc.Commits[n]
	if !ok {
		return "", nil, usage.Wrap(fmt.Errorf("run %s has no checkpoint of iteration %d to rerun its checks on; replay without --rerun", w.rc.RunID, n))
	}
	tmp, err := os.MkdirTemp("", fmt.Sprintf("ralph-replay-%d-*", n))
	if err != nil {
		return "", nil, err
	}
	tree := filepath.Join(tmp, "tree")
	w.mu.Lock()
	// No hook of the repository runs for it (post-checkout): only the checks.
	_, err = gitx.Run(ctx, w.repo.Top, "-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--quiet", tree, c)
	w.mu.Unlock()
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("check out iteration %d's checkpoint: %s", n, gitx.Message(err))
	}
	release := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		// The worktree is ralph's own: removing it forgets its metadata too.
		_, _ = gitx.Run(context.WithoutCancel(ctx), w.repo.Top, "worktree", "remove", "--force", tree)
		os.RemoveAll(tmp)
	}
	return tree, release, nil
}

// IterationChange is one iteration's change, as ralph diff --json prints
// it.
type IterationChange struct {
	RunID     string          `json:"run_id"`
	Iteration int             `json:"iteration"`
	From      string          `json:"from"` // the checkpoint before it
	To        string          `json:"to"`   // its own checkpoint
	Added     int             `json:"added"`
	Deleted   int             `json:"deleted"`
	Files     []gitx.FileStat `json:"files"` // never nil
}

// Change is what iteration n changed: the files between the checkpoints
// of iterations n-1 and n, with their lines added and deleted.
func (rc *RunCheckpoints) Change(ctx context.Context, n int) (IterationChange, error) {
	repo, cs, err := rc.Need(ctx, n-1, n)
	if err != nil {
		return IterationChange{}, err
	}
	return rc.change(ctx, repo, n, cs[0], cs[1])
}

// change is Change of iteration n, whose checkpoints from and to are in
// repo.
func (rc *RunCheckpoints) change(ctx context.Context, repo *gitx.Repo, n int, from, to string) (IterationChange, error) {
	files, err := repo.DiffStat(ctx, from, to)
	if err != nil {
		return IterationChange{}, err
	}
	c := IterationChange{RunID: rc.RunID, Iteration: n, From: from, To: to, Files: files}
	if c.Files == nil {
		c.Files = []gitx.FileStat{}
	}
	for _, f := range files {
		c.Added += f.Added
		c.Deleted += f.Deleted
	}
	return c, nil
}

// IterationDiff is what iteration it of run runID changed, from the
// checkpoints acts record: the files with their line counts, and the
// diff between the checkpoints of iterations it-1 and it.
func IterationDiff(ctx context.Context, runID string, acts []ledger.Action, it int) ([]gitx.FileStat, string, error) {
	rc, err := ReadCheckpoints(runID, acts)
	if err != nil {
		return nil, "", err
	}
	repo, cs, err := rc.Need(ctx, it-1, it)
	if err != nil {
		return nil, "", err
	}
	c, err := rc.change(ctx, repo, it, cs[0], cs[1])
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	if err := repo.Diff(ctx, &b, cs[0], cs[1], false, false); err != nil {
		return nil, "", err
	}
	return c.Files, b.String(), nil
}
