package gitx

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// FileStat is one file's change between two commits.
type FileStat struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// DiffStat returns the files that differ between two commits, with their
// added and deleted line counts (git diff --numstat, renames as a delete
// and an add).
func (r *Repo) DiffStat(ctx context.Context, from, to string) ([]FileStat, error) {
	out, err := Run(ctx, r.Top, "diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", from, to, "--")
	if err != nil {
		return nil, fmt.Errorf("diff %s %s: %s", short(from), short(to), Message(err))
	}
	var files []FileStat
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("diff %s %s: unexpected numstat line %q", short(from), short(to), rec)
		}
		fs := FileStat{Path: f[2]}
		if f[0] == "-" && f[1] == "-" {
			fs.Binary = true
		} else {
			fs.Added, _ = strconv.Atoi(f[0])   // numstat prints decimal counts
			fs.Deleted, _ = strconv.Atoi(f[1]) // or "-" for a binary file, handled above
		}
		files = append(files, fs)
	}
	return files, nil
}

// Diff writes git's diff between two commits to w; stat asks for --stat
// instead of the patch, color for colours.
func (r *Repo) Diff(ctx context.Context, w io.Writer, from, to string, stat, color bool) error {
	args := []string{"diff", "--no-ext-diff", "--no-textconv"}
	if color {
		args = append(args, "--color=always")
	} else {
		args = append(args, "--no-color")
	}
	if stat {
		args = append(args, "--stat")
	}
	args = append(args, from, to, "--")
	if _, err := (Cmd{Dir: r.Top, Args: args, Stdout: w}).Run(ctx); err != nil {
		return fmt.Errorf("diff %s %s: %s", short(from), short(to), Message(err))
	}
	return nil
}

// ChangedPaths lists the paths that differ between two trees or commits.
func (r *Repo) ChangedPaths(ctx context.Context, from, to string) ([]string, error) {
	out, err := Run(ctx, r.Top, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", from, to, "--")
	if err != nil {
		return nil, fmt.Errorf("diff %s %s: %s", short(from), short(to), Message(err))
	}
	var paths []string
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Restore makes the files of dir (a directory of the work tree, whose
// snapshots from and to are) those of commit to, from the state commit
// from holds (which must be dir's present content, as a snapshot just
// taken): files changed since are written back, files added since are
// removed. The user's index and HEAD are not used: the switch goes
// through a temporary index of its own.
func (r *Repo) Restore(ctx context.Context, dir, from, to string) error {
	f, err := os.CreateTemp(r.GitDir, "ralph-restore-index-*")
	if err != nil {
		return fmt.Errorf("create a temporary index: %w", err)
	}
	idx := f.Name()
	f.Close()
	os.Remove(idx) // git wants to create it; only the name was needed
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	steps := [][]string{
		{"read-tree", from},
		{"update-index", "-q", "--refresh"},
		{"read-tree", "-m", "-u", from, to},
	}
	for i, args := range steps {
		args = append([]string{"--git-dir=" + r.GitDir, "--work-tree=" + dir}, args...)
		_, err := Cmd{Dir: dir, Args: args, Env: env}.Run(ctx)
		if err != nil && i != 1 { // refresh exits 1 when files differ; read-tree -m then names them
			return fmt.Errorf("restore the work tree to %s: %s", short(to), Message(err))
		}
	}
	return nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
