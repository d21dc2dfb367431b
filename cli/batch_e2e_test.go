package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// backlog is a git repository with a prd.json of three stories and an
// agent loop (the stand-in claude) whose success condition is a command:
// a done-<story>.txt file exists. The stand-in writes its task's file
// (named from its branch, ralph/<batch>/task/<id>) when it is done.
type backlog struct {
	e   *e2e.E
	dir string
	env []string
}

const backlogConfig = `[intent]
goal = "Work through the backlog"
prompt_file = "PROMPT.md"

[agent]
cli = "claude"

[[stop]]
name = "done"
kind = "command"
cmd = ["sh", "-c", "ls done-*.txt"]

[[stop]]
name = "iterations"
kind = "max_iterations"
max = 3
`

const backlogPRD = `{
  "project": "Greetings",
  "branchName": "ralph/greetings",
  "description": "Greet people in three languages",
  "userStories": [
    {"id": "US-001", "title": "Greet in English", "description": "As a user I want Hello.", "acceptanceCriteria": ["done-US-001.txt exists"], "priority": 1, "passes": false},
    {"id": "US-002", "title": "Greet in French", "description": "As a user I want Bonjour.", "acceptanceCriteria": ["done-US-002.txt exists"], "priority": 2, "passes": false},
    {"id": "US-003", "title": "Greet in German", "description": "As a user I want Hallo.", "acceptanceCriteria": ["done-US-003.txt exists"], "priority": 3, "passes": false}
  ]
}
`

func newBacklog(t *testing.T, e *e2e.E, extraEnv ...string) *backlog {
	t.Helper()
	b := &backlog{e: e, dir: t.TempDir()}
	for name, text := range map[string]string{"ralph.toml": backlogConfig, "prd.json": backlogPRD, ".gitignore": ".ralph/\nprogress.txt\n",
		"PROMPT.md": "You work on a greetings library. Keep each change small.\n"} {
		writeFile(t, filepath.Join(b.dir, name), text)
	}
	b.env = append([]string{"PATH=" + fakeAgentBin(t) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"FAKE_AGENT_STATE=" + t.TempDir(), "FAKE_AGENT_DONE_AFTER=1", "FAKE_AGENT_LOG=" + filepath.Join(t.TempDir(), "prompts.log"),
		`FAKE_AGENT_ON_DONE=b=$(git rev-parse --abbrev-ref HEAD); echo ok > "done-${b##*/}.txt"`}, extraEnv...)
	b.git(t, "init", "-q", "-b", "main")
	b.git(t, "add", ".")
	b.git(t, "commit", "-q", "-m", "start")
	return b
}

func (b *backlog) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=u", "-c", "user.email=u@example.com"}, args...)...)
	cmd.Dir = b.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (b *backlog) ralph(args ...string) *e2e.Cmd { return b.e.Ralph(args...).In(b.dir).With(b.env...) }

