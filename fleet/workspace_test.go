package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
)

// gitHome points git's user config away from the machine's, so the tests
// see git as a fresh worker would: no identity configured. (The workers'
// git runs without any inherited GIT_* variable, so GIT_CONFIG_NOSYSTEM
// reaches only the tests' own git commands.)
func gitHome(t *testing.T) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, ".state"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(home, ".run"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

// mustGit runs git in dir for a test's setup or checks.
func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitx.Run(context.Background(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

// sharedRemote makes a bare repository holding one commit on main (a file
// seed.txt), a second commit on branch "dev", and a tag v1 on main's
// commit. It returns the bare repository's path and main's commit.
func sharedRemote(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "remote.git")
	mustGit(t, root, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	seed := filepath.Join(root, "seed")
	mustGit(t, root, "clone", "--quiet", bare, seed)
	mustGit(t, seed, "config", "user.name", "seeder")
	mustGit(t, seed, "config", "user.email", "seeder@localhost")
	if err := os.WriteFile(filepath.Join(seed, "seed.txt"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, seed, "add", "seed.txt")
	mustGit(t, seed, "commit", "--quiet", "-m", "seed")
	mustGit(t, seed, "tag", "v1")
	mustGit(t, seed, "push", "--quiet", "origin", "HEAD:refs/heads/main", "v1")
	main := mustGit(t, seed, "rev-parse", "HEAD")
	mustGit(t, seed, "commit", "--quiet", "--allow-empty", "-m", "dev work")
	mustGit(t, seed, "push", "--quiet", "origin", "HEAD:refs/heads/dev")
	return bare, main
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// branchLog is the subjects of the remote branch's commits, newest first.
func branchLog(t *testing.T, bare, branch string) []string {
	t.Helper()
	return strings.Split(mustGit(t, bare, "log", "--format=%s", branch), "\n")
}

func TestWorkspaceCommitsOneCommitPerIteration(t *testing.T) {
	gitHome(t)
	ctx := ctxT(t)
	bare, main := sharedRemote(t)
	dir := filepath.Join(t.TempDir(), "runs", "r1", "ws")
	w, err := PrepareWorkspace(ctx, bare, "", dir, "r1", "")
	if err != nil {
		t.Fatal(err)
	}
	if w.Branch != "ralph/r1" || w.Dir != dir {
		t.Fatalf("workspace %+v", w)
	}
	if got := mustGit(t, dir, "rev-parse", "HEAD"); got != main {
		t.Fatalf("start %s, want remote HEAD %s", got, main)
	}
	if err := os.WriteFile(filepath.Join(dir, "one.txt"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sha1, err := w.Commit(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	sha2, err := w.Commit(ctx, 2) // nothing changed: still one commit
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ralph r1 iteration 2", "ralph r1 iteration 1", "seed"}
	if got := branchLog(t, bare, "ralph/r1"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("branch log %q, want %q", got, want)
	}
	if tip := mustGit(t, bare, "rev-parse", "ralph/r1"); tip != sha2 {
		t.Fatalf("remote tip %s, want %s", tip, sha2)
	}
	if files := mustGit(t, bare, "ls-tree", "--name-only", sha1); files != "one.txt\nseed.txt" {
		t.Fatalf("iteration 1 tree %q", files)
	}
	if who := mustGit(t, bare, "log", "-1", "--format=%an <%ae>", sha1); who != "ralph <ralph@localhost>" {
		t.Fatalf("author %q", who)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), ".gitconfig")); !os.IsNotExist(err) {
		t.Fatalf("the user's git config was written: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".clone-*")); len(left) > 0 {
		t.Fatalf("clone directories left behind: %v", left)
	}
}

func TestWorkspaceStartsFromBranchTagOrCommit(t *testing.T) {
	gitHome(t)
	ctx := ctxT(t)
	bare, main := sharedRemote(t)
	dev := mustGit(t, bare, "rev-parse", "dev")
	for i, tc := range []struct{ ref, want string }{
		{"dev", dev}, {"main", main}, {"v1", main}, {main, main}, {dev[:12], dev},
	} {
		id := "ref" + string(rune('a'+i))
		dir := filepath.Join(t.TempDir(), "ws")
		if _, err := PrepareWorkspace(ctx, bare, tc.ref, dir, id, ""); err != nil {
			t.Fatalf("ref %s: %v", tc.ref, err)
		}
		if got := mustGit(t, dir, "rev-parse", "HEAD"); got != tc.want {
			t.Errorf("ref %s: HEAD %s, want %s", tc.ref, got, tc.want)
		}
		if got := mustGit(t, dir, "symbolic-ref", "--short", "HEAD"); got != "ralph/"+id {
			t.Errorf("ref %s: on branch %s", tc.ref, got)
		}
	}
}

func TestWorkspaceResumeDropsUnrecordedCommits(t *testing.T) {
	gitHome(t)
	ctx := ctxT(t)
	bare, main := sharedRemote(t)
	first := filepath.Join(t.TempDir(), "ws")
	w, err := PrepareWorkspace(ctx, bare, "", first, "r2", "")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := w.Commit(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Iteration 2 commits and pushes, then its worker dies before the
	// chain records the iteration as completed.
	if err := os.WriteFile(filepath.Join(first, "lost.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	lost, err := w.Commit(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}

	second := filepath.Join(t.TempDir(), "ws")
	w2, err := PrepareWorkspace(ctx, bare, "", second, "r2", recorded)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGit(t, second, "rev-parse", "HEAD"); got != recorded {
		t.Fatalf("resumed at %s, want the recorded %s", got, recorded)
	}
	if _, err := os.Stat(filepath.Join(second, "lost.txt")); !os.IsNotExist(err) {
		t.Fatalf("the unrecorded iteration's file is in the resumed workspace: %v", err)
	}
	again, err := w2.Commit(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ralph r2 iteration 2", "ralph r2 iteration 1", "seed"}
	if got := branchLog(t, bare, "ralph/r2"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("branch log %q, want %q", got, want)
	}
	if again == lost {
		t.Fatal("the redone iteration reused the lost commit")
	}
	if _, err := gitx.Run(ctx, bare, "merge-base", "--is-ancestor", lost, "ralph/r2"); err == nil {
		t.Fatal("the unrecorded commit is still on the branch")
	}

	// No iteration completed: resume where the branch started, though
	// the remote's HEAD has moved on since.
	other := filepath.Join(t.TempDir(), "other")
	mustGit(t, filepath.Dir(other), "clone", "--quiet", bare, other)
	mustGit(t, other, "-c", "user.name=o", "-c", "user.email=o@localhost", "commit", "--quiet", "--allow-empty", "-m", "later")
	mustGit(t, other, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	third := filepath.Join(t.TempDir(), "ws")
	w3, err := PrepareWorkspace(ctx, bare, "", third, "r2", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGit(t, third, "rev-parse", "HEAD"); got != main {
		t.Fatalf("resumed with no commit at %s, want the branch's start %s", got, main)
	}
	if _, err := w3.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := branchLog(t, bare, "ralph/r2"); len(got) != 2 || got[0] != "ralph r2 iteration 1" {
		t.Fatalf("branch log after a resume from the start %q", got)
	}
}

func TestWorkspaceEmptyRemote(t *testing.T) {
	gitHome(t)
	ctx := ctxT(t)
	root := t.TempDir()
	bare := filepath.Join(root, "empty.git")
	mustGit(t, root, "init", "--quiet", "--bare", bare)
	dir := filepath.Join(root, "ws")
	w, err := PrepareWorkspace(ctx, bare, "", dir, "r3", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := branchLog(t, bare, "ralph/r3"); len(got) != 1 || got[0] != "ralph r3 iteration 1" {
		t.Fatalf("branch log %q", got)
	}
}

func TestWorkspaceErrors(t *testing.T) {
	gitHome(t)
	ctx := ctxT(t)
	bare, main := sharedRemote(t)
	root := t.TempDir()
	for _, tc := range []struct {
		name, url, ref, commit string
		want                   string
	}{
		{"unreachable URL", filepath.Join(root, "nowhere.git"), "", "",
			"cannot clone workspace URL: repository '" + filepath.Join(root, "nowhere.git") + "' does not exist; check the URL and that this worker can reach it"},
		{"unknown ref", bare, "no-such-branch", "",
			`workspace ref "no-such-branch" not found in ` + bare + ": no branch, tag or commit has that name"},
		{"unknown sha", bare, "0123456789abcdef0123456789abcdef01234567", "",
			`workspace ref "0123456789abcdef0123456789abcdef01234567" not found`},
		{"resume without the branch", bare, "", main,
			"cannot resume the workspace: " + bare + " has no branch ralph/rx, which should hold commit " + main},
		{"password hidden", "http://user:s3cret@127.0.0.1:1/repo.git", "", "", "cannot clone workspace URL: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, strings.ReplaceAll(tc.name, " ", "-"), "ws")
			_, err := PrepareWorkspace(ctx, tc.url, tc.ref, dir, "rx", tc.commit)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the URL's password: %v", err)
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Fatalf("a failed prepare left %s behind", dir)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".clone-*")); len(left) > 0 {
				t.Fatalf("clone directories left behind: %v", left)
			}
		})
	}

	t.Run("directory not empty", func(t *testing.T) {
		dir := filepath.Join(root, "busy")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := PrepareWorkspace(ctx, bare, "", dir, "rx", ""); err == nil || !strings.Contains(err.Error(), "is not empty; remove it") {
			t.Fatalf("error %v", err)
		}
	})

	t.Run("push rejected", func(t *testing.T) {
		dir := filepath.Join(root, "race", "ws")
		w, err := PrepareWorkspace(ctx, bare, "", dir, "race", "")
		if err != nil {
			t.Fatal(err)
		}
		// Another writer takes the branch first.
		other, err := PrepareWorkspace(ctx, bare, "", filepath.Join(root, "race2", "ws"), "race", "")
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := other.Commit(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = w.Commit(ctx, 1)
		if err == nil || !strings.Contains(err.Error(), "push rejected for branch ralph/race: ! [rejected] HEAD -> ralph/race (stale info); another worker") {
			t.Fatalf("error %v", err)
		}
		if tip := mustGit(t, bare, "rev-parse", "ralph/race"); tip != theirs {
			t.Fatalf("the rejected push moved the branch to %s", tip)
		}
	})
}

// A run that started in an empty repository and completed no iteration
// resumes with no commit again.
func TestWorkspaceResumeOfAnEmptyStart(t *testing.T) {
	gitHome(t)
	ctx := ctxT(t)
	root := t.TempDir()
	bare := filepath.Join(root, "empty.git")
	mustGit(t, root, "init", "--quiet", "--bare", bare)
	w, err := PrepareWorkspace(ctx, bare, "", filepath.Join(root, "a"), "r4", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, 1); err != nil { // pushed, never recorded
		t.Fatal(err)
	}
	dir := filepath.Join(root, "b")
	w2, err := PrepareWorkspace(ctx, bare, "", dir, "r4", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD"); err == nil {
		t.Fatal("the resumed workspace has a commit; want none")
	}
	if _, err := w2.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := branchLog(t, bare, "ralph/r4"); len(got) != 1 || got[0] != "ralph r4 iteration 1" {
		t.Fatalf("branch log %q", got)
	}
}
