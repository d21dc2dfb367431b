package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// plantGit is the agent's attack on ralph's own git: during every call it
// arms the workdir's .git with hooks, an fsmonitor command and a filter
// driver on every file, each of which would touch a file in marks.
func plantGit(marks string) string {
	return `set -e
for h in post-checkout pre-commit post-commit post-index-change reference-transaction; do
	printf '#!/bin/sh\ntouch ` + marks + `/%s\n' "$h" >".git/hooks/$h"
	chmod +x ".git/hooks/$h"
done
git config core.fsmonitor "touch ` + marks + `/fsmonitor; false"
git config filter.evil.clean "touch ` + marks + `/clean; cat"
git config filter.evil.smudge "touch ` + marks + `/smudge; cat"
echo '* filter=evil' >.gitattributes`
}

// The agent plants hooks, an fsmonitor command and a filter driver in
// the workdir's .git while the run goes on: ralph's checkpoints, diff and
// rollback run none of them, and the run still ends green with its
// checkpoints.
var _ = suite.Add(e2e.Test{Name: "GitIgnoresPlantedPrograms", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	marks := t.TempDir()
	p := gitProject(t, e, "FAKE_AGENT_DONE_AFTER=3", "FAKE_AGENT_EACH="+plantGit(marks))
	if out, errOut, code := p.ralph("run", "--no-tui"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if hook := p.read(t, filepath.Join(".git", "hooks", "pre-commit")); !strings.Contains(hook, marks) {
		t.Fatalf("the agent did not plant its hook: %q", hook)
	}
	run, cps := p.runID(t), p.checkpoints(t)
	if len(cps) != 4 {
		t.Fatalf("checkpoints %v, want iterations 0 to 3", cps)
	}
	if out, errOut, code := p.ralph("diff", run, "2"); code != 0 || !strings.Contains(out, "+step 2") {
		t.Fatalf("diff: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := p.ralph("rollback", run, "--to", "1"); code != 0 {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, errOut)
	}
	ents, err := os.ReadDir(marks)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		t.Errorf("ralph's git ran the agent's planted %s", ent.Name())
	}
	// The planting works: plain git, on the same repository, runs it.
	p.git(t, "status", "--porcelain")
	if _, err := os.Stat(filepath.Join(marks, "fsmonitor")); err != nil {
		t.Errorf("plain git status did not run the planted fsmonitor (%v): the test shows nothing", err)
	}
}})
