package tasks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/tasks"
)

// Two tasks of a batch edit the same function in their own checkouts.
// The first lands; the second conflicts, goes back to its loop with the
// markers left in, is resolved, and lands. docs/tasks.md quotes
// this run.
func ExampleQueue() {
	ctx := context.Background()
	home, err := os.MkdirTemp("", "ralph-queue-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(home)
	restore := setenv(map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, ".config")})
	defer restore()
	repo := filepath.Join(home, "repo")
	git := func(dir string, args ...string) string {
		out, err := gitx.Cmd{Dir: dir, Args: args, Env: []string{"GIT_AUTHOR_NAME=you", "GIT_AUTHOR_EMAIL=you@example.com",
			"GIT_COMMITTER_NAME=you", "GIT_COMMITTER_EMAIL=you@example.com"}}.Run(ctx)
		if err != nil {
			panic(err) // an example's own set-up: the test fails with git's message
		}
		return out
	}
	write := func(dir, name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			panic(err)
		}
	}
	git(home, "init", "-q", "-b", "main", repo)
	write(repo, "calc.go", "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n")
	git(repo, "add", "-A")
	git(repo, "commit", "-q", "-m", "calc")

	target, err := tasks.PrepareTarget(ctx, repo, "ralph/b1/merged")
	if err != nil {
		fmt.Println(err)
		return
	}
	q := tasks.NewQueue(target, tasks.QueueOptions{Scratch: filepath.Join(home, "scratch"), Batch: "b1"})
	defer q.Close(ctx)
	fix := tasks.Task{ID: "US-1", Title: "Add adds"}
	doc := tasks.Task{ID: "US-2", Title: "Add says what it does"}
	c1, _ := target.Checkout(ctx, filepath.Join(home, "t1"), "ralph/b1/task/US-1", false)
	c2, _ := target.Checkout(ctx, filepath.Join(home, "t2"), "ralph/b1/task/US-2", false)
	write(c1.Dir, "calc.go", "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n")
	write(c2.Dir, "calc.go", "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b // the sum\n}\n")
	check := func(_ context.Context, dir string) (bool, string, error) {
		src, err := os.ReadFile(filepath.Join(dir, "calc.go"))
		return strings.Contains(string(src), "a + b"), "go test: Add(1, 2) = -1, want 3", err
	}

	r1, _ := q.Merge(ctx, tasks.Merge{Task: fix, Checkout: c1, Check: check, Body: []string{"Ralph-Run: r1"}})
	r2, _ := q.Merge(ctx, tasks.Merge{Task: doc, Checkout: c2, Check: check, Body: []string{"Ralph-Run: r2"}})
	fmt.Println("US-1:", r1.Outcome)
	fmt.Println("US-2:", r2.Outcome, r2.Conflicts)
	text, err := q.Reset(ctx, c2, r2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.SplitN(text, "\n", 2)[0])
	src, _ := os.ReadFile(filepath.Join(c2.Dir, "calc.go"))
	fmt.Print(cutHashes(string(src)))

	// The agent resolves the markers; the queue lands the task.
	write(c2.Dir, "calc.go", "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b // the sum\n}\n")
	r2, _ = q.Merge(ctx, tasks.Merge{Task: doc, Checkout: c2, Check: check, Body: []string{"Ralph-Run: r2"}})
	fmt.Println("US-2:", r2.Outcome)
	fmt.Println(git(repo, "log", "--format=%s", "main.."+target.Branch))
	fmt.Println(git(repo, "log", "-1", "--format=%B", target.Branch))
	// Output:
	// US-1: merged
	// US-2: conflict [calc.go]
	// The merge queue could not land this task on ralph/b1/merged: its work conflicts with what landed there since the task started.
	// package calc
	//
	// func Add(a, b int) int {
	// <<<<<<< COMMIT
	// 	return a + b
	// =======
	// 	return a - b // the sum
	// >>>>>>> COMMIT
	// }
	// US-2: merged
	// US-2: Add says what it does
	// US-1: Add adds
	// US-2: Add says what it does
	//
	// Ralph-Run: r2
	//
	// Ralph-Task: b1/US-2
}

// setenv sets vars and returns what puts them back.
func setenv(vars map[string]string) func() {
	old := map[string]*string{}
	for k, v := range vars {
		if was, ok := os.LookupEnv(k); ok {
			old[k] = &was
		} else {
			old[k] = nil
		}
		os.Setenv(k, v)
	}
	return func() {
		for k, v := range old {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	}
}

// cutHashes writes the commit ids on conflict markers as COMMIT.
func cutHashes(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		for _, m := range []string{"<<<<<<< ", ">>>>>>> "} {
			if strings.HasPrefix(l, m) {
				lines[i] = m + "COMMIT"
			}
		}
	}
	return strings.Join(lines, "\n")
}
