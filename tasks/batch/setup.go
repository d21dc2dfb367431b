package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/tasks"
)

// Setup is what `ralph run --tasks` (and `ralph resume BATCH`) give a
// batch beyond the loop's config: the flags, which win over [tasks], and
// the open store.
type Setup struct {
	Config *config.Config
	// Source is --tasks ("": [tasks] source). A relative file in it is
	// relative to the working directory; one in [tasks] source to the
	// config's directory.
	Source string
	// Parallel is --parallel (0: [tasks] parallel, else 1); Target is
	// --target ("": [tasks] target, else the prd's branchName, else
	// ralph/<batch>/merged); CloseIssues is --close-issues (or [tasks]
	// close_issues).
	Parallel    int
	Target      string
	CloseIssues bool
	// Store is the open store, in StoreDir; Hidden and StoreMoved are as
	// Options has them.
	Store      *ledger.Store
	StoreDir   string
	Hidden     []string
	StoreMoved bool
	// Resume names a batch to resume: its config, source, target and
	// shape are those its BatchStarted recorded, and the fields above but
	// the store's are not read.
	Resume  string
	OnEvent func(Event)
	Logger  *slog.Logger
	// Remote runs the tasks' runs elsewhere (Options.Remote); a batch
	// with one is not resumed.
	Remote Remote
}

// Prepare builds the batch s describes: its source opened, its target
// branch prepared (created from HEAD when missing), the task source's
// file checked against HEAD, its merge queue. Every error but the store's
// is a RefusedError (exit 2), one sentence with the fix.
func Prepare(ctx context.Context, s Setup) (*Batch, error) {
	o := Options{ID: s.Resume, Store: s.Store, StoreDir: s.StoreDir, Hidden: s.Hidden, StoreMoved: s.StoreMoved,
		OnEvent: s.OnEvent, Logger: s.Logger, Order: tasks.Order, RefName: tasks.RefName, Remote: s.Remote}
	var err error
	if s.Resume != "" {
		err = fromStarted(&o, &s)
	} else {
		err = fromSetup(&o, s)
	}
	if err != nil {
		return nil, refused(err)
	}
	base, err := os.Getwd() // --tasks FILE is the working directory's
	fromConfig := s.Source == "" && s.Resume == ""
	if fromConfig {
		s.Source, base, err = tasksOf(s.Config).Source, filepath.Dir(s.Config.File), nil // [tasks] source is the config's
	}
	if err != nil {
		return nil, err
	}
	spec, err := tasks.Parse(s.Source)
	if err != nil {
		if fromConfig {
			err = s.Config.ErrorAtValue("tasks.source", err.Error())
		}
		return nil, refused(err)
	}
	if spec.Path != "" && !filepath.IsAbs(spec.Path) {
		spec.Path = filepath.Join(base, spec.Path)
	}
	if err := prepareParts(ctx, &o, spec, s); err != nil {
		return nil, refused(err)
	}
	b, err := New(o)
	return b, refused(err)
}

// fromSetup fills o from the config and the flags of a new batch.
func fromSetup(o *Options, s Setup) error {
	t := tasksOf(s.Config)
	o.ID = loop.NewID()
	o.Config, o.Parallel, o.Attempts, o.Retries = s.Config, t.Parallel, t.Attempts, t.TaskRetries()
	if s.Parallel > 0 {
		o.Parallel = s.Parallel
	}
	integrate, err := tasks.ParseIntegration(t.Integrate)
	if err != nil {
		return s.Config.ErrorAtValue("tasks.integrate", err.Error())
	}
	o.Integrate = string(integrate)
	state, err := assemble.StateDir()
	if err != nil {
		return err
	}
	o.Dir = filepath.Join(state, "batches", o.ID)
	o.Shared = assemble.Sandboxed(s.Config)
	return nil
}

// fromStarted fills o (and s's config, source and target) from the
// BatchStarted of the batch s resumes.
func fromStarted(o *Options, s *Setup) error {
	st, err := ReadStarted(s.Store, s.Resume)
	if err != nil {
		return err
	}
	cfg, err := config.Parse([]byte(st.Config), "batch "+st.ID+" config snapshot", nil)
	if err != nil {
		return err
	}
	cfg.Store.Dir = s.StoreDir
	s.Config, s.Source, s.Target = cfg, st.Source, st.Target
	o.Config, o.Parallel, o.Attempts, o.Retries, o.Integrate = cfg, st.Parallel, st.Attempts, st.Retries, st.Integrate
	o.Dir, o.Shared = st.Dir, st.Shared
	return nil
}

