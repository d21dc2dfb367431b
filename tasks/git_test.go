package tasks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/testenv"
)

// repoFixture is a user's repository in a temporary directory of its
// own. The package's tests share one home (TestMain): no configuration of
// the machine's is read, and git knows no identity (user.useConfigOnly),
// so ralph supplies its own.
type repoFixture struct {
	tb   testing.TB
	ctx  context.Context
	home string
	dir  string // the user's work tree
}

// calcGo is the fixture's Go file: two functions tasks edit.
const calcGo = `package calc

// Add returns a plus b.
func Add(a, b int) int {
	return a + b
}

// Sub returns a minus b.
func Sub(a, b int) int {
	return a - b
}
`

// newRepoFixture makes the user's repository: calc.go, prd.json and a
// README committed on main, a .gitignore that ignores *.log.
func newRepoFixture(tb testing.TB) *repoFixture {
	tb.Helper()
	testenv.Tool(tb, "git")
	home := tb.TempDir()
	f := &repoFixture{tb: tb, ctx: context.Background(), home: home, dir: filepath.Join(home, "repo")}
	f.git(home, "init", "-q", "-b", "main", f.dir)
	f.write(f.dir, "calc.go", calcGo)
	f.write(f.dir, "prd.json", `{"userStories": []}`+"\n")
	f.write(f.dir, "README.md", "# calc\n")
	f.write(f.dir, ".gitignore", "*.log\n")
	f.git(f.dir, "add", "-A")
	f.git(f.dir, "commit", "-q", "-m", "first")
	return f
}

// git runs git in dir as the fixture's user (ralph's identity for the
// commits it makes) and returns what it printed; a failure ends the test.
func (f *repoFixture) git(dir string, args ...string) string {
	f.tb.Helper()
	out, err := gitx.Cmd{Dir: dir, Args: args, Env: ralphIdentity}.Run(f.ctx)
	if err != nil {
		f.tb.Fatalf("git %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return out
}

func (f *repoFixture) write(dir, name, text string) {
	f.tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		f.tb.Fatal(err)
	}
}

func (f *repoFixture) read(dir, name string) string {
	f.tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		f.tb.Fatal(err)
	}
	return string(b)
}

// show is a file of a commit.
func (f *repoFixture) show(rev, name string) string {
	f.tb.Helper()
	return f.git(f.dir, "cat-file", "-p", rev+":"+name)
}

// target prepares branch as the target.
func (f *repoFixture) target(branch string) *Target {
	f.tb.Helper()
	t, err := PrepareTarget(f.ctx, f.dir, branch)
	if err != nil {
		f.tb.Fatal(err)
	}
	return t
}

// checkout makes the checkout of branch in a new directory.
func (f *repoFixture) checkout(t *Target, branch string, shared bool) *Checkout {
	f.tb.Helper()
	c, err := t.Checkout(f.ctx, filepath.Join(f.home, "checkouts", strings.ReplaceAll(branch, "/", "_")), branch, shared)
	if err != nil {
		f.tb.Fatal(err)
	}
	return c
}

// dirtyUser gives the user's checkout what a batch must never touch: a
// stash, a staged change and an untracked file.
func (f *repoFixture) dirtyUser() {
	f.tb.Helper()
	f.write(f.dir, "README.md", "# calc, stashed\n")
	f.git(f.dir, "stash", "-q")
	f.write(f.dir, "README.md", "# calc, staged\n")
	f.git(f.dir, "add", "README.md")
	f.write(f.dir, "notes.txt", "mine\n")
}

// userState is what a batch must leave as it was: HEAD, the branch,
// the index (by its tree and its file's hash), the status and the
// stash.
func (f *repoFixture) userState() string {
	f.tb.Helper()
	var parts []string
	for _, args := range [][]string{{"rev-parse", "HEAD"}, {"symbolic-ref", "HEAD"}, {"write-tree"},
		{"hash-object", filepath.Join(f.dir, ".git", "index")}, {"status", "--porcelain"}, {"stash", "list", "--format=%H %s"}} {
		parts = append(parts, f.git(f.dir, args...))
	}
	return strings.Join(parts, "\n")
}

// refSafe is a task id made one component of a branch name, for the
// tests (the sources own tasks.RefName): what git refuses becomes "-".
func refSafe(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`~^:?*[\/`, r) {
			r = '-'
		}
		b.WriteRune(r)
	}
	s := strings.ReplaceAll(b.String(), "..", "-")
	s = strings.TrimSuffix(strings.Trim(s, "."), ".lock")
	return strings.ReplaceAll(s, "@{", "-")
}