// checkout is the user's HEAD, branch, index, status and stash.
func (b *backlog) checkout(t *testing.T) string {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(b.dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(index)
	return strings.Join([]string{hex.EncodeToString(sum[:]), b.git(t, "rev-parse", "HEAD"), b.git(t, "symbolic-ref", "HEAD"),
		b.git(t, "status", "--porcelain", "--untracked-files=all"), b.git(t, "stash", "list")}, "\n")
}

// landed checks the target: one commit per story, each story passing in
// its prd.json, each story's file there.
func (b *backlog) landed(t *testing.T) {
	t.Helper()
	if log := b.git(t, "log", "--format=%s", "main..ralph/greetings"); len(strings.Split(log, "\n")) != 3 || !strings.Contains(log, "US-002: Greet in French") {
		t.Fatalf("the target's commits:\n%s", log)
	}
	var prd struct {
		UserStories []struct {
			ID     string
			Passes bool
		}
	}
	if err := json.Unmarshal([]byte(b.git(t, "show", "ralph/greetings:prd.json")), &prd); err != nil {
		t.Fatal(err)
	}
	for _, u := range prd.UserStories {
		if !u.Passes {
			t.Errorf("%s does not pass in the target's prd.json", u.ID)
		}
		b.git(t, "cat-file", "-e", "ralph/greetings:done-"+u.ID+".txt")
	}
}

// A 3-story prd.json, two at a time, with the stand-in agent: exit 0, one
// commit per story on the prd's branch with passes: true, the user's
// checkout untouched, the chain verified with the batch's actions on it,
// ralph runs showing the batch with its three runs under it.
var _ = suite.Add(e2e.Test{Name: "BatchRunsABacklog", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	b := newBacklog(t, e)
	before := b.checkout(t)
	out, errOut, code := b.ralph("run", "--tasks", "prd.json", "--parallel", "2", "--no-tui").Run()
	if code != 0 {
		t.Fatalf("run --tasks: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"3 tasks from prd:", "onto ralph/greetings, 2 at a time", "US-001 started: Greet in English",
		"US-003 merged as ", "done: 3 of 3 merged", "take the target: git merge --ff-only ralph/greetings"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if after := b.checkout(t); after != before {
		t.Fatalf("the batch changed the user's checkout:\n%s\n---\n%s", before, after)
	}
	b.landed(t)
	if out, errOut, code := b.ralph("chain", "verify").Run(); code != 0 {
		t.Fatalf("chain verify: exit %d\n%s\n%s", code, out, errOut)
	}
	chain, _, _ := b.ralph("chain", "show", "--json").Run()
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(chain), "\n") {
		var a struct {
			ActionType string `json:"action_type"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		counts[a.ActionType]++
	}
	if counts["BatchStarted"] != 1 || counts["TaskStarted"] != 3 || counts["TaskEnded"] != 3 || counts["TaskMerged"] != 3 || counts["RunCompleted"] != 3 {
		t.Fatalf("chain: %v", counts)
	}
	runs, _, code := b.ralph("runs", "--json").Run()
	var batch string
	children := 0
	for _, line := range strings.Split(strings.TrimSpace(runs), "\n") {
		var r struct {
			ID, Batch, State string
			Tasks            int
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Tasks == 3 {
			batch = r.ID
		} else if r.Batch != "" && r.Batch == batch {
			children++
		}
	}
	if code != 0 || batch == "" || children != 3 {
		t.Fatalf("runs --json (exit %d): batch %q, %d children:\n%s", code, batch, children, runs)
	}
	prompts, err := os.ReadFile(filepath.Join(strings.TrimPrefix(b.env[3], "FAKE_AGENT_LOG=")))
	if err != nil || !strings.Contains(string(prompts), "small.\n\n## Task US-002: Greet in French") || !strings.Contains(string(prompts), "- done-US-003.txt exists") {
		t.Fatalf("the agent's prompts (%v):\n%s", err, prompts)
	}
}})

// A batch is refused (exit 2, naming the file) while its prd.json differs
// from HEAD, since every task's checkout starts from HEAD.
var _ = suite.Add(e2e.Test{Name: "BatchRefusesADirtySource", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	b := newBacklog(t, e)
	writeFile(t, filepath.Join(b.dir, "prd.json"), strings.Replace(backlogPRD, "Hallo", "Guten Tag", 1))
	out, errOut, code := b.ralph("run", "--tasks", "prd.json", "--no-tui").Run()
	if code != 2 || !strings.Contains(errOut, "prd.json") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}})

// A batch killed (SIGKILL) while its tasks run resumes with ralph resume:
// the runs that were running go on, and every task lands.
var _ = suite.Add(e2e.Test{Name: "BatchResumesAfterAKill", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	b := newBacklog(t, e, "FAKE_AGENT_DELAY=0.3")
	p := b.ralph("run", "--tasks", "prd.json", "--parallel", "2", "--no-tui").Start()
	first := p.WaitLine(" started: ")
	p.WaitLine(" started: ")
	// While the batch runs, other commands read its store through its socket.
	if runs, errOut, code := b.ralph("runs").Run(); code != 0 || !strings.Contains(runs, "running") {
		t.Errorf("ralph runs while the batch runs: exit %d\n%s\n%s", code, runs, errOut)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	id := strings.Fields(p.Output())[2]
	id = strings.TrimSuffix(id, ":")
	if !strings.Contains(first, "started") || len(id) != 36 {
		t.Fatalf("no batch id in:\n%s", p.Output())
	}
	out, errOut, code := b.ralph("resume", id, "--no-tui").Run()
	if code != 0 || !strings.Contains(out, "batch "+id+" resumed") || !strings.Contains(out, " resumed: ") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	b.landed(t)
}})
