package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ralphloop/ralph/internal/gitx"
)

// Integration is how the queue brings a task's work onto the target's
// tip (`[tasks] integrate`).
type Integration string

// The integrations.
const (
	// IntegrateRebase replays the task's whole diff since it started (its
	// commits squashed) onto the tip, as a cherry-pick of one commit.
	IntegrateRebase Integration = "rebase"
	// IntegrateMerge merges the task's branch into the tip (git finds the
	// merge base, so a branch that merged the target in is merged from
	// there), then squashes the merge into one commit.
	IntegrateMerge Integration = "merge"
)

// ParseIntegration reads `[tasks] integrate`: "rebase" (also "", the
// default) or "merge".
func ParseIntegration(s string) (Integration, error) {
	switch Integration(s) {
	case "", IntegrateRebase:
		return IntegrateRebase, nil
	case IntegrateMerge:
		return IntegrateMerge, nil
	}
	return "", fmt.Errorf("integrate = %q is not one of \"rebase\" and \"merge\": choose one", s)
}

// QueueOptions configure a merge queue.
type QueueOptions struct {
	// Integrate is "rebase" ("" too) or "merge".
	Integrate Integration
	// Scratch is the directory of the queue's scratch work tree, where a
	// task's work is integrated and its conditions re-run: outside the
	// user's work tree, made on the first merge, reused, removed by Close.
	Scratch string
	// Batch is the batch's id: each merge commit ends with the trailer
	// "Ralph-Task: <Batch>/<task id>", by which a resumed queue knows a
	// task it merged before it was killed.
	Batch string
	// Limit is how many bytes of evidence (a conflict's diff, the
	// conditions' output) and of a task's earlier diff are kept; 0 is
	// 16 KiB.
	Limit int
}

// Merge is one task's work offered to the queue.
type Merge struct {
	Task     Task
	Checkout *Checkout
	// Check re-runs the batch's success conditions in dir, the scratch
	// work tree holding the task's work on the target's tip: ok says
	// they held, evidence is what they said.
	Check func(ctx context.Context, dir string) (ok bool, evidence string, err error)
	// Edit, when set, marks the task done in dir (prd.json's passes,
	// the checklist's box, bd close) after Check held: its change lands
	// in the task's commit.
	Edit func(ctx context.Context, dir string) error
	// Body are the lines of the merge commit's body (the batch and run
	// the task ran in).
	Body []string
}

// Outcome is how a merge ended.
type Outcome int

// The outcomes.
const (
	// Merged: the target advanced by the task's one commit (or had it
	// already).
	Merged Outcome = iota + 1
	// Conflicted: the task's work does not apply to the target's tip.
	Conflicted
	// Red: the success conditions failed on the merged tree.
	Red
)

