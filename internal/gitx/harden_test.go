package gitx

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

// plant arms r's .git the way an agent could: a post-checkout and a
// pre-commit hook, an fsmonitor command, a clean and a smudge filter on
// every file, and a credential helper, each of which touches a file of
// its own in marks when git runs it.
func plant(t *testing.T, r *Repo, marks string) {
	t.Helper()
	for _, hook := range []string{"post-checkout", "pre-commit"} {
		p := filepath.Join(r.GitDir, "hooks", hook)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\ntouch "+filepath.Join(marks, hook)+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for key, val := range map[string]string{
		"core.fsmonitor":     "touch " + filepath.Join(marks, "fsmonitor") + "; false",
		"filter.evil.clean":  "touch " + filepath.Join(marks, "clean") + "; cat",
		"filter.evil.smudge": "touch " + filepath.Join(marks, "smudge") + "; cat",
		"credential.helper":  "!touch " + filepath.Join(marks, "credential") + "; true",
	} {
		if err := exec.Command("git", "-C", r.Top, "config", key, val).Run(); err != nil {
			t.Fatal(err)
		}
	}
	write(t, r.Top, ".gitattributes", "* filter=evil\n")
}

// ran lists the marks the planted programs left.
func ran(t *testing.T, marks string) []string {
	t.Helper()
	ents, err := os.ReadDir(marks)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestPlantedProgramsNeverRun runs ralph's checkpoint, restore and diff
// paths, and a checkout and a commit through Run, in a repository whose
// .git holds hooks, an fsmonitor command and a filter driver: none of
// them runs. The same operations through plain git run them all, so the
// planting is real.
func TestPlantedProgramsNeverRun(t *testing.T) {
	testenv.Tool(t, "git")
	ctx := context.Background()

	// Plain git: the plants work.
	plain := newRepo(t)
	plainMarks := t.TempDir()
	plant(t, plain, plainMarks)
	write(t, plain.Top, "a.txt", "changed\n")
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "c"}, {"checkout", "-q", "-b", "other"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = plain.Top, append(Env(), identity...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("plain git %v: %v\n%s", args, err, out)
		}
	}
	os.Remove(filepath.Join(plain.Top, "a.txt"))
	if out, err := exec.Command("git", "-C", plain.Top, "checkout", "--", "a.txt").CombinedOutput(); err != nil {
		t.Fatalf("plain git checkout: %v\n%s", err, out)
	}
	if got, want := ran(t, plainMarks), []string{"clean", "fsmonitor", "post-checkout", "pre-commit", "smudge"}; !slices.Equal(got, want) {
		t.Fatalf("plain git ran %v, want %v: the planted programs do not work, so the test below proves nothing", got, want)
	}

	// ralph's git: none runs.
	r := newRepo(t)
	marks := t.TempDir()
	plant(t, r, marks)
	c, err := NewCheckpointer(r, "run-1", r.Top)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := c.Checkpoint(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Top, "a.txt", "iteration one\n")
	c1, err := c.Checkpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.DiffStat(ctx, c0, c1); err != nil {
		t.Fatal(err)
	}
	var diff strings.Builder
	if err := r.Diff(ctx, &diff, c0, c1, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ChangedPaths(ctx, c0, c1); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(ctx, r.Top, c1, c0); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		if _, err := (Cmd{Dir: r.Top, Args: args, Env: identity}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write(t, r.Top, "a.txt", "committed\n")
	git("add", "-A")
	git("commit", "-q", "-m", "through gitx")
	git("checkout", "-q", "-b", "other")
	os.Remove(filepath.Join(r.Top, "a.txt"))
	git("checkout", "--", "a.txt")
	git("status", "--porcelain")
	if got := ran(t, marks); len(got) > 0 {
		t.Fatalf("ralph's git ran the repository's planted %v", got)
	}
	// The files were taken as they are: the filter was not needed.
	if out, err := Run(ctx, r.Top, "show", "HEAD:a.txt"); err != nil || out != "committed" {
		t.Fatalf("HEAD:a.txt = %q, %v", out, err)
	}
}

// TestPlantedMergeDriverNeverRuns merges two branches that change the
// same line of a file whose .gitattributes names a merge driver the
// repository's config defines: plain git merge-tree runs it; ralph's git
// runs git's own text merge instead, which reports the conflict with
// its markers.
func TestPlantedMergeDriverNeverRuns(t *testing.T) {
	testenv.Tool(t, "git")
	ctx := context.Background()
	r := newRepo(t)
	marks := t.TempDir()
	mark := filepath.Join(marks, "merge-driver")
	git := func(args ...string) string {
		t.Helper()
		out, err := (Cmd{Dir: r.Top, Args: args, Env: identity}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	git("reset", "-q", "--hard")
	write(t, r.Top, ".gitattributes", "*.txt merge=evil\n")
	git("add", ".gitattributes")
	git("commit", "-q", "-m", "attributes")
	git("checkout", "-q", "-b", "left")
	write(t, r.Top, "a.txt", "left\n")
	git("commit", "-q", "-am", "left")
	git("checkout", "-q", "-b", "right", "HEAD~1")
	write(t, r.Top, "a.txt", "right\n")
	git("commit", "-q", "-am", "right")
	if err := exec.Command("git", "-C", r.Top, "config", "merge.evil.driver", "touch "+mark+"; true").Run(); err != nil {
		t.Fatal(err)
	}

	plain := exec.Command("git", "merge-tree", "--write-tree", "left", "right")
	plain.Dir, plain.Env = r.Top, Env()
	if out, err := plain.CombinedOutput(); err != nil {
		t.Fatalf("plain merge-tree: %v\n%s", err, out)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("plain git did not run the planted merge driver (%v): the test below proves nothing", err)
	}
	os.Remove(mark)

	var out strings.Builder
	_, err := Cmd{Dir: r.Top, Args: []string{"merge-tree", "--write-tree", "--name-only", "left", "right"}, Stdout: &out}.Run(ctx)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("merge-tree through gitx: %v, want exit 1 (a conflict)", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("ralph's merge-tree ran the repository's merge driver")
	}
	tree, _, _ := strings.Cut(out.String(), "\n")
	merged := git("cat-file", "-p", tree+":a.txt")
	if !strings.Contains(merged, "<<<<<<< ours") || !strings.Contains(merged, "left") || !strings.Contains(merged, "right") {
		t.Fatalf("merged a.txt = %q, want git's conflict markers around both sides", merged)
	}
}

// TestRemoteUploadPackIsRefused fetches from a local repository whose
// remote names an upload-pack of the agent's, which plain git runs: ralph's
// git refuses the repository and runs nothing.
func TestRemoteUploadPackIsRefused(t *testing.T) {
	testenv.Tool(t, "git")
	ctx := context.Background()
	src := newRepo(t)
	r := newRepo(t)
	marks := t.TempDir()
	mark := filepath.Join(marks, "upload-pack")
	for _, kv := range [][2]string{{"remote.origin.url", src.Top},
		{"remote.origin.uploadpack", "touch " + mark + "; git-upload-pack"}} {
		if err := exec.Command("git", "-C", r.Top, "config", kv[0], kv[1]).Run(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "-C", r.Top, "fetch", "-q", "origin").CombinedOutput(); err != nil {
		t.Fatalf("plain fetch: %v\n%s", err, out)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("plain git did not run the planted upload-pack (%v): the test below proves nothing", err)
	}
	os.Remove(mark)
	_, err := Run(ctx, r.Top, "fetch", "-q", "origin")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "remote.origin.uploadpack" {
		t.Fatalf("err = %v, want a ConfigError naming remote.origin.uploadpack", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("ralph's fetch ran the repository's upload-pack")
	}
}

// TestGitProxyIsRefused: a repository that sets core.gitProxy, whose
// first match wins and cannot be taken back, is refused with the fix.
func TestGitProxyIsRefused(t *testing.T) {
	testenv.Tool(t, "git")
	r := newRepo(t)
	if err := exec.Command("git", "-C", r.Top, "config", "core.gitProxy", "evil-proxy").Run(); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), r.Top, "status")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "core.gitproxy" {
		t.Fatalf("err = %v, want a ConfigError naming core.gitproxy", err)
	}
	if msg := Message(err); !strings.Contains(msg, "git config --local --unset-all core.gitproxy") {
		t.Fatalf("message %q does not say the fix", msg)
	}
	// A pure ref command is not concerned.
	if _, err := Run(context.Background(), r.Top, "rev-parse", "HEAD"); err != nil {
		t.Fatal(err)
	}
}

func TestTakeBackKeepsTheUsersChoice(t *testing.T) {
	for _, c := range []struct {
		key  string
		user []string
		want []string
	}{
		{"credential.helper", []string{"cache", "store"}, []string{"-c", "credential.helper=", "-c", "credential.helper=cache", "-c", "credential.helper=store"}},
		{"credential.https://x.example.helper", nil, []string{"-c", "credential.https://x.example.helper="}},
		{"core.sshcommand", nil, []string{"-c", "core.sshcommand=ssh"}},
		{"core.sshcommand", []string{"ssh -i k"}, []string{"-c", "core.sshcommand=ssh -i k"}},
		{"core.askpass", nil, []string{"-c", "core.askpass="}},
		{"core.alternaterefscommand", nil, []string{"-c", "core.alternaterefscommand=true"}},
		{"filter.lfs.smudge", []string{"git-lfs smudge"}, []string{"-c", "filter.lfs.smudge=", "-c", "filter.lfs.required=false"}},
		{"merge.evil.driver", nil, []string{"-c", "merge.evil.driver=" + textMerge}},
		{"merge.union3.driver", []string{"my-merge %A %O %B"}, []string{"-c", "merge.union3.driver=my-merge %A %O %B"}},
	} {
		if got := takeBack(c.key, c.user); !slices.Equal(got, c.want) {
			t.Errorf("takeBack(%s, %q) = %q, want %q", c.key, c.user, got, c.want)
		}
	}
}

// BenchmarkRepoOverrides is the look-up a hardened git command makes
// before it runs (one git config), in a repository that sets nothing to
// take back: what hardening adds to each such command.
func BenchmarkRepoOverrides(b *testing.B) {
	dir := b.TempDir()
	b.Setenv("HOME", dir)
	b.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, ".config"))
	if err := exec.Command("git", "init", "-q", dir).Run(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := repoOverrides(ctx, dir, nil); err != nil {
			b.Fatal(err)
		}
	}
}
