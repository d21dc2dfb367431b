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

// Checkout is a task's own checkout: a directory outside the user's work
// tree on the task's branch, where its loop works. It is a linked work
// tree of the user's repository (git worktree), or, when Shared, a clone
// that borrows the repository's objects (git clone --shared) and shares
// nothing else with it, so that a sandboxed agent need not reach the
// user's .git: its branch is fetched back into the repository when the
// queue merges it.
type Checkout struct {
	// Dir is the checkout's top directory, absolute.
	Dir string
	// Branch is the task's branch (ralph/<batch>/task/<ref>); Ref is
	// refs/heads/<Branch>.
	Branch, Ref string
	// Shared says Dir is a clone --shared rather than a work tree.
	Shared bool

	t *Target
}

// baseRef is the hidden ref, in the user's repository, of the commit the
// task on branch started from (the target's tip when its checkout was
// made, or when the queue last moved it): what a rebase replays from.
func baseRef(branch string) string { return "refs/ralph/base/" + branch }

// Checkout makes (or, when a killed batch resumes, reopens) the checkout
// of a task at dir on branch: a new branch starts at the target's tip;
// an existing one is taken as it is. dir must be outside the user's work
// tree, and missing, empty, or the checkout of branch already.
func (t *Target) Checkout(ctx context.Context, dir, branch string, shared bool) (*Checkout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkout directory %s: %w", dir, err)
	}
	if _, inside := (&gitx.Repo{Top: t.Dir}).Rel(abs); inside {
		return nil, refuse(RefuseCheckout, "the checkout directory %s is inside the repository's work tree %s: choose one outside it (under ralph's state directory)", abs, t.Dir)
	}
	if err := refuseBranch(branch); err != nil {
		return nil, err
	}
	c := &Checkout{Dir: abs, Branch: branch, Ref: "refs/heads/" + branch, Shared: shared, t: t}
	ents, err := os.ReadDir(abs)
	switch {
	case err == nil && len(ents) > 0:
		err = c.reopen(ctx)
	case err == nil || errors.Is(err, fs.ErrNotExist):
		err = c.create(ctx)
	default:
		err = fmt.Errorf("read the checkout directory %s: %w", abs, err)
	}
	if err != nil {
		return nil, err
	}
	if err := c.ensureBase(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// create makes the checkout: its branch from the target's tip, or the
// branch as it is when it exists already.
func (c *Checkout) create(ctx context.Context) error {
	t := c.t
	start, err := resolve(ctx, t.Dir, c.Ref)
	if err != nil {
		return failed("read the task branch "+c.Branch, err)
	}
	exists := start != ""
	if !exists {
		if start, err = t.Tip(ctx); err != nil {
			return err
		}
	}
	if c.Shared {
		return c.clone(ctx, start)
	}
	if err := c.freeRegistration(ctx); err != nil {
		return err
	}
	if exists {
		_, err = t.worktree(ctx, "add", "-q", c.Dir, c.Branch)
	} else {
		_, err = t.worktree(ctx, "add", "-q", "-b", c.Branch, c.Dir, start)
	}
	return failed("add the work tree "+c.Dir+" on "+c.Branch, err)
}

// clone makes the checkout a clone --shared of the repository with the
// task's branch at start.
func (c *Checkout) clone(ctx context.Context, start string) error {
	if _, err := git(ctx, c.t.Dir, nil, "clone", "--shared", "--no-checkout", "-q", c.t.GitDir, c.Dir); err != nil {
		return failed("clone the repository to "+c.Dir, err)
	}
	if _, err := git(ctx, c.Dir, nil, "checkout", "-q", "-b", c.Branch, start); err != nil {
		return failed("check out "+c.Branch+" in "+c.Dir, err)
	}
	// Without a remote the clone's git has no way back to the user's
	// repository but the object store it borrows.
	_, err := git(ctx, c.Dir, nil, "remote", "remove", "origin")
	return failed("drop the clone's remote", err)
}

// freeRegistration clears what would keep `git worktree add` from making
// the checkout: a registration of the directory left by a checkout whose
// directory is gone. A task branch checked out in another work tree is
// refused.
func (c *Checkout) freeRegistration(ctx context.Context) error {
	out, err := c.t.worktree(ctx, "list", "--porcelain", "-z")
	if err != nil {
		return failed("list the repository's work trees", err)
	}
	wts, err := parseWorktrees(out)
	if err != nil {
		return err
	}
	for _, w := range wts {
		switch {
		case samePath(w.path, c.Dir):
			// git worktree remove --force unregisters a work tree whose
			// directory is gone (a prune would also drop the user's own
			// work trees on a disk that is not mounted).
			if _, err := c.t.worktree(ctx, "remove", "--force", c.Dir); err != nil {
				return failed("unregister the missing work tree "+c.Dir, err)
			}
		case w.branch == c.Ref:
			return refuse(RefuseCheckout, "the task branch %s is checked out at %s: remove that work tree (git worktree remove %s) so the task can have its own", c.Branch, w.path, w.path)
		}
	}
	return nil
}

// reopen takes dir, which is not empty, as the checkout when it is one:
// a work tree of the repository (or, when shared, a clone of it of its
// own) with the task's branch checked out.
func (c *Checkout) reopen(ctx context.Context) error {
	notOurs := func(why string) error {
		return refuse(RefuseCheckout, "%s exists and %s: remove it or choose another checkout directory", c.Dir, why)
	}
	out, err := git(ctx, c.Dir, nil, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
	if err != nil {
		return notOurs("is not a git checkout")
	}
	top, common, _ := strings.Cut(out, "\n")
	switch {
	case !samePath(top, c.Dir):
		return notOurs("is inside another work tree, " + top)
	case !c.Shared && !samePath(common, c.t.GitDir):
		return notOurs("is not a work tree of " + c.t.Dir)
	case c.Shared && !c.borrows(common):
		return notOurs("is not a clone --shared of " + c.t.Dir)
	}
	on, err := onBranch(ctx, c.Dir, c.Ref)
	if err != nil {
		return err
	}
	if !on {
		return notOurs("is not on the task's branch " + c.Branch)
	}
	return nil
}

// borrows reports whether the repository whose git directory is gitDir
// is a clone of its own that borrows the target repository's objects.
func (c *Checkout) borrows(gitDir string) bool {
	if !samePath(gitDir, filepath.Join(c.Dir, ".git")) {
		return false
	}
	alt, err := os.ReadFile(filepath.Join(gitDir, "objects", "info", "alternates"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(alt), "\n") {
		if l != "" && samePath(l, filepath.Join(c.t.GitDir, "objects")) {
			return true
		}
	}
	return false
}

// ensureBase records where the task's work starts, when nothing has yet:
// where its branch and the target's tip meet.
func (c *Checkout) ensureBase(ctx context.Context) error {
	ref := baseRef(c.Branch)
	if have, err := resolve(ctx, c.t.Dir, ref); err != nil || have != "" {
		return failed("read "+ref, err)
	}
	tip, err := c.t.Tip(ctx)
	if err != nil {
		return err
	}
	base, err := git(ctx, c.Dir, nil, "merge-base", tip, "HEAD")
	if err != nil {
		return failed("find where "+c.Branch+" and "+c.t.Branch+" meet", err)
	}
	_, err = git(ctx, c.t.Dir, nil, "update-ref", "-m", "ralph: where the task's work starts", ref, base, "")
	return failed("record where "+c.Branch+" starts", err)
}

// Remove deletes the checkout's directory. Its branch stays in the
// user's repository, with what was committed on it (a shared clone's
// branch is fetched back first).
func (c *Checkout) Remove(ctx context.Context) error {
	if !c.Shared {
		_, err := c.t.worktree(ctx, "remove", "--force", c.Dir)
		return failed("remove the work tree "+c.Dir, err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, ".git")); err == nil {
		if err := c.fetchBack(ctx); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("remove the checkout %s: %w", c.Dir, err)
	}
	return nil
}

// fetchBack brings a shared clone's HEAD into the user's repository as
// the task's branch, with the objects it needs.
func (c *Checkout) fetchBack(ctx context.Context) error {
	args := append(append([]string(nil), noMaintenance...), "fetch", "-q", "--no-tags", "--no-write-fetch-head",
		c.Dir, "+HEAD:"+c.Ref)
	_, err := git(ctx, c.t.Dir, nil, args...)
	return failed("fetch "+c.Branch+" back from "+c.Dir, err)
}

// work is a task's work as one commit: the commit, its tree, its
// parents.
type work struct {
	commit, tree string
	parents      []string
}

// commitWork commits every change of the checkout (git add -A: tracked
// and untracked, not ignored) on top of its HEAD, when there is one, and
// returns HEAD: with the branch's earlier commits, the task's whole work
// since it started.
func (c *Checkout) commitWork(ctx context.Context, message string) (work, error) {
	if _, err := git(ctx, c.Dir, nil, "add", "-A"); err != nil {
		return work{}, failed("stage the work of "+c.Branch, err)
	}
	var stdout strings.Builder
	args := append(append([]string(nil), noMaintenance...), "commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", "-")
	_, err := gitx.Cmd{Dir: c.Dir, Args: args, Env: c.t.ident, Stdin: strings.NewReader(message), Stdout: &stdout}.Run(ctx)
	if err != nil && !(exitCode(err) == 1 && strings.Contains(stdout.String(), "nothing to commit")) {
		return work{}, failed("commit the work of "+c.Branch, err)
	}
	out, err := git(ctx, c.Dir, nil, "rev-parse", "HEAD", "HEAD^{tree}", "HEAD^@")
	if err != nil {
		return work{}, failed("read the work of "+c.Branch, err)
	}
	f := strings.Fields(out)
	if len(f) < 2 {
		return work{}, fmt.Errorf("read the work of %s: git rev-parse printed %q", c.Branch, out)
	}
	return work{commit: f[0], tree: f[1], parents: f[2:]}, nil
}