func (o Outcome) String() string {
	switch o {
	case Merged:
		return "merged"
	case Conflicted:
		return "conflict"
	case Red:
		return "red"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is what a merge did.
type Result struct {
	Outcome Outcome
	// Commit is the task's commit on the target (Merged).
	Commit string
	// Evidence is why it did not merge: the conflict, as git's messages
	// and the conflicted files' diff with their markers (tail-bounded),
	// or what the conditions said (Red).
	Evidence string
	// Conflicts are the paths that conflict (Conflicted).
	Conflicts []string
	// Onto is the target's tip the work was integrated onto; Work is the
	// task's work as one commit (its checkout's HEAD).
	Onto, Work string
	// Resumed says the target already had the task's commit (a merge
	// that landed before ralph was killed): nothing was done.
	Resumed bool
}

// Queue lands tasks on a target one at a time: integrated in a scratch
// work tree, re-checked there, committed and advanced only when the
// checks hold. Its methods are safe for concurrent use.
type Queue struct {
	t *Target
	o QueueOptions

	mu      sync.Mutex // one merge at a time; guards the scratch fields
	scratch string     // the scratch work tree, once made
	dirty   bool       // the scratch may hold files no commit has (a check's output)
}

// NewQueue returns the merge queue of target t.
func NewQueue(t *Target, o QueueOptions) *Queue {
	if o.Limit <= 0 {
		o.Limit = 16 << 10
	}
	return &Queue{t: t, o: o}
}

// Merge lands m's task on the target: it commits the work of the task's
// checkout, integrates it onto the target's tip in the scratch work
// tree, re-runs Check there, and when it holds runs Edit and advances
// the target by one commit titled "<id>: <title>" (compare-and-swap from
// the tip it started from; a tip moved meanwhile by someone else is
// tried once more from where it went). A task whose commit the target
// has already (Ralph-Task trailer) is Merged again without a change. A
// conflict or a red check leaves the target as it was. err is a failure
// of the machinery (git, Check itself, a refused advance), not of the
// task.
func (q *Queue) Merge(ctx context.Context, m Merge) (Result, error) {
	if err := q.valid(m); err != nil {
		return Result{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var w work
	for try := 0; ; try++ {
		tip, base, err := q.heads(ctx, m.Checkout)
		if err != nil {
			return Result{}, err
		}
		if commit, err := q.landed(ctx, m.Task, base, tip); err != nil || commit != "" {
			return Result{Outcome: Merged, Commit: commit, Onto: tip, Resumed: true}, err
		}
		if try == 0 {
			if w, err = q.takeWork(ctx, m); err != nil {
				return Result{}, err
			}
		}
		res, err := q.land(ctx, m, w, base, tip)
		if !errors.Is(err, errMoved) {
			return res, err
		}
		if try == 1 {
			return res, fmt.Errorf("the target branch %s moved twice while task %s was merged onto it: something else commits to it; stop that, or choose another target (--target)", q.t.Branch, m.Task.ID)
		}
	}
}

// valid refuses a Merge that lacks what the queue needs.
func (q *Queue) valid(m Merge) error {
	switch {
	case m.Checkout == nil || m.Checkout.t == nil:
		return fmt.Errorf("merge task %s: no checkout", m.Task.ID)
	case m.Check == nil:
		return fmt.Errorf("merge task %s: no Check to re-run its conditions", m.Task.ID)
	case q.o.Scratch == "":
		return errors.New("the merge queue has no scratch directory")
	}
	_, err := ParseIntegration(string(q.o.Integrate))
	return err
}

// heads reads the target's tip and the base of the task's work (where it
// started), recorded when its checkout was made.
func (q *Queue) heads(ctx context.Context, c *Checkout) (tip, base string, err error) {
	out, err := git(ctx, q.t.Dir, nil, "rev-parse", q.t.Ref, baseRef(c.Branch))
	if f := strings.Fields(out); err == nil && len(f) == 2 {
		return f[0], f[1], nil
	}
	if err := c.ensureBase(ctx); err != nil { // a checkout made before the base was recorded
		return "", "", err
	}
	out, err = git(ctx, q.t.Dir, nil, "rev-parse", q.t.Ref, baseRef(c.Branch))
	if f := strings.Fields(out); err == nil && len(f) == 2 {
		return f[0], f[1], nil
	}
	return "", "", failed("read the target's tip and where "+c.Branch+" starts", err)
}

// takeWork commits the task checkout's work and, for a shared clone,
// fetches it into the user's repository.
func (q *Queue) takeWork(ctx context.Context, m Merge) (work, error) {
	c := m.Checkout
	w, err := c.commitWork(ctx, fmt.Sprintf("%s: the work of task %s\n", c.Branch, oneLine(m.Task.ID)))
	if err != nil {
		return work{}, err
	}
	if c.Shared {
		if err := c.fetchBack(ctx); err != nil {
			return work{}, err
		}
	}
	return w, nil
}

// land integrates the work w onto tip, checks it, commits it and
// advances the target.
func (q *Queue) land(ctx context.Context, m Merge, w work, base, tip string) (Result, error) {
	res := Result{Onto: tip, Work: w.commit}
	mr, err := q.integrate(ctx, q.t.Dir, w, base, tip)
	if err != nil {
		return res, err
	}
	if len(mr.conflicts) > 0 {
		res.Outcome, res.Conflicts = Conflicted, mr.conflicts
		res.Evidence, err = q.conflictEvidence(ctx, q.t.Dir, m.Checkout.Branch, tip, mr)
		return res, err
	}
	dir, err := q.prepare(ctx, mr.tree, tip)
	if err != nil {
		return res, err
	}
	q.dirty = true // the check may leave files behind
	ok, evidence, err := m.Check(ctx, dir)
	if err != nil {
		return res, fmt.Errorf("re-run the success conditions of task %s on the merged tree: %w", m.Task.ID, err)
	}
	if !ok {
		res.Outcome, res.Evidence = Red, tail(evidence, q.o.Limit)
		return res, nil
	}
	tree, err := q.edit(ctx, m, dir, mr.tree)
	if err != nil {
		return res, err
	}
	commit, err := gitx.Cmd{Dir: q.t.Dir, Args: []string{"commit-tree", tree, "-p", tip, "-F", "-"}, Env: q.t.ident,
		Stdin: strings.NewReader(commitMessage(q.o.Batch, m.Task, m.Body))}.Run(ctx)
	if err != nil {
		return res, failed("write the commit of task "+m.Task.ID, err)
	}
	if err := q.t.advance(ctx, tip, commit, "ralph: merge task "+oneLine(m.Task.ID)); err != nil {
		return res, err
	}
	res.Outcome, res.Commit = Merged, commit
	return res, nil
}

// integrate brings w onto tip with git merge-tree in dir's repository
// (the user's, or a task's checkout), touching no work tree: rebase
// merges with base as the merge base (a cherry-pick of the squashed
// diff), merge with the one git finds.
func (q *Queue) integrate(ctx context.Context, dir string, w work, base, tip string) (mergeResult, error) {
	if tip == base {
		return mergeResult{tree: w.tree}, nil // nothing landed since the task started: its tree is the result
	}
	theirs := w.commit
	if q.o.Integrate != IntegrateMerge && (len(w.parents) != 1 || w.parents[0] != base) {
		// The diff base..w as one commit whose only parent is base: git
		// merge-tree (before 2.40's --merge-base) then takes base as the
		// merge base whenever base is on the target, as it is.
		c, err := git(ctx, dir, q.t.ident, "commit-tree", w.tree, "-p", base, "-m", "ralph: squashed work")
		if err != nil {
			return mergeResult{}, failed("squash the task's work", err)
		}
		theirs = c
	}
	var out strings.Builder
	_, err := gitx.Cmd{Dir: dir, Args: []string{"merge-tree", "--write-tree", "-z", "--name-only", tip, theirs}, Stdout: &out}.Run(ctx)
	if err != nil && exitCode(err) != 1 {
		if strings.Contains(gitx.Message(err), "write-tree") {
			return mergeResult{}, errors.New("the merge queue needs git 2.38 or newer (git merge-tree --write-tree): update git")
		}
		return mergeResult{}, failed("merge the task's work onto "+q.t.Branch, err)
	}
	return parseMergeTree(out.String(), err != nil)
}

// conflictEvidence is a conflict told for the task's next prompt: git's
// messages, then the conflicted files' diff from the tip with their
// markers, tail-bounded.
func (q *Queue) conflictEvidence(ctx context.Context, dir, branch, tip string, mr mergeResult) (string, error) {
	args := []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", tip, mr.tree, "--"}
	for _, p := range mr.conflicts {
		args = append(args, literal(p))
	}
	diff, err := git(ctx, dir, nil, args...)
	if err != nil {
		return "", failed("diff the conflict", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s conflicts with %s at %s in %s.\n", branch, q.t.Branch, short(tip), strings.Join(mr.conflicts, ", "))
	for _, m := range mr.messages {
		b.WriteString(m + "\n")
	}
	b.WriteString(tail(diff, q.o.Limit))
	return b.String(), nil
}

// commitMessage is a task's commit on the target: "<id>: <title>", the
// body lines, and the trailer that names the task.
func commitMessage(batch string, t Task, body []string) string {
	subject := oneLine(t.ID)
	if title := oneLine(t.Title); title != "" {
		subject += ": " + title
	}
	var b strings.Builder
	b.WriteString(subject + "\n")
	if len(body) > 0 {
		b.WriteString("\n" + strings.Join(body, "\n") + "\n")
	}
	b.WriteString("\n" + trailer(batch, t.ID) + "\n")
	return b.String()
}

// trailer is the line of a task's commit on the target that names it.
func trailer(batch, id string) string { return "Ralph-Task: " + oneLine(batch) + "/" + oneLine(id) }

// landed is the commit on the target since base that carries the task's
// trailer, or "": a merge that landed before ralph was killed.
func (q *Queue) landed(ctx context.Context, t Task, base, tip string) (string, error) {
	if tip == base {
		return "", nil
	}
	want := trailer(q.o.Batch, t.ID)
	out, err := git(ctx, q.t.Dir, nil, "rev-list", "--no-commit-header", "--format=%H%x00%B%x00", "-F", "--grep="+want, tip, "^"+base)
	if err != nil {
		return "", failed("look for task "+t.ID+" on "+q.t.Branch, err)
	}
	f := strings.Split(out, "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		for _, line := range strings.Split(f[i+1], "\n") {
			if line == want {
				return strings.TrimSpace(f[i]), nil
			}
		}
	}
	return "", nil
}
