package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ralphloop/ralph/internal/gitx"
)

// Refusal is why ralph will not run a batch on a repository, or not
// advance its target: the state of the user's repository, which the
// user fixes (the CLI exits 2).
type Refusal int

// The refusals.
const (
	// RefuseNotRepo: the directory is in no git work tree.
	RefuseNotRepo Refusal = iota + 1
	// RefuseUnborn: HEAD has no commit yet, so no checkout can start.
	RefuseUnborn
	// RefuseBranch: the target (or a task's) branch is no valid name.
	RefuseBranch
	// RefuseDirtyTarget: the target is checked out and its work tree is
	// not clean.
	RefuseDirtyTarget
	// RefuseDirtySource: the task source's file differs from HEAD.
	RefuseDirtySource
	// RefuseCheckout: a task's checkout directory or branch is taken by
	// something else.
	RefuseCheckout
)

// RefusedError is a refusal: one sentence that says what is wrong and
// how to fix it.
type RefusedError struct {
	Kind Refusal
	Msg  string
}

func (e *RefusedError) Error() string { return e.Msg }

func refuse(kind Refusal, format string, args ...any) error {
	return &RefusedError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// errMoved is a target that moved between the tip a merge started from
// and its advance.
var errMoved = errors.New("the target branch moved")

// Target is the branch a batch lands its tasks on, in the user's
// repository.
type Target struct {
	// Dir is the top of the user's work tree; GitDir is the repository's
	// (common) git directory, absolute.
	Dir, GitDir string
	// Branch is the target's name; Ref is refs/heads/<Branch>.
	Branch, Ref string
	// Start is the target's tip when it was prepared; Created says
	// PrepareTarget made the branch (from HEAD).
	Start   string
	Created bool
	// CheckedOut is the work tree the target is checked out in ("" for
	// none): each advance then moves it as `git merge --ff-only` would.
	CheckedOut string

	ident []string // the commits' identity environment (identity)

	wtMu sync.Mutex // worktree holds it: one git worktree add or remove at a time
}

// PrepareTarget opens the git work tree that holds repoDir and makes
// branch the target of a batch: created from HEAD's commit when it does
// not exist (a detached HEAD starts it from its commit). It refuses
// (*RefusedError) a directory outside any repository, an unborn HEAD, a
// name git does not take for a branch, and a target checked out in a
// work tree that is not clean. Nothing of the user's checkout, index or
// stash is touched.
func PrepareTarget(ctx context.Context, repoDir, branch string) (*Target, error) {
	out, err := gitx.Run(ctx, repoDir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
	if err != nil {
		if msg := gitx.Message(err); strings.Contains(msg, "not a git repository") || strings.Contains(msg, "must be run in a work tree") {
			return nil, refuse(RefuseNotRepo, "%s is not inside a git work tree: run the batch in your repository (or make one: git init && git add -A && git commit -m init)", repoDir)
		}
		return nil, failed("find the repository of "+repoDir, err)
	}
	top, gitDir, _ := strings.Cut(out, "\n")
	t := &Target{Dir: top, GitDir: gitDir, Branch: branch, Ref: "refs/heads/" + branch}
	if err := refuseBranch(branch); err != nil {
		return nil, err
	}
	headCommit, err := resolve(ctx, top, "HEAD")
	if err != nil {
		return nil, failed("read HEAD", err)
	}
	if headCommit == "" {
		return nil, refuse(RefuseUnborn, "the repository at %s has no commit yet, and each task's checkout starts from one: make a first commit (git add -A && git commit -m init), then run the batch again", top)
	}
	if t.Start, err = resolve(ctx, top, t.Ref); err != nil {
		return nil, failed("read the target branch "+branch, err)
	}
	if t.Start == "" {
		if _, err := git(ctx, top, nil, "update-ref", "-m", "ralph: the target of a batch, from HEAD", t.Ref, headCommit, ""); err != nil {
			return nil, failed("create the target branch "+branch, err)
		}
		t.Start, t.Created = headCommit, true
	}
	if t.CheckedOut, err = checkedOutAt(ctx, top, t.Ref); err != nil {
		return nil, err
	}
	if t.CheckedOut != "" {
		if err := t.checkClean(ctx); err != nil {
			return nil, err
		}
	}
	t.ident = identity(ctx, top)
	return t, nil
}

// refuseBranch refuses a name git would not take for a branch
// (checkBranch: git check-ref-format --branch's rules).
func refuseBranch(branch string) error {
	if why := checkBranch(branch); why != "" {
		return refuse(RefuseBranch, "%q is not a branch name git accepts (%s): choose another (as ralph/batch/merged)", branch, why)
	}
	return nil
}

// checkedOutAt is the work tree of dir's repository that has ref checked
// out, or "".
func checkedOutAt(ctx context.Context, dir, ref string) (string, error) {
	out, err := git(ctx, dir, nil, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return "", failed("list the repository's work trees", err)
	}
	wts, err := parseWorktrees(out)
	if err != nil {
		return "", err
	}
	for _, w := range wts {
		if w.branch == ref {
			return w.path, nil
		}
	}
	return "", nil
}

// checkClean refuses a checked-out target whose work tree has changes:
// tracked files that differ from HEAD, untracked files, a merge in
// progress.
func (t *Target) checkClean(ctx context.Context) error {
	out, err := git(ctx, t.CheckedOut, nil, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all")
	if err != nil {
		return failed("read the status of "+t.CheckedOut, err)
	}
	changes, err := parseStatus(out)
	if err != nil || len(changes) == 0 {
		return err
	}
	return refuse(RefuseDirtyTarget, "the target branch %s is checked out at %s, whose work tree is not clean (%s): "+
		"commit or stash those changes (git stash -u), or choose another target (--target)", t.Branch, t.CheckedOut, listChanges(changes, 5))
}

// listChanges names up to n of changes with their states.
func listChanges(changes []change, n int) string {
	var parts []string
	for i, c := range changes {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(changes)-n))
			break
		}
		parts = append(parts, c.path+" "+c.describe())
	}
	return strings.Join(parts, ", ")
}

