package tasks

import (
	"path/filepath"
	"strings"
	"testing"
)

// A task's trip to a worker and back: Send carries the checkout's work,
// uncommitted files included, to a bare repository as the task's branch;
// a worker's clone commits on top and pushes its run's branch; Receive
// fast-forwards the checkout to it, and the queue merges that work.
func TestCheckoutSendReceive(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "worktree", true: "shared"}[shared], func(t *testing.T) {
			t.Parallel()
			f := newRepoFixture(t)
			before := f.userState()
			tg := f.target("ralph/b1/merged")
			c := f.checkout(tg, "ralph/b1/task/US-1", shared)
			f.edit(c.Dir, "return a + b", "return b + a // sent")
			bare := filepath.Join(f.home, "remote.git")
			f.git(f.home, "init", "-q", "--bare", bare)

			branch, sent, err := c.Send(f.ctx, bare)
			if err != nil {
				t.Fatal(err)
			}
			if branch != c.Branch || f.git(bare, "rev-parse", "refs/heads/"+branch) != sent {
				t.Fatalf("Send = %s %s; the remote has %q", branch, sent, f.git(bare, "for-each-ref"))
			}
			if got := f.git(bare, "cat-file", "-p", sent+":calc.go"); !strings.Contains(got, "// sent") {
				t.Fatalf("the sent commit lacks the uncommitted work:\n%s", got)
			}

			worker := filepath.Join(f.home, "worker")
			f.git(f.home, "clone", "-q", bare, worker)
			f.git(worker, "checkout", "-q", "-b", "ralph/run-1", "origin/"+branch)
			f.write(worker, "more.txt", "from the worker\n")
			f.git(worker, "add", "-A")
			f.git(worker, "commit", "-q", "-m", "ralph run-1 iteration 1")
			f.git(worker, "push", "-q", "origin", "HEAD:refs/heads/ralph/run-1")
			want := f.git(worker, "rev-parse", "HEAD")

			got, err := c.Receive(f.ctx, bare, "ralph/run-1")
			if err != nil || got != want || f.git(c.Dir, "rev-parse", "HEAD") != want {
				t.Fatalf("Receive = %s, %v; want the checkout at %s", got, err, want)
			}
			if f.read(c.Dir, "more.txt") != "from the worker\n" {
				t.Fatal("the worker's file is not in the checkout")
			}
			res := f.merge(f.queue(tg, IntegrateRebase), c, "US-1", green)
			if res.Outcome != Merged || !strings.Contains(f.show(res.Commit, "calc.go"), "// sent") || f.show(res.Commit, "more.txt") != "from the worker" {
				t.Fatalf("merge = %+v", res)
			}
			if after := f.userState(); after != before {
				t.Fatalf("user state changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
}

// The user's repository as the workspace: a work tree's branch is there
// already (a push to a branch checked out in a work tree is refused), and
// a shared clone's is fetched back.
func TestCheckoutSendToTheRepositoryItself(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		f := newRepoFixture(t)
		tg := f.target("ralph/b1/merged")
		c := f.checkout(tg, "ralph/b1/task/US-2", shared)
		f.write(c.Dir, "new.txt", "new\n")
		branch, sent, err := c.Send(f.ctx, f.dir)
		if err != nil {
			t.Fatalf("shared %v: %v", shared, err)
		}
		if got := f.git(f.dir, "rev-parse", branch); got != sent {
			t.Fatalf("shared %v: the repository's %s is at %s, want %s", shared, branch, got, sent)
		}
	}
}

// A branch that does not descend from the checkout's work is refused,
// and the checkout stays where it was.
func TestCheckoutReceiveRefusesAnotherHistory(t *testing.T) {
	t.Parallel()
	f := newRepoFixture(t)
	tg := f.target("ralph/b1/merged")
	c := f.checkout(tg, "ralph/b1/task/US-3", false)
	bare := filepath.Join(f.home, "remote.git")
	f.git(f.home, "init", "-q", "--bare", bare)
	if _, _, err := c.Send(f.ctx, bare); err != nil {
		t.Fatal(err)
	}
	head := f.git(c.Dir, "rev-parse", "HEAD")
	other := filepath.Join(f.home, "other")
	f.git(f.home, "init", "-q", other)
	f.write(other, "x.txt", "x\n")
	f.git(other, "add", "-A")
	f.git(other, "commit", "-q", "-m", "unrelated")
	f.git(other, "push", "-q", bare, "HEAD:refs/heads/ralph/run-2")
	_, err := c.Receive(f.ctx, bare, "ralph/run-2")
	if err == nil || !strings.Contains(err.Error(), "does not descend from") {
		t.Fatalf("Receive of an unrelated branch: %v", err)
	}
	if f.git(c.Dir, "rev-parse", "HEAD") != head {
		t.Fatal("the checkout moved")
	}
	if _, err := c.Receive(f.ctx, bare, "ralph/missing"); err == nil {
		t.Fatal("Receive of a missing branch succeeded")
	}
	if _, err := c.Receive(f.ctx, bare, "bad..name"); err == nil {
		t.Fatal("Receive of a bad branch name succeeded")
	}
}
