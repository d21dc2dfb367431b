package gitx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNotRepo is returned by Open for a directory outside any git work tree.
var ErrNotRepo = errors.New("not inside a git work tree")

// identity commits checkpoints as ralph, through the environment, so the
// user's git config is never read for it nor written.
var identity = []string{"GIT_AUTHOR_NAME=ralph", "GIT_AUTHOR_EMAIL=ralph@localhost",
	"GIT_COMMITTER_NAME=ralph", "GIT_COMMITTER_EMAIL=ralph@localhost"}

// Repo is a git work tree.
type Repo struct {
	Top    string // the work tree's top directory
	GitDir string // its git directory, absolute
}

// Open finds the git work tree that holds dir. A directory outside any
// work tree (or in a bare repository) is ErrNotRepo.
func Open(ctx context.Context, dir string) (*Repo, error) {
	out, err := Run(ctx, dir, "rev-parse", "--show-toplevel", "--absolute-git-dir")
	if err != nil {
		msg := Message(err)
		if strings.Contains(msg, "not a git repository") || strings.Contains(msg, "must be run in a work tree") {
			return nil, ErrNotRepo
		}
		var ee *Error
		if errors.As(err, &ee) && errors.Is(ee.Err, os.ErrNotExist) {
			return nil, fmt.Errorf("git is not installed or not on PATH: %w", err)
		}
		return nil, err
	}
	top, gitDir, ok := strings.Cut(out, "\n")
	if !ok || top == "" {
		return nil, ErrNotRepo
	}
	return &Repo{Top: top, GitDir: gitDir}, nil
}

// Ref is the hidden ref of a run's checkpoint after iteration n (0: the
// state the run started from).
func Ref(runID string, n int) string { return "refs/ralph/" + runID + "/" + strconv.Itoa(n) }