// Tip is the target branch's commit now.
func (t *Target) Tip(ctx context.Context) (string, error) {
	tip, err := resolve(ctx, t.Dir, t.Ref)
	if err == nil && tip == "" {
		err = fmt.Errorf("the target branch %s no longer exists: it was deleted while the batch ran", t.Branch)
	}
	return tip, err
}

// Clean refuses (RefuseDirtySource) any of paths (files of the task
// source, relative to the work tree's top or absolute) that differs from
// HEAD: modified, deleted, untracked or ignored. Each task's checkout
// starts from a commit, so a change git has not committed is not there;
// a path outside the work tree is not the repository's and is not
// checked.
func (t *Target) Clean(ctx context.Context, paths ...string) error {
	repo := &gitx.Repo{Top: t.Dir}
	args := []string{"status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all", "--ignored=matching", "--"}
	n := len(args)
	for _, p := range paths {
		if filepath.IsAbs(p) {
			rel, ok := repo.Rel(p)
			if !ok {
				continue
			}
			p = rel
		}
		args = append(args, literal(filepath.ToSlash(p)))
	}
	if len(args) == n {
		return nil
	}
	out, err := git(ctx, t.Dir, nil, args...)
	if err != nil {
		return failed("read the status of the task source", err)
	}
	changes, err := parseStatus(out)
	if err != nil || len(changes) == 0 {
		return err
	}
	add := "git add"
	if changes[0].index == '!' {
		add = "git add -f" // an ignored file is added only by force
	}
	return refuse(RefuseDirtySource, "the task source differs from HEAD (%s), and each task's checkout starts from a commit: "+
		"commit it first (%s %s && git commit)", listChanges(changes, 5), add, changes[0].path)
}

// worktree runs git worktree with args in the user's repository, one at a
// time: git's bookkeeping of worktrees (.git/worktrees) races when two are
// added or removed at once (a checkout and the queue's scratch tree).
func (t *Target) worktree(ctx context.Context, args ...string) (string, error) {
	t.wtMu.Lock()
	defer t.wtMu.Unlock()
	return git(ctx, t.Dir, nil, append([]string{"worktree"}, args...)...)
}
