package tasks

import (
	"context"
	"fmt"
	"strings"
)

// A task whose loop runs elsewhere (a fleet's worker, DESIGN §23) starts
// from its checkout's state, carried to a git repository the worker can
// clone, and comes back as a branch there that the checkout fast-forwards
// to. Send and Receive are those two trips; the merge queue then takes the
// checkout's work as it takes a local run's.

// Send commits the checkout's work so far on its branch (git add -A, as
// the queue does, so that what a merge-queue reset left uncommitted, the
// conflict markers included, goes too) and makes the branch at that
// commit reachable in the repository at url, as refs/heads/<Branch>
// (replacing what an earlier trip left there). url may be the user's
// repository itself, by path: a work tree's branch is there already. It
// returns the branch name and the commit a worker's clone starts from.
func (c *Checkout) Send(ctx context.Context, url string) (branch, commit string, err error) {
	if url == "" || strings.HasPrefix(url, "-") {
		return "", "", fmt.Errorf("send %s: %q is not a git repository URL or path", c.Branch, url)
	}
	w, err := c.commitWork(ctx, fmt.Sprintf("ralph: the work of %s so far\n", c.Branch))
	if err != nil {
		return "", "", err
	}
	if samePath(url, c.t.Dir) {
		if c.Shared {
			err = c.fetchBack(ctx)
		}
		return c.Branch, w.commit, err
	}
	args := append(append([]string(nil), noMaintenance...), "push", "-q", "--no-verify", "--force", "--end-of-options", url, "HEAD:"+c.Ref)
	if _, err := git(ctx, c.Dir, nil, args...); err != nil {
		return "", "", failed("push "+c.Branch+" to the workspace", err)
	}
	return c.Branch, w.commit, nil
}

// Receive fetches branch from the repository at url and fast-forwards the
// checkout to it: the work a worker's run committed on top of what Send
// gave it. A branch that does not descend from the checkout's HEAD is
// refused (its run did not start from this checkout's work), and the
// checkout is left as it was. It returns the checkout's new HEAD.
func (c *Checkout) Receive(ctx context.Context, url, branch string) (string, error) {
	if err := refuseBranch(branch); err != nil {
		return "", err
	}
	args := append(append([]string(nil), noMaintenance...), "fetch", "-q", "--no-tags", "--end-of-options", url, "refs/heads/"+branch)
	if _, err := git(ctx, c.Dir, nil, args...); err != nil {
		return "", failed("fetch "+branch+" from the workspace", err)
	}
	got, err := resolve(ctx, c.Dir, "FETCH_HEAD")
	if err != nil || got == "" {
		return "", failed("read the fetched "+branch, err)
	}
	if _, err := git(ctx, c.Dir, nil, "merge-base", "--is-ancestor", "HEAD", got); err != nil {
		if exitCode(err) == 1 {
			return "", fmt.Errorf("branch %s (%s) does not descend from %s's work at %s: its run did not start from this checkout", branch, short(got), c.Branch, c.Dir)
		}
		return "", failed("compare "+branch+" with "+c.Branch, err)
	}
	if _, err := git(ctx, c.Dir, nil, "merge", "-q", "--ff-only", got); err != nil {
		return "", failed("fast-forward "+c.Branch+" to "+branch, err)
	}
	return got, nil
}