// prepareParts opens the source, prepares the target and the queue.
func prepareParts(ctx context.Context, o *Options, spec tasks.Spec, s Setup) error {
	r, err := gitx.Open(ctx, s.Config.Loop.Workdir)
	if errors.Is(err, gitx.ErrNotRepo) {
		return fmt.Errorf("the workdir %s is not in a git work tree, and a batch's tasks work in checkouts of one: run git init there and commit, or run the batch in your repository", s.Config.Loop.Workdir)
	}
	if err != nil {
		return err
	}
	repo := r.Top
	o.Repo = repo
	opts := tasks.Options{Root: repo, CloseIssues: s.CloseIssues || tasksOf(s.Config).CloseIssues, GitHubURL: os.Getenv("GITHUB_API_URL")}
	src, err := tasks.Open(spec, opts)
	if err != nil {
		return err
	}
	o.Source = source{Source: src}
	c, tk := *o.Config, *tasksOf(o.Config) // the batch's config says its source: `ralph resume` knows a batch by it
	tk.Source, c.Tasks = src.String(), &tk
	o.Config = &c
	branch, err := targetBranch(ctx, s, src, o.ID)
	if err != nil {
		return err
	}
	t, err := tasks.PrepareTarget(ctx, repo, branch)
	if err != nil {
		return err
	}
	if src.Kind().InRepo {
		if err := t.Clean(ctx, src.File()); err != nil {
			return err
		}
		if err := targetVersion(ctx, o, t, spec, opts); err != nil {
			return err
		}
	}
	o.Target = target{t: t}
	integrate, _ := tasks.ParseIntegration(o.Integrate) // checked by fromSetup, or recorded so
	o.Merger = queue{tasks.NewQueue(t, tasks.QueueOptions{Integrate: integrate, Scratch: filepath.Join(o.Dir, "merge"), Batch: o.ID})}
	return nil
}

// targetBranch is --target, else [tasks] target, else the source's branch
// (a prd's branchName), else ralph/<batch>/merged.
func targetBranch(ctx context.Context, s Setup, src tasks.Source, id string) (string, error) {
	switch {
	case s.Target != "":
		return s.Target, nil
	case tasksOf(s.Config).Target != "":
		return tasksOf(s.Config).Target, nil
	}
	if _, err := src.List(ctx); err != nil { // Branch is the last List's
		return "", err
	}
	if b := src.Branch(); b != "" {
		return b, nil
	}
	return "ralph/" + id + "/merged", nil
}

// targetVersion makes o's source, a file of the repository, take the
// tasks its file on the target branch has done as done too, when the
// target was there before the batch (a prd's branchName a batch ran onto
// before, a batch run again): each task's checkout starts from the
// target's tip, where those tasks are merged. The tasks are still HEAD's
// (the user's backlog); marking one done edits the merge checkout's copy.
func targetVersion(ctx context.Context, o *Options, t *tasks.Target, spec tasks.Spec, opts tasks.Options) error {
	src := o.Source.(source)
	rel := src.File()
	if t.Created || rel == "" {
		return nil
	}
	if _, err := gitx.Run(ctx, t.Dir, "cat-file", "-e", t.Ref+":"+rel); err != nil {
		return nil // the target has no such file: the tasks are HEAD's
	}
	root := filepath.Join(o.Dir, "source")
	path := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = gitx.Cmd{Dir: t.Dir, Args: []string{"cat-file", "blob", t.Ref + ":" + rel}, Stdout: f}.Run(ctx)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read %s as %s has it: %w", rel, t.Branch, err)
	}
	spec.Path, opts.Root = path, root
	onTarget, err := tasks.Open(spec, opts)
	if err != nil {
		return err
	}
	ts, err := onTarget.List(ctx)
	if err != nil {
		return fmt.Errorf("%s as %s has it: %w", rel, t.Branch, err)
	}
	src.doneOnTarget = map[string]bool{}
	for _, task := range ts {
		if task.Done {
			src.doneOnTarget[task.ID] = true
		}
	}
	o.Source = src
	return nil
}

// refused wraps err (not a store's) as a RefusedError.
func refused(err error) error {
	var lost *ledger.LostError
	if err == nil || IsRefused(err) || errors.As(err, &lost) {
		return err
	}
	return &RefusedError{Err: fmt.Errorf("%w", err)}
}

// tasksOf is cfg's [tasks], or an empty one.
func tasksOf(cfg *config.Config) *config.Tasks {
	if cfg.Tasks == nil {
		return &config.Tasks{}
	}
	return cfg.Tasks
}
