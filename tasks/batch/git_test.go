package batch

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/tasks"
)

// gitRepo is a user's repository in a temporary directory: its config,
// its prd.json, its first commit.
type gitRepo struct {
	dir string
}

func newGitRepo(t *testing.T, toml, prd string) *gitRepo {
	t.Helper()
	r := &gitRepo{dir: t.TempDir()}
	for name, text := range map[string]string{"ralph.toml": toml, "prd.json": prd, ".gitignore": ".ralph/\n", "README.md": "the project\n"} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git(t, "init", "-q", "-b", "main")
	r.git(t, "add", ".")
	r.git(t, "commit", "-q", "-m", "start")
	return r
}

func (r *gitRepo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=u", "-c", "user.email=u@example.com"}, args...)...)
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// state is what the batch must leave alone: HEAD, its branch, the index,
// the work tree's status, the stash.
func (r *gitRepo) state(t *testing.T) string {
	t.Helper()
	return strings.Join([]string{r.git(t, "rev-parse", "HEAD"), r.git(t, "symbolic-ref", "HEAD"), r.git(t, "ls-files", "--stage"),
		r.git(t, "status", "--porcelain", "--untracked-files=all"), r.git(t, "stash", "list")}, "\n")
}

// prepare opens the store and builds the batch of the repository's config.
func (r *gitRepo) prepare(t *testing.T, s Setup) (*Batch, *ledger.Store) {
	t.Helper()
	cfg, err := config.Load(filepath.Join(r.dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(ledger.Options{Dir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s.Config, s.Store, s.StoreDir = cfg, st, st.Dir()
	b, err := Prepare(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return b, st
}

// perTask is a loop whose static plan writes the task's own file, and
// whose success condition (a command) needs at least one such file.
const perTask = `[plan]
rtfs = '(do (step "w" (call :fs.write {:path (str (:id (:task ctx)) ".txt") :content (:title (:task ctx))})))'
[[stop]]
name = "work"
kind = "command"
cmd = ["sh", "-c", "ls US-*.txt"]
[[stop]]
kind = "max_iterations"
max = 2
[tasks]
source = "prd.json"
parallel = 2
`

func prdOf(stories ...string) string {
	var parts []string
	for i, id := range stories {
		parts = append(parts, `{"id": "`+id+`", "title": "Title `+id+`", "description": "Do `+id+`", "acceptanceCriteria": ["`+id+` done"], "priority": `+
			string(rune('1'+i))+`, "passes": false}`)
	}
	return `{"project": "P", "branchName": "ralph/p", "userStories": [` + strings.Join(parts, ",\n") + "]}\n"
}

// Three stories of a prd.json, two at a time, with real git: one commit
// per task on the target (the prd's branchName), titled with its id and
// title, with passes: true in the target's prd.json; the user's checkout
// untouched.
func TestGitBatch(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t, perTask, prdOf("US-1", "US-2", "US-3"))
	before := r.state(t)
	b, st := r.prepare(t, Setup{})
	s, err := b.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.ExitCode != 0 || s.Target != "ralph/p" {
		t.Fatalf("summary %+v", s)
	}
	if after := r.state(t); after != before {
		t.Fatalf("the batch changed the user's checkout:\n%s\n---\n%s", before, after)
	}
	log := r.git(t, "log", "--format=%s", "main..ralph/p")
	if lines := strings.Split(log, "\n"); len(lines) != 3 || !strings.Contains(log, "US-1: Title US-1") {
		t.Fatalf("target log:\n%s", log)
	}
	var prd struct{ UserStories []struct{ Passes bool } }
	if err := json.Unmarshal([]byte(r.git(t, "show", "ralph/p:prd.json")), &prd); err != nil {
		t.Fatal(err)
	}
	for i, u := range prd.UserStories {
		if !u.Passes {
			t.Errorf("story %d does not pass on the target", i)
		}
	}
	for _, f := range []string{"US-1.txt", "US-2.txt", "US-3.txt"} {
		r.git(t, "cat-file", "-e", "ralph/p:"+f)
	}
	if wts := r.git(t, "worktree", "list", "--porcelain"); strings.Count(wts, "worktree ") != 1 {
		t.Errorf("the merged tasks' checkouts or the queue's scratch tree are left:\n%s", wts)
	}
	if s.Take != "git merge --ff-only ralph/p" {
		t.Errorf("take %q", s.Take)
	}
	if v, err := st.Verify(context.Background(), nil); err != nil || !v.OK() {
		t.Fatalf("verify %+v %v", v, err)
	}
}

// Two tasks writing the same file: the second conflicts, goes back to its
// loop with the conflict, and merges on its next run.
func TestGitConflict(t *testing.T) {
	t.Parallel()
	shared := strings.Replace(perTask, `(str (:id (:task ctx)) ".txt")`, `"US-shared.txt"`, 1)
	r := newGitRepo(t, shared, prdOf("US-1", "US-2"))
	b, _ := r.prepare(t, Setup{Parallel: 2})
	s, err := b.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.ExitCode != 0 {
		t.Fatalf("summary %+v", s)
	}
	runs := len(s.Tasks[0].Runs) + len(s.Tasks[1].Runs)
	if runs != 3 {
		t.Fatalf("%d runs, want 3 (one task back after a conflict): %+v", runs, s.Tasks)
	}
	if got := r.git(t, "show", "ralph/p:US-shared.txt"); got != "Title US-1" && got != "Title US-2" {
		t.Fatalf("shared file on the target: %q", got)
	}
}

// Refusals: a task source with uncommitted changes, a repository with no
// commit, a bad integrate; each names what to fix.
func TestGitRefusals(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t, perTask, prdOf("US-1"))
	if err := os.WriteFile(filepath.Join(r.dir, "prd.json"), []byte(prdOf("US-1", "US-2")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(r.dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = Prepare(context.Background(), Setup{Config: cfg, Store: st, StoreDir: t.TempDir()})
	if !IsRefused(err) || !strings.Contains(err.Error(), "prd.json") {
		t.Fatalf("dirty source: %v", err)
	}

	bad := strings.Replace(perTask, "parallel = 2", "integrate = \"squash\"", 1)
	r = newGitRepo(t, bad, prdOf("US-1"))
	cfg, err = config.Load(filepath.Join(r.dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = Prepare(context.Background(), Setup{Config: cfg, Store: st, StoreDir: t.TempDir()})
	if !IsRefused(err) || !strings.Contains(err.Error(), "ralph.toml:12:13:") {
		t.Fatalf("bad integrate: %v", err)
	}
}

// A batch run again onto the target of an earlier one (the prd's
// branchName) runs only the stories not done there: the user's backlog
// is HEAD's (where no story passes yet), what the target has done is done.
func TestGitBatchAgain(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t, perTask, prdOf("US-1", "US-2", "US-3"))
	first, _ := r.prepare(t, Setup{})
	first.o.Order = func(ts []tasks.Task) ([]tasks.Task, error) { // only US-1 and US-2 this time
		ordered, err := tasks.Order(ts)
		return ordered[:2], err
	}
	if s, err := first.Run(context.Background()); err != nil || s.ExitCode != 0 {
		t.Fatalf("first batch: %+v %v", s, err)
	}
	again, _ := r.prepare(t, Setup{})
	s, err := again.Run(context.Background())
	if err != nil || s.ExitCode != 0 || len(s.Tasks) != 1 || s.Tasks[0].ID != "US-3" || s.Tasks[0].Verdict != VerdictMerged {
		t.Fatalf("second batch: %+v %v", s, err)
	}
	if log := r.git(t, "log", "--format=%s", "main..ralph/p"); len(strings.Split(log, "\n")) != 3 {
		t.Fatalf("target log:\n%s", log)
	}
}
