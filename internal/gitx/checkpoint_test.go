package gitx

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newRepo makes a repository in a temp dir with one commit, a staged
// change and a stash, and returns it.
func newRepo(t *testing.T) *Repo {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", dir) // no user config of the machine's is read
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, ".config"))
	ctx := context.Background()
	git := func(args ...string) {
		t.Helper()
		if _, err := (Cmd{Dir: dir, Args: args, Env: identity}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	write(t, dir, "a.txt", "one\n")
	write(t, dir, ".gitignore", "ignored.txt\n")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	write(t, dir, "a.txt", "stashed\n")
	git("stash", "-q")
	write(t, dir, "a.txt", "staged\n")
	git("add", "a.txt")
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// userState is what a checkpoint must never change: HEAD, the branch,
// the index's content and the stash, by hash.
func userState(t *testing.T, r *Repo) string {
	t.Helper()
	ctx := context.Background()
	var parts []string
	for _, args := range [][]string{{"rev-parse", "HEAD"}, {"symbolic-ref", "HEAD"}, {"write-tree"}, {"rev-parse", "refs/stash"}, {"hash-object", filepath.Join(r.GitDir, "index")}} {
		out, err := Run(ctx, r.Top, args...)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, out)
	}
	return strings.Join(parts, " ")
}

func files(t *testing.T, r *Repo, commit string) []string {
	t.Helper()
	out, err := Run(context.Background(), r.Top, "ls-tree", "-r", "--name-only", commit)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(out, "\n")
}

func TestCheckpointLeavesUserStateAlone(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	before := userState(t, r)
	c, err := NewCheckpointer(r, "run-1", r.Top, filepath.Join(r.Top, ".ralph"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Top, ".ralph/store.db", "ledger")
	write(t, r.Top, "ignored.txt", "x")
	write(t, r.Top, "new/untracked.txt", "u\n")
	c0, err := c.Checkpoint(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, r, c0), []string{".gitignore", "a.txt", "new/untracked.txt"}; !slices.Equal(got, want) {
		t.Fatalf("checkpoint 0 holds %q, want %q (untracked in, ignored and the store out)", got, want)
	}
	write(t, r.Top, "a.txt", "iteration one\n")
	os.Remove(filepath.Join(r.Top, "new/untracked.txt"))
	c1, err := c.Checkpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if after := userState(t, r); after != before {
		t.Fatalf("user state changed:\n%s\n%s", before, after)
	}
	if p, _ := Run(ctx, r.Top, "rev-parse", c1+"^"); p != c0 {
		t.Fatalf("checkpoint 1's parent is %s, want checkpoint 0 %s", p, c0)
	}
	if head, _ := Run(ctx, r.Top, "rev-parse", "HEAD"); mustRun(t, r, "rev-parse", c0+"^") != head {
		t.Fatal("checkpoint 0's parent is not HEAD")
	}
	if got, _ := r.Resolve(ctx, Ref("run-1", 1)); got != c1 {
		t.Fatalf("ref %s = %q, want %s", Ref("run-1", 1), got, c1)
	}
	if got, _ := r.Resolve(ctx, Ref("run-1", 7)); got != "" {
		t.Fatalf("a missing ref resolved to %q", got)
	}
	stats, err := r.DiffStat(ctx, c0, c1)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileStat{{Path: "a.txt", Added: 1, Deleted: 1}, {Path: "new/untracked.txt", Deleted: 1}}
	if !slices.Equal(stats, want) {
		t.Fatalf("diff stat %+v, want %+v", stats, want)
	}
	if _, err := os.Stat(c.snap.Index); err != nil {
		t.Fatalf("the index is not kept between checkpoints: %v", err)
	}
}

func mustRun(t *testing.T, r *Repo, args ...string) string {
	t.Helper()
	out, err := Run(context.Background(), r.Top, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckpointIgnoredStore(t *testing.T) {
	r := newRepo(t)
	write(t, r.Top, ".gitignore", "ignored.txt\n.ralph/\n")
	write(t, r.Top, ".ralph/store.db", "ledger")
	c, err := NewCheckpointer(r, "run-3", r.Top, filepath.Join(r.Top, ".ralph"))
	if err != nil {
		t.Fatal(err)
	}
	c0, err := c.Checkpoint(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, r, c0), []string{".gitignore", "a.txt"}; !slices.Equal(got, want) {
		t.Fatalf("checkpoint holds %q, want %q", got, want)
	}
}

func TestRestore(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	c, err := NewCheckpointer(r, "run-2", r.Top)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := c.Checkpoint(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Top, "a.txt", "changed\n")
	write(t, r.Top, "b.txt", "added\n")
	write(t, r.Top, "ignored.txt", "keep me\n")
	c1, err := c.Checkpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := userState(t, r)
	if err := r.Restore(ctx, r.Top, c1, c0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Top, "a.txt")); string(b) != "staged\n" {
		t.Fatalf("a.txt = %q after restore to 0", b)
	}
	if _, err := os.Stat(filepath.Join(r.Top, "b.txt")); !os.IsNotExist(err) {
		t.Fatalf("b.txt, added after checkpoint 0, is still there: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Top, "ignored.txt")); string(b) != "keep me\n" {
		t.Fatal("an ignored file was touched")
	}
	if err := r.Restore(ctx, r.Top, c0, c1); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Top, "b.txt")); string(b) != "added\n" {
		t.Fatalf("b.txt = %q after restore to 1", b)
	}
	if after := userState(t, r); after != before {
		t.Fatalf("user state changed:\n%s\n%s", before, after)
	}
}

func TestOpenOutsideGit(t *testing.T) {
	if _, err := Open(context.Background(), t.TempDir()); err != ErrNotRepo {
		t.Fatalf("Open outside git = %v, want ErrNotRepo", err)
	}
}

func TestEnvDropsInheritedGit(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_INDEX_FILE", "/nonexistent/index")
	for _, kv := range Env() {
		if strings.HasPrefix(kv, "GIT_DIR=") || strings.HasPrefix(kv, "GIT_INDEX_FILE=") {
			t.Fatalf("inherited %s reaches git", kv)
		}
	}
	r := newRepo(t) // git runs despite the bad GIT_DIR
	if r.Top == "" {
		t.Fatal("no top")
	}
}

// A run in a sub-directory checkpoints, diffs and restores that directory
// only: its siblings are neither recorded nor touched.
func TestCheckpointSubdirectory(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	sub := filepath.Join(r.Top, "svc")
	write(t, r.Top, "svc/main.txt", "v0\n")
	write(t, r.Top, "sibling.txt", "s0\n")
	c, err := NewCheckpointer(r, "run-4", sub, filepath.Join(sub, ".ralph"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Top, "svc/.ralph/x", "store")
	c0, err := c.Checkpoint(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, r, c0), []string{"main.txt"}; !slices.Equal(got, want) {
		t.Fatalf("checkpoint of svc holds %q, want %q", got, want)
	}
	write(t, r.Top, "svc/main.txt", "v1\n")
	write(t, r.Top, "svc/new.txt", "n\n")
	c1, err := c.Checkpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Top, "sibling.txt", "s1\n")
	if err := r.Restore(ctx, sub, c1, c0); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"svc/main.txt": "v0\n", "sibling.txt": "s1\n", "svc/.ralph/x": "store"} {
		if b, _ := os.ReadFile(filepath.Join(r.Top, name)); string(b) != want {
			t.Errorf("%s = %q after restoring svc to 0, want %q", name, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(sub, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("svc/new.txt is still there: %v", err)
	}
}
