package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// gitProject is an agent project (see newAgentProject) in a git work tree
// whose user has a commit, a staged file and a stash: what checkpoints,
// diffs, rollbacks and reruns must never change. Its tests need git.
func gitProject(t *testing.T, e *e2e.E, extraEnv ...string) *agentProject {
	t.Helper()
	p := newAgentProject(t, e, extraEnv...)
	writeFile(t, filepath.Join(p.dir, ".gitignore"), ".ralph/\n")
	p.git(t, "init", "-q", "-b", "main")
	p.git(t, "add", ".")
	p.git(t, "commit", "-q", "-m", "start")
	writeFile(t, filepath.Join(p.dir, "PROMPT.md"), "a stashed edit\n")
	p.git(t, "stash", "-q")
	writeFile(t, filepath.Join(p.dir, "staged.txt"), "staged, not committed\n")
	p.git(t, "add", "staged.txt")
	return p
}

func (p *agentProject) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=u", "-c", "user.email=u@example.com"}, args...)...)
	cmd.Dir, cmd.Env = p.dir, p.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// userState is HEAD, its branch, the index (its file's hash and its
// entries), the stash and the worktrees.
func (p *agentProject) userState(t *testing.T) string {
	t.Helper()
	index := sha256.Sum256([]byte(p.read(t, filepath.Join(".git", "index")))) // first: git commands may refresh the index
	return strings.Join([]string{hex.EncodeToString(index[:]), p.git(t, "rev-parse", "HEAD"), p.git(t, "symbolic-ref", "HEAD"),
		p.git(t, "ls-files", "--stage"), p.git(t, "rev-parse", "refs/stash"), p.git(t, "worktree", "list", "--porcelain")}, " ")
}

// runID is the id of the project's only run.
func (p *agentProject) runID(t *testing.T) string {
	t.Helper()
	for _, a := range p.chain(t) {
		if a["action_type"] == "RunStarted" {
			return a["run_id"].(string)
		}
	}
	t.Fatal("no run")
	return ""
}

// checkpoints are the commits the chain records, by iteration.
func (p *agentProject) checkpoints(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, a := range p.chain(t) {
		meta, _ := a["metadata"].(map[string]any)
		c, _ := meta["checkpoint"].(string)
		switch a["action_type"] {
		case "RunStarted":
			out[0] = c
		case "IterationCompleted":
			out[int(meta["iteration"].(float64))] = c
		}
	}
	return out
}

