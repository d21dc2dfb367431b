package tasks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCheckoutWorktree(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	f.dirtyUser()
	before := f.userState()
	tg := f.target("ralph/b/merged")
	c := f.checkout(tg, "ralph/b/task/US-1", false)
	if c.Shared || c.Ref != "refs/heads/ralph/b/task/US-1" {
		t.Fatalf("checkout = %+v", c)
	}
	if got := f.git(c.Dir, "symbolic-ref", "HEAD"); got != c.Ref {
		t.Fatalf("checkout on %s, want %s", got, c.Ref)
	}
	if got, want := f.git(f.dir, "rev-parse", c.Branch, baseRef(c.Branch)), tg.Start+"\n"+tg.Start; got != want {
		t.Fatalf("branch and base at %q, want both at the target's tip %s", got, tg.Start)
	}
	if f.read(c.Dir, "calc.go") != calcGo {
		t.Fatal("the checkout does not hold the target's files")
	}
	// A killed batch resumes: the same directory is the same checkout,
	// with its work.
	f.write(c.Dir, "calc.go", "package calc // work in progress\n")
	again := f.checkout(tg, c.Branch, false)
	if again.Dir != c.Dir || f.read(c.Dir, "calc.go") != "package calc // work in progress\n" {
		t.Fatalf("reopened checkout %+v lost the work", again)
	}
	if err := c.Remove(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Fatalf("checkout directory still there: %v", err)
	}
	if f.git(f.dir, "rev-parse", "--verify", c.Ref) == "" {
		t.Fatal("the task branch went with its checkout")
	}
	if strings.Contains(f.git(f.dir, "worktree", "list"), c.Dir) {
		t.Fatal("the work tree is still registered")
	}
	if after := f.userState(); after != before {
		t.Fatalf("user state changed:\n%s\nwant\n%s", after, before)
	}
}

// A checkout whose directory went (a killed batch, a cleaned temp dir)
// is made again on its branch, with the branch's commits.
func TestCheckoutAgainAfterItsDirectoryWent(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b/merged")
	c := f.checkout(tg, "ralph/b/task/2", false)
	f.write(c.Dir, "calc.go", "package calc // committed\n")
	f.git(c.Dir, "commit", "-q", "-am", "agent's commit")
	committed := f.git(c.Dir, "rev-parse", "HEAD")
	if err := os.RemoveAll(c.Dir); err != nil {
		t.Fatal(err)
	}
	again := f.checkout(tg, c.Branch, false)
	if got := f.git(again.Dir, "rev-parse", "HEAD"); got != committed {
		t.Fatalf("checkout again at %s, want the branch's commit %s", got, committed)
	}
	if got := f.git(f.dir, "rev-parse", baseRef(c.Branch)); got != tg.Start {
		t.Fatalf("base %s, want %s", got, tg.Start)
	}
}

func TestCheckoutRefusals(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b/merged")
	notOurs := filepath.Join(f.home, "full")
	f.write(notOurs, "file.txt", "someone's\n")
	f.git(f.dir, "branch", "taken")
	taken := filepath.Join(f.home, "taken")
	f.git(f.dir, "worktree", "add", "-q", taken, "taken")
	for _, c := range []struct {
		name, dir, branch string
		shared            bool
		says              string
	}{
		{"inside the user's tree", filepath.Join(f.dir, "tasks", "1"), "t1", false, "inside the repository's work tree"},
		{"a directory of something else", notOurs, "t2", false, "is not a git checkout"},
		{"a work tree on another branch", taken, "t3", false, "not on the task's branch"},
		{"a work tree taken as a clone", taken, "taken", true, "is not a clone --shared"},
		{"a branch checked out elsewhere", filepath.Join(f.home, "new"), "taken", false, "is checked out at"},
		{"a bad branch name", filepath.Join(f.home, "new2"), "a b", false, "not a branch name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tg.Checkout(f.ctx, c.dir, c.branch, c.shared)
			if refusal(err) == 0 || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v, want a refusal saying %q", err, c.says)
			}
		})
	}
}

func TestCheckoutShared(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	f.dirtyUser()
	before := f.userState()
	tg := f.target("ralph/b/merged")
	c := f.checkout(tg, "ralph/b/task/3", true)
	gitDir := filepath.Join(c.Dir, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		t.Fatalf("the clone's .git is not a directory of its own (%v): a worktree's points into the user's", err)
	}
	alt := f.read(gitDir, "objects/info/alternates")
	if !strings.Contains(alt, filepath.Join(tg.GitDir, "objects")) {
		t.Fatalf("alternates %q do not borrow the user's objects", alt)
	}
	if remotes := f.git(c.Dir, "remote"); remotes != "" {
		t.Fatalf("the clone has remotes %q: its git could reach the user's repository", remotes)
	}
	if got := f.git(c.Dir, "symbolic-ref", "HEAD"); got != c.Ref {
		t.Fatalf("clone on %s", got)
	}
	f.write(c.Dir, "calc.go", "package calc // shared\n")
	f.git(c.Dir, "commit", "-q", "-am", "in the clone")
	work := f.git(c.Dir, "rev-parse", "HEAD")
	if again := f.checkout(tg, c.Branch, true); again.Dir != c.Dir {
		t.Fatalf("reopened %+v", again)
	}
	if err := c.Remove(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.git(f.dir, "rev-parse", c.Ref); got != work {
		t.Fatalf("the branch came back at %s, want the clone's %s", got, work)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Fatalf("clone still there: %v", err)
	}
	if after := f.userState(); after != before {
		t.Fatalf("user state changed:\n%s\nwant\n%s", after, before)
	}
}

func TestCheckoutOddIDs(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b/merged")
	for _, id := range []string{"US 001", "ä/ö:ü", "x..y", "fix~1^2", "tail.lock", "@{-1}", "#42 [bug]"} {
		branch := "ralph/b/task/" + refSafe(id)
		c, err := tg.Checkout(f.ctx, filepath.Join(f.home, "odd", refSafe(id)), branch, false)
		if err != nil {
			t.Fatalf("id %q as branch %q: %v", id, branch, err)
		}
		if got := f.git(c.Dir, "symbolic-ref", "HEAD"); got != c.Ref {
			t.Fatalf("id %q: checkout on %s", id, got)
		}
	}
}

// A batch makes its tasks' checkouts from several goroutines at once.
func TestCheckoutsAtOnce(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b/merged")
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = tg.Checkout(f.ctx, filepath.Join(f.home, "at-once", fmt.Sprint(i)), fmt.Sprintf("ralph/b/task/%d", i), i%2 == 0)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("checkout %d: %v", i, err)
		}
	}
	if refs := f.git(f.dir, "for-each-ref", "--format=%(refname)", "refs/ralph/base/"); strings.Count(refs, "\n")+1 != n {
		t.Fatalf("base refs:\n%s", refs)
	}
}
