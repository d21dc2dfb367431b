package tasks

import (
	"context"
	"fmt"
	"strings"
)

// Reset sends a task back to its loop after a merge that did not land
// (r is Conflicted or Red), and returns the text its next prompt
// carries.
//
// The checkout is moved onto the target's tip with the task's work
// applied on top, uncommitted, and git's conflict markers left in where
// it conflicts (the first of the two ways): the agent keeps
// everything of its work that still applies and resolves only the
// conflicted regions, which it finds by their markers, instead of
// redoing its whole work from a diff. The text says what happened (the
// conflict or the failing conditions' evidence, the commits that landed
// meanwhile), which files hold markers, and the task's earlier diff,
// bounded, for what a marker cannot show.
func (q *Queue) Reset(ctx context.Context, c *Checkout, r Result) (string, error) {
	if r.Outcome != Conflicted && r.Outcome != Red {
		return "", fmt.Errorf("reset %s: only a conflicted or red merge goes back to its loop, not a %s one", c.Branch, r.Outcome)
	}
	tip, base, err := q.heads(ctx, c)
	if err != nil {
		return "", err
	}
	w, err := c.commitWork(ctx, c.Branch+": the work of the task before the merge queue sent it back\n")
	if err != nil {
		return "", err
	}
	earlier, err := git(ctx, c.Dir, nil, "diff", "--no-ext-diff", "--no-textconv", "--no-color", base, w.commit, "--")
	if err != nil {
		return "", failed("diff the task's earlier work", err)
	}
	since, err := git(ctx, c.Dir, nil, "rev-list", "--no-commit-header", "--format=%s", "--max-count=20", tip, "^"+base)
	if err != nil {
		return "", failed("list what landed on "+q.t.Branch, err)
	}
	mr, err := q.integrate(ctx, c.Dir, w, base, tip)
	if err != nil {
		return "", err
	}
	if err := c.moveOnto(ctx, mr.tree, tip); err != nil {
		return "", err
	}
	b := resetText{target: q.t.Branch, tip: tip, base: base, work: w.commit, r: r, markers: mr.conflicts}
	if since != "" {
		b.since = strings.Split(since, "\n")
	}
	b.earlier = head(earlier, q.o.Limit)
	return b.String(), nil
}

// moveOnto makes the checkout hold tree on top of tip: its branch at
// tip, its files at tree, its index at tip with the files tree adds
// marked intent-to-add (so git diff shows the whole work); and records
// tip as where the task's work now starts.
func (c *Checkout) moveOnto(ctx context.Context, tree, tip string) error {
	if _, err := git(ctx, c.Dir, nil, "read-tree", "-u", "--reset", tree); err != nil {
		return failed("write the task's work onto "+c.t.Branch+" in "+c.Dir, err)
	}
	if _, err := git(ctx, c.Dir, nil, "reset", "-q", "-N", tip); err != nil {
		return failed("move "+c.Branch+" onto "+c.t.Branch, err)
	}
	_, err := git(ctx, c.t.Dir, nil, "update-ref", "-m", "ralph: the task starts again from the target's tip", baseRef(c.Branch), tip)
	return failed("record where "+c.Branch+" starts", err)
}

// resetText is the prompt text of a task sent back to its loop.
type resetText struct {
	target, tip, base, work string
	r                       Result
	since                   []string // subjects of the commits that landed since the task started
	markers                 []string // files left with conflict markers
	earlier                 string   // the task's earlier diff, bounded
}

func (t resetText) String() string {
	var b strings.Builder
	if t.r.Outcome == Conflicted {
		fmt.Fprintf(&b, "The merge queue could not land this task on %s: its work conflicts with what landed there since the task started.\n", t.target)
	} else {
		fmt.Fprintf(&b, "The merge queue re-ran the success conditions on this task's work merged onto %s, and they failed.\n", t.target)
	}
	if len(t.since) > 0 {
		fmt.Fprintf(&b, "\nLanded on %s since the task started (newest first):\n", t.target)
		for _, s := range t.since {
			b.WriteString("- " + s + "\n")
		}
	}
	fmt.Fprintf(&b, "\nYour checkout now starts from the tip of %s (%s), with your earlier work applied on top of it, uncommitted.", t.target, short(t.tip))
	if len(t.markers) > 0 {
		fmt.Fprintf(&b, " Where it conflicts, git's conflict markers are left in the files (between <<<<<<< and ======= is %s's side, "+
			"between ======= and >>>>>>> yours): %s. Resolve each marked region so that both sides' intent holds, and remove the markers.",
			t.target, strings.Join(t.markers, ", "))
	}
	b.WriteString(" Then make the success conditions hold again.\n")
	if ev := strings.TrimRight(t.r.Evidence, "\n"); ev != "" {
		b.WriteString("\nWhat the merge queue saw:\n" + ev + "\n")
	}
	if e := strings.TrimRight(t.earlier, "\n"); e != "" {
		fmt.Fprintf(&b, "\nYour earlier work (git diff %s %s):\n%s\n", short(t.base), short(t.work), e)
	}
	return b.String()
}