func (p *agentProject) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A run in a git work tree leaves a checkpoint per iteration, and the
// user's HEAD, index and stash as they were; ralph diff shows each
// iteration's change; ralph rollback goes to iteration 2 and back to the
// end, refuses over a change no checkpoint holds, and records itself.
var _ = suite.Add(e2e.Test{Name: "CheckpointsDiffRollback", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	p := gitProject(t, e, "FAKE_AGENT_DONE_AFTER=4")
	before := p.userState(t)
	if out, errOut, code := p.ralph("run", "--no-tui"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if after := p.userState(t); after != before {
		t.Fatalf("the run changed the user's git state:\n%s\n%s", before, after)
	}
	run, cps := p.runID(t), p.checkpoints(t)
	if len(cps) != 5 {
		t.Fatalf("checkpoints %v, want iterations 0 to 4", cps)
	}
	for n, c := range cps {
		if ref := p.git(t, "rev-parse", "refs/ralph/"+run+"/"+string(rune('0'+n))); c == "" || ref != c {
			t.Fatalf("iteration %d records checkpoint %q, its ref holds %q", n, c, ref)
		}
	}
	if files := p.git(t, "ls-tree", "-r", "--name-only", cps[0]); strings.Contains(files, ".ralph") || !strings.Contains(files, "staged.txt") {
		t.Fatalf("checkpoint 0 holds:\n%s\nwant the work tree (staged.txt too) without the store", files)
	}

	out, errOut, code := p.ralph("diff", run, "--json")
	if code != 0 {
		t.Fatalf("diff --json: exit %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("diff --json printed %d lines, want 4:\n%s", len(lines), out)
	}
	for i, line := range lines {
		var d struct {
			Iteration, Added, Deleted int
			Files                     []struct{ Path string }
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		want := "progress.txt"
		if i == 3 {
			want = "calc.go progress.txt"
		}
		var got []string
		for _, f := range d.Files {
			got = append(got, f.Path)
		}
		if d.Iteration != i+1 || strings.Join(got, " ") != want || d.Added != 1+i/3 {
			t.Fatalf("iteration %d's diff: %s, want files %q", i+1, line, want)
		}
	}
	if out, _, code := p.ralph("diff", run, "4"); code != 0 || !strings.Contains(out, "+func Add(a, b int) int { return a + b }") || !strings.Contains(out, "+step 4") {
		t.Fatalf("diff 4: exit %d\n%s", code, out)
	}
	if out, _, code := p.ralph("diff", run, "2", "--stat"); code != 0 || !strings.Contains(out, "progress.txt | 1 +") {
		t.Fatalf("diff 2 --stat: exit %d\n%s", code, out)
	}

	if out, errOut, code := p.ralph("rollback", run, "--to", "2"); code != 0 || !strings.Contains(out, "to iteration 2") {
		t.Fatalf("rollback --to 2: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := p.read(t, "progress.txt"); got != "step 1\nstep 2\n" {
		t.Fatalf("progress.txt after rollback to 2 = %q", got)
	}
	if got := p.read(t, "calc.go"); !strings.Contains(got, "a - b") {
		t.Fatalf("calc.go after rollback to 2 = %q, want the broken one", got)
	}
	if out, errOut, code := p.ralph("rollback", run, "--to", "4"); code != 0 {
		t.Fatalf("rollback --to 4: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := p.read(t, "progress.txt"); got != "step 1\nstep 2\nstep 3\nstep 4\n" || !strings.Contains(p.read(t, "calc.go"), "a + b") {
		t.Fatalf("after rollback to 4: progress.txt %q", got)
	}
	if after := p.userState(t); after != before {
		t.Fatalf("rollback changed the user's git state:\n%s\n%s", before, after)
	}

	writeFile(t, filepath.Join(p.dir, "notes.txt"), "mine\n")
	out, errOut, code = p.ralph("rollback", run, "--to", "2")
	if code != 1 || !strings.Contains(errOut, "notes.txt") || !strings.Contains(errOut, "--force") {
		t.Fatalf("rollback over an unsaved change: exit %d, want 1 naming notes.txt\n%s\n%s", code, out, errOut)
	}
	if got := p.read(t, "progress.txt"); got != "step 1\nstep 2\nstep 3\nstep 4\n" || p.read(t, "notes.txt") != "mine\n" {
		t.Fatal("a refused rollback changed the work tree")
	}
	if out, errOut, code := p.ralph("rollback", run, "--to", "2", "--force"); code != 0 {
		t.Fatalf("rollback --force: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "notes.txt")); !os.IsNotExist(err) {
		t.Fatal("notes.txt, in no checkpoint of iteration 2, is still there")
	}
	if saved := p.git(t, "show", "refs/ralph/"+run+"/rollback/3:notes.txt"); saved != "mine" {
		t.Fatalf("the forced rollback did not save notes.txt first: %q", saved)
	}
	restored := 0
	for _, a := range p.chain(t) {
		if a["action_type"] == "WorkspaceRestored" {
			restored++
		}
	}
	if restored != 3 {
		t.Fatalf("%d WorkspaceRestored actions, want 3", restored)
	}
	if _, errOut, code := p.ralph("chain", "verify"); code != 0 {
		t.Fatalf("chain verify after rollbacks: exit %d %s", code, errOut)
	}

	// Bad input: one sentence, exit 2, nothing changed.
	p.git(t, "update-ref", "-d", "refs/ralph/"+run+"/3")
	for _, args := range [][]string{{"diff", run, "3"}, {"rollback", run, "--to", "3"}, {"diff", run, "9"}, {"rollback", run, "--to", "x"}, {"diff", "no-such-run"}} {
		_, errOut, code := p.ralph(args...)
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("ralph %q: exit %d, want 2 and one sentence:\n%s", args, code, errOut)
		}
	}
	if got := p.read(t, "progress.txt"); got != "step 1\nstep 2\n" {
		t.Fatalf("bad input changed the work tree: progress.txt %q", got)
	}
}})

// Outside git a run says once that checkpoints are off, and diff and
// rollback say why they have nothing.
var _ = suite.Add(e2e.Test{Name: "CheckpointsOffOutsideGit", Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e, "FAKE_AGENT_DONE_AFTER=2")
	_, errOut, code := p.ralph("run", "--no-tui")
	if code != 0 || strings.Count(errOut, "checkpoints are off") != 1 {
		t.Fatalf("run outside git: exit %d, want 0 and one notice:\n%s", code, errOut)
	}
	run := p.runID(t)
	for _, args := range [][]string{{"diff", run}, {"rollback", run, "--to", "1"}} {
		_, errOut, code := p.ralph(args...)
		if code != 2 || !strings.Contains(errOut, "recorded no checkpoints") {
			t.Errorf("ralph %q: exit %d, want 2 saying there are no checkpoints:\n%s", args, code, errOut)
		}
	}
}})