// Resolve returns the commit ref names, or "" when there is no such ref.
func (r *Repo) Resolve(ctx context.Context, ref string) (string, error) {
	out, err := Run(ctx, r.Top, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	var ee *Error
	if errors.As(err, &ee) && ee.Stderr == "" {
		return "", nil // --quiet: a missing ref says nothing and exits 1
	}
	return out, err
}

// HasCommit reports whether the repository holds commit.
func (r *Repo) HasCommit(ctx context.Context, commit string) bool {
	_, err := Run(ctx, r.Top, "cat-file", "-e", commit+"^{commit}")
	return err == nil
}

// Tree is the tree of commit, or of the path rel inside it ("" or ".":
// the whole tree); "" when commit has nothing at rel.
func (r *Repo) Tree(ctx context.Context, commit, rel string) (string, error) {
	spec := commit + "^{tree}"
	if rel != "" && rel != "." {
		spec = commit + ":" + filepath.ToSlash(rel)
	}
	out, err := Run(ctx, r.Top, "rev-parse", "--verify", "--quiet", spec)
	var ee *Error
	if errors.As(err, &ee) && ee.Stderr == "" {
		return "", nil
	}
	return out, err
}

// Rel is path p relative to the work tree's top, slash-separated, and
// whether p is inside the work tree at all.
func (r *Repo) Rel(p string) (string, bool) {
	top, err := filepath.EvalSymlinks(r.Top)
	if err != nil {
		top = r.Top
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	if e, err := filepath.EvalSymlinks(abs); err == nil {
		abs = e
	}
	rel, err := filepath.Rel(top, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// Snapshotter writes commits of a work tree's files through an index of
// its own, kept between snapshots so that only files whose stat changed
// are read and hashed again. It is not safe for concurrent use.
type Snapshotter struct {
	Repo *Repo
	// Index is the snapshotter's index file. When it does not exist yet
	// it starts as a copy of the user's index, whose stat data lets the
	// first snapshot skip every file the user has not changed.
	Index string
	// Dir is the directory snapshotted, relative to the top
	// (slash-separated; "" is the whole work tree): a snapshot's root tree
	// is Dir's tree, so a run in a sub-directory of a larger repository
	// records, diffs and restores only its own directory.
	Dir string
	// Exclude are paths relative to the top (slash-separated) left out of
	// every snapshot: ralph's store.
	Exclude []string

	excludes []string // the pathspecs of Exclude not already ignored, once known
	checked  bool
}

// pathspecs are the exclusions git add needs: those of Exclude that
// .gitignore does not already leave out (git add refuses a pathspec, even
// an excluding one, that names an ignored path).
func (s *Snapshotter) pathspecs(ctx context.Context) []string {
	if s.checked {
		return s.excludes
	}
	s.checked = true
	for _, x := range s.Exclude {
		if x == "" || x == "." {
			continue
		}
		if _, err := Run(ctx, s.Repo.Top, "check-ignore", "-q", "--no-index", "--", x); err == nil {
			continue // ignored already
		}
		s.excludes = append(s.excludes, ":(exclude,top,literal)"+x)
	}
	return s.excludes
}

// Snapshot writes a commit of the work tree, every file git would list as
// tracked or untracked but not ignored (git add -A), with parent (""
// for none) and message, and returns its hash.
func (s *Snapshotter) Snapshot(ctx context.Context, parent, message string) (string, error) {
	if err := s.seed(); err != nil {
		return "", err
	}
	env := []string{"GIT_INDEX_FILE=" + s.Index}
	scope := "."
	if s.Dir != "" && s.Dir != "." {
		scope = ":(top,literal)" + s.Dir
	}
	args := append([]string{"add", "--all", "--", scope}, s.pathspecs(ctx)...)
	if _, err := (Cmd{Dir: s.Repo.Top, Args: args, Env: env}).Run(ctx); err != nil {
		return "", fmt.Errorf("record the work tree in ralph's index: %s", Message(err))
	}
	wt := []string{"write-tree"}
	if s.Dir != "" && s.Dir != "." {
		wt = append(wt, "--prefix="+s.Dir+"/")
	}
	tree, err := Cmd{Dir: s.Repo.Top, Args: wt, Env: env}.Run(ctx)
	if err != nil {
		return "", fmt.Errorf("write the work tree's tree: %s", Message(err))
	}
	ct := []string{"commit-tree", tree, "-m", message}
	if parent != "" {
		ct = append(ct, "-p", parent)
	}
	commit, err := Cmd{Dir: s.Repo.Top, Args: ct, Env: identity}.Run(ctx)
	if err != nil {
		return "", fmt.Errorf("write the checkpoint commit: %s", Message(err))
	}
	return commit, nil
}

// seed starts the snapshotter's index as a copy of the user's, when it
// has none yet and the user has one.
func (s *Snapshotter) seed() error {
	if _, err := os.Stat(s.Index); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.Index), 0o755); err != nil {
		return fmt.Errorf("create the directory of ralph's index: %w", err)
	}
	src, err := os.Open(filepath.Join(s.Repo.GitDir, "index"))
	if errors.Is(err, os.ErrNotExist) {
		return nil // git add starts a new index
	}
	if err != nil {
		return fmt.Errorf("read the user's index: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(s.Index), ".index-*")
	if err != nil {
		return fmt.Errorf("copy the user's index: %w", err)
	}
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.Index)
	}
	if err != nil {
		_ = os.Remove(tmp.Name()) // the copy failed; the error says why
		return fmt.Errorf("copy the user's index: %w", err)
	}
	return nil
}

// Checkpointer writes a run's checkpoints: commits of the work tree on
// refs/ralph/<run-id>/<iteration>, each the child of the previous one (the
// first, iteration 0, of HEAD when there is one).
type Checkpointer struct {
	snap  Snapshotter
	runID string
	last  string // the previous checkpoint, once known
}

// NewCheckpointer returns the checkpointer of run runID whose workdir is
// dir, in repo; exclude are paths left out of its checkpoints (the store),
// absolute or relative to the current directory; those outside the work
// tree are ignored.
func NewCheckpointer(repo *Repo, runID, dir string, exclude ...string) (*Checkpointer, error) {
	if runID == "" || strings.ContainsAny(runID, " ~^:?*[\\/") || strings.Contains(runID, "..") || strings.HasPrefix(runID, "-") {
		return nil, fmt.Errorf("run id %q cannot name a git ref", runID)
	}
	rel, ok := repo.Rel(dir)
	if !ok {
		return nil, fmt.Errorf("%s is not inside the work tree %s", dir, repo.Top)
	}
	var rels []string
	for _, x := range exclude {
		if rel, ok := repo.Rel(x); ok {
			rels = append(rels, rel)
		}
	}
	return &Checkpointer{runID: runID, snap: Snapshotter{Repo: repo, Dir: rel, Exclude: rels,
		Index: filepath.Join(repo.GitDir, "ralph", "index-"+runID)}}, nil
}

// Repo is the checkpointer's repository.
func (c *Checkpointer) Repo() *Repo { return c.snap.Repo }

// Checkpoint writes the checkpoint after iteration n and returns its hash.
func (c *Checkpointer) Checkpoint(ctx context.Context, n int) (string, error) {
	parent := c.last
	whole := c.snap.Dir == "" || c.snap.Dir == "."
	if parent == "" && (n > 0 || whole) {
		ref := "HEAD" // a checkpoint of the whole work tree follows the user's commit
		if n > 0 {
			ref = Ref(c.runID, n-1) // a resumed run carries on from its last checkpoint
		}
		var err error
		if parent, err = c.snap.Repo.Resolve(ctx, ref); err != nil {
			return "", err
		}
	}
	commit, err := c.snap.Snapshot(ctx, parent, fmt.Sprintf("ralph %s iteration %d", c.runID, n))
	if err != nil {
		return "", err
	}
	if err := c.snap.Repo.UpdateRef(ctx, Ref(c.runID, n), commit); err != nil {
		return "", err
	}
	c.last = commit
	return commit, nil
}

// Snapshot writes a commit of the work tree on ref, through the
// checkpointer's index, without making it the parent of the next checkpoint.
func (c *Checkpointer) Snapshot(ctx context.Context, ref, parent, message string) (string, error) {
	commit, err := c.snap.Snapshot(ctx, parent, message)
	if err != nil {
		return "", err
	}
	if err := c.snap.Repo.UpdateRef(ctx, ref, commit); err != nil {
		return "", err
	}
	return commit, nil
}

// Close removes the checkpointer's index; the checkpoints stay.
func (c *Checkpointer) Close() error {
	if err := os.Remove(c.snap.Index); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// UpdateRef points ref at commit.
func (r *Repo) UpdateRef(ctx context.Context, ref, commit string) error {
	if _, err := Run(ctx, r.Top, "update-ref", "-m", "ralph checkpoint", ref, commit); err != nil {
		return fmt.Errorf("write ref %s: %s", ref, Message(err))
	}
	return nil
}
