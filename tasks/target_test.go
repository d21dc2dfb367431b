package tasks

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// refusal is err's kind when it is a *RefusedError, else 0.
func refusal(err error) Refusal {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Kind
	}
	return 0
}

func TestPrepareTargetFromHead(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	f.dirtyUser()
	before := f.userState()
	head := f.git(f.dir, "rev-parse", "HEAD")
	tg, err := PrepareTarget(f.ctx, filepath.Join(f.dir), "ralph/b1/merged")
	if err != nil {
		t.Fatal(err)
	}
	if !tg.Created || tg.Start != head || tg.CheckedOut != "" || tg.Ref != "refs/heads/ralph/b1/merged" {
		t.Fatalf("target = %+v, want created at HEAD %s and not checked out", tg, head)
	}
	if got := f.git(f.dir, "rev-parse", "ralph/b1/merged"); got != head {
		t.Fatalf("branch at %s, want %s", got, head)
	}
	if after := f.userState(); after != before {
		t.Fatalf("user state changed:\n%s\nwant\n%s", after, before)
	}
	// Prepared again it is taken as it is.
	again, err := PrepareTarget(f.ctx, f.dir, "ralph/b1/merged")
	if err != nil || again.Created || again.Start != head {
		t.Fatalf("again = %+v, %v; want the existing branch", again, err)
	}
}

func TestPrepareTargetFromSubdirectoryAndDetachedHead(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	f.write(f.dir, "sub/x.txt", "x\n")
	f.git(f.dir, "add", "-A")
	f.git(f.dir, "commit", "-q", "-m", "second")
	f.git(f.dir, "checkout", "-q", "--detach")
	f.write(f.dir, "sub/x.txt", "detached\n")
	f.git(f.dir, "commit", "-q", "-am", "on a detached HEAD")
	detached := f.git(f.dir, "rev-parse", "HEAD")
	tg, err := PrepareTarget(f.ctx, filepath.Join(f.dir, "sub"), "work")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Start != detached || !tg.Created || !samePath(tg.Dir, f.dir) || !samePath(tg.GitDir, filepath.Join(f.dir, ".git")) {
		t.Fatalf("target = %+v, want created at the detached commit %s in %s", tg, detached, f.dir)
	}
	if got := f.git(f.dir, "rev-parse", "main"); got == detached {
		t.Fatal("main moved")
	}
}

func TestPrepareTargetRefusals(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	unborn := filepath.Join(f.home, "unborn")
	f.git(f.home, "init", "-q", unborn)
	outside := t.TempDir()
	for _, c := range []struct {
		name, dir, branch string
		want              Refusal
		says              string
	}{
		{"unborn", unborn, "t", RefuseUnborn, "make a first commit"},
		{"not a repository", outside, "t", RefuseNotRepo, "not inside a git work tree"},
		{"bad name", f.dir, "a..b", RefuseBranch, "not a branch name"},
		{"option-like name", f.dir, "-x", RefuseBranch, "not a branch name"},
		{"lock suffix", f.dir, "x.lock", RefuseBranch, "not a branch name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := PrepareTarget(f.ctx, c.dir, c.branch)
			if refusal(err) != c.want || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v, want refusal %d saying %q", err, c.want, c.says)
			}
		})
	}
}

func TestCheckedOutTargetMustBeClean(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("main")
	if !samePath(tg.CheckedOut, f.dir) || tg.Created {
		t.Fatalf("target = %+v, want main checked out at %s", tg, f.dir)
	}
	f.write(f.dir, "calc.go", "package calc\n")
	f.write(f.dir, "new.txt", "new\n")
	f.write(f.dir, "ignored.log", "ignored files do not count\n")
	_, err := PrepareTarget(f.ctx, f.dir, "main")
	if refusal(err) != RefuseDirtyTarget {
		t.Fatalf("err = %v, want RefuseDirtyTarget", err)
	}
	for _, want := range []string{"calc.go modified", "new.txt untracked", "git stash -u", "--target"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ignored.log") {
		t.Errorf("refusal %q names an ignored file", err)
	}
	// The target checked out in another work tree counts too.
	f.git(f.dir, "checkout", "-q", "--", "calc.go")
	f.git(f.dir, "branch", "side")
	other := filepath.Join(f.home, "other")
	f.git(f.dir, "worktree", "add", "-q", other, "side")
	f.write(other, "README.md", "changed\n")
	if _, err := PrepareTarget(f.ctx, f.dir, "side"); refusal(err) != RefuseDirtyTarget || !strings.Contains(err.Error(), other) {
		t.Fatalf("err = %v, want RefuseDirtyTarget naming %s", err, other)
	}
}

func TestTargetClean(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b/merged")
	if err := tg.Clean(f.ctx, "prd.json", filepath.Join(f.dir, "calc.go"), filepath.Join(t.TempDir(), "elsewhere.json")); err != nil {
		t.Fatalf("committed files: %v", err)
	}
	f.write(f.dir, "prd.json", `{"userStories": [{"id": "US-1"}]}`)
	f.write(f.dir, "todo.md", "- [ ] x\n")
	f.write(f.dir, "plan.log", "- [ ] ignored\n")
	for _, c := range []struct{ path, says string }{
		{"prd.json", "prd.json modified"},
		{"todo.md", "todo.md untracked"},
		{"plan.log", "git add -f plan.log"},
		{filepath.Join(f.dir, "todo.md"), "todo.md untracked"},
	} {
		err := tg.Clean(f.ctx, c.path)
		if refusal(err) != RefuseDirtySource || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Clean(%s) = %v, want RefuseDirtySource saying %q", c.path, err, c.says)
		}
	}
	if err := tg.Clean(f.ctx, "README.md"); err != nil {
		t.Errorf("Clean(README.md) = %v: another file's change is not the source's", err)
	}
}

func TestIdentity(t *testing.T) {
	f := newRepoFixture(t)
	if id := identity(f.ctx, f.dir); len(id) == 0 {
		t.Fatal("git knows no identity (user.useConfigOnly), yet ralph supplies none")
	}
	t.Setenv("HOME", f.home) // a home of its own, where the user has an identity
	f.write(f.home, ".gitconfig", "[user]\n\tname = Ada\n\temail = ada@example.com\n")
	if id := identity(f.ctx, f.dir); id != nil {
		t.Fatalf("the user configured an identity, yet ralph supplies %q", id)
	}
	tg := f.target("ralph/b/merged")
	c := f.checkout(tg, "ralph/b/task/1", false)
	f.write(c.Dir, "calc.go", strings.Replace(calcGo, "a + b", "b + a", 1))
	q := NewQueue(tg, QueueOptions{Scratch: filepath.Join(f.home, "scratch"), Batch: "b"})
	defer q.Close(f.ctx)
	res, err := q.Merge(f.ctx, Merge{Task: Task{ID: "1", Title: "swap"}, Checkout: c, Check: green})
	if err != nil || res.Outcome != Merged {
		t.Fatalf("merge = %+v, %v", res, err)
	}
	if who := f.git(f.dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>", res.Commit); who != "Ada <ada@example.com>|Ada <ada@example.com>" {
		t.Fatalf("commit by %q, want the user's identity", who)
	}
}
