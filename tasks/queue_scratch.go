package tasks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
)

// prepare makes the scratch work tree hold tree on top of tip (HEAD at
// tip, the index and the files at tree, as after `git cherry-pick
// --no-commit`) and returns its directory. The work tree is made on the
// first merge and then reused: only the files that differ are written.
func (q *Queue) prepare(ctx context.Context, tree, tip string) (string, error) {
	if q.scratch == "" {
		if err := q.makeScratch(ctx, tip); err != nil {
			return "", err
		}
	}
	if q.dirty {
		if _, err := git(ctx, q.scratch, nil, "clean", "-ffdq"); err != nil {
			return "", failed("clean the scratch work tree", err)
		}
	}
	if _, err := git(ctx, q.scratch, nil, "read-tree", "-u", "--reset", tree); err != nil {
		return "", failed("check the merged tree out in the scratch work tree", err)
	}
	if _, err := git(ctx, q.scratch, nil, "update-ref", "--no-deref", "-m", "ralph: merge queue", "HEAD", tip); err != nil {
		return "", failed("point the scratch work tree at "+q.t.Branch, err)
	}
	q.dirty = false
	return q.scratch, nil
}

// makeScratch adds the scratch work tree, detached at tip, in place of
// one a killed queue left.
func (q *Queue) makeScratch(ctx context.Context, tip string) error {
	abs, err := filepath.Abs(q.o.Scratch)
	if err != nil {
		return fmt.Errorf("scratch directory %s: %w", q.o.Scratch, err)
	}
	if _, inside := (&gitx.Repo{Top: q.t.Dir}).Rel(abs); inside {
		return fmt.Errorf("the merge queue's scratch directory %s is inside the repository's work tree %s: choose one outside it", abs, q.t.Dir)
	}
	if err := q.removeLeftover(ctx, abs); err != nil {
		return err
	}
	// -f: a registration whose directory is gone (removed by hand) is
	// taken over.
	if _, err := q.t.worktree(ctx, "add", "-q", "-f", "--detach", abs, tip); err != nil {
		return failed("add the scratch work tree "+abs, err)
	}
	q.scratch, q.dirty = abs, false
	return nil
}

// removeLeftover removes the scratch work tree a killed queue left at
// abs; a directory there that is not one is refused, an empty or
// missing one is fine.
func (q *Queue) removeLeftover(ctx context.Context, abs string) error {
	ents, err := os.ReadDir(abs)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(ents) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the scratch directory %s: %w", abs, err)
	}
	out, err := git(ctx, abs, nil, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
	top, common, _ := strings.Cut(out, "\n")
	if err != nil || !samePath(top, abs) || !samePath(common, q.t.GitDir) {
		return fmt.Errorf("the merge queue's scratch directory %s exists and is not a work tree of %s: remove it or choose another", abs, q.t.Dir)
	}
	_, err = q.t.worktree(ctx, "remove", "--force", abs)
	return failed("remove the scratch work tree "+abs+" a killed queue left", err)
}

// edit runs m.Edit in the scratch work tree dir, which holds tree, and
// returns the tree to commit: tree with Edit's change and nothing else.
// Files the check left (its output, a tracked file it rewrote) are put
// back as tree has them first.
func (q *Queue) edit(ctx context.Context, m Merge, dir, tree string) (string, error) {
	if m.Edit == nil {
		return tree, nil
	}
	out, err := git(ctx, dir, nil, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all")
	if err != nil {
		return "", failed("read the scratch work tree's status", err)
	}
	changes, err := parseStatus(out)
	if err != nil {
		return "", err
	}
	for _, c := range changes {
		if c.index == '?' || c.work != ' ' { // HEAD is the tip, so the index's own column holds the task's work
			if _, err := git(ctx, dir, nil, "clean", "-ffdq"); err != nil {
				return "", failed("clean the scratch work tree", err)
			}
			if _, err := git(ctx, dir, nil, "read-tree", "-u", "--reset", tree); err != nil {
				return "", failed("restore the merged tree in the scratch work tree", err)
			}
			break
		}
	}
	if err := m.Edit(ctx, dir); err != nil {
		return "", fmt.Errorf("mark task %s done in the merge checkout: %w", m.Task.ID, err)
	}
	if _, err := git(ctx, dir, nil, "add", "-A"); err != nil {
		return "", failed("stage the change that marks task "+m.Task.ID+" done", err)
	}
	final, err := git(ctx, dir, nil, "write-tree")
	if err != nil {
		return "", failed("write the tree of task "+m.Task.ID, err)
	}
	q.dirty = false
	return final, nil
}

// Close removes the scratch work tree. The queue can be used again
// after: it makes a new one.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.scratch == "" {
		abs, err := filepath.Abs(q.o.Scratch)
		if err != nil || q.o.Scratch == "" {
			return nil // no scratch was ever named, so none was made
		}
		return q.removeLeftover(ctx, abs)
	}
	_, err := q.t.worktree(ctx, "remove", "--force", q.scratch)
	q.scratch = ""
	return failed("remove the scratch work tree", err)
}
