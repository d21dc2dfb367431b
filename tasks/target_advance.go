package tasks

import (
	"context"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
)

// advance moves the target from commit from to commit to, a descendant
// of it, as a compare-and-swap: errMoved when the target is no longer at
// from. A target checked out in a work tree moves as `git merge
// --ff-only` would move it (index and files follow); when that work tree
// has changed since the batch began it is refused (RefuseDirtyTarget)
// and nothing is touched. Otherwise only the ref moves: the user's
// checkout, index and stash are not the target's.
func (t *Target) advance(ctx context.Context, from, to, reason string) error {
	if t.CheckedOut != "" {
		on, err := onBranch(ctx, t.CheckedOut, t.Ref)
		if err != nil {
			return err
		}
		if on {
			return t.fastForward(ctx, from, to)
		}
		// The user switched that work tree to another branch: the target
		// is only a ref again.
	}
	if _, err := git(ctx, t.Dir, nil, "update-ref", "-m", reason, t.Ref, to, from); err != nil {
		if tip, rerr := t.Tip(ctx); rerr == nil && tip != from {
			return errMoved
		}
		return failed("advance the target branch "+t.Branch, err)
	}
	return nil
}

// onBranch reports whether the work tree dir has ref checked out.
func onBranch(ctx context.Context, dir, ref string) (bool, error) {
	out, err := git(ctx, dir, nil, "symbolic-ref", "-q", "HEAD")
	if err != nil && exitCode(err) != 1 { // 1: a detached HEAD
		return false, failed("read the branch checked out at "+dir, err)
	}
	return strings.TrimSpace(out) == ref, nil
}

// fastForward moves the checked-out target from from to to in its work
// tree, refusing a work tree that is no longer clean.
func (t *Target) fastForward(ctx context.Context, from, to string) error {
	head, err := resolve(ctx, t.CheckedOut, "HEAD")
	if err != nil {
		return failed("read HEAD at "+t.CheckedOut, err)
	}
	if head != from {
		return errMoved
	}
	if err := t.checkClean(ctx); err != nil {
		return err
	}
	args := append(append([]string(nil), noMaintenance...), "merge", "--ff-only", "-q", "--no-stat", to)
	if _, err := git(ctx, t.CheckedOut, nil, args...); err != nil {
		if head, rerr := resolve(ctx, t.CheckedOut, "HEAD"); rerr == nil && head != from {
			return errMoved
		}
		return fmt.Errorf("fast-forward the target branch %s checked out at %s to %s: %s; the work tree was left as it was",
			t.Branch, t.CheckedOut, short(to), gitx.Message(err))
	}
	return nil
}
