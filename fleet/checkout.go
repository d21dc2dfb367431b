package fleet

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/usage"
)

// What ralph submit checks a job against: the workspace it names, fetched
// at the commit it queues (Checkout), or the empty directory a run without
// one starts in (EmptyWorkspace). Both are the tree assemble.CheckJob
// checks the config's paths and plan in.

// SplitWorkspace reads --workspace GIT_URL[@REF]. The ref is what follows
// the last @, unless that @ belongs to the URL: a user name
// (ssh://git@host/r, git@host:r) or a path. A local path is made absolute,
// so a worker on this machine finds it from any directory.
func SplitWorkspace(s string) (gitURL, ref string, err error) {
	gitURL = s
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		u, r := s[:i], s[i+1:]
		userinfo := strings.Contains(u, "://") && !strings.Contains(u[strings.Index(u, "://")+3:], "/")
		if !userinfo && !strings.Contains(r, ":") && u != "" && !strings.HasSuffix(u, "/") {
			gitURL, ref = u, r
			if ref == "" {
				return "", "", fmt.Errorf("--workspace %s names no ref after @; give a branch, tag or commit, or drop the @", s)
			}
		}
	}
	if strings.HasPrefix(ref, "-") || strings.HasPrefix(gitURL, "-") {
		return "", "", fmt.Errorf("--workspace %s starts with '-', which git would read as an option; give a git URL and a branch, tag or commit", s)
	}
	if u, perr := url.Parse(gitURL); perr == nil && u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword || (u.Scheme == "http" || u.Scheme == "https") && u.User.Username() != "" {
			c := *u
			c.User = url.User("xxxxx")
			return "", "", fmt.Errorf("--workspace %s carries a credential, which would be stored with the run; give the URL without it and let the workers' git credential helper or SSH key authenticate", c.String())
		}
	}
	if fi, serr := os.Stat(gitURL); serr == nil && fi.IsDir() {
		if abs, aerr := filepath.Abs(gitURL); aerr == nil {
			gitURL = abs
		}
	}
	return gitURL, ref, nil
}

// ConfigInRepo is where CONFIG sits in its git repository ("ralph.toml"
// at the root): the run reads it from the same place in its clone, so the
// paths it names resolve the same way. A config outside any repository
// is taken to sit at the workspace's root.
func ConfigInRepo(cfgPath string) (string, error) {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return "", fmt.Errorf("config %s: %w", cfgPath, err)
	}
	top, err := gitx.Run(context.Background(), filepath.Dir(abs), "rev-parse", "--show-toplevel")
	if err != nil {
		return filepath.Base(abs), nil
	}
	root, err := filepath.EvalSymlinks(top)
	if err != nil {
		return filepath.Base(abs), nil
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return filepath.Base(abs), nil
	}
	rel, err := filepath.Rel(root, filepath.Join(dir, filepath.Base(abs)))
	if err != nil || strings.HasPrefix(rel, "..") {
		return filepath.Base(abs), nil
	}
	return filepath.ToSlash(rel), nil
}

// EmptyWorkspace is the directory a run without --workspace starts in.
type EmptyWorkspace struct{}

func (EmptyWorkspace) Stat(rel string) (bool, bool) { return rel == ".", true }
func (EmptyWorkspace) Local(string) string          { return "" }
func (EmptyWorkspace) Describe() string             { return "the run's directory" }
func (EmptyWorkspace) Missing(rel string) string {
	return fmt.Sprintf("without --workspace the run starts in an empty directory, which has no %s; pass --workspace GIT_URL[@REF] of a repository that holds it", rel)
}

// Checkout is REF of a workspace, fetched into a temporary directory.
type Checkout struct {
	URL, Ref string
	SHA      string // the commit fetched
	dir      string
}

// Stat says whether rel (slash-separated, relative to the root) is a file
// or a directory in the checkout.
func (c *Checkout) Stat(rel string) (bool, bool) {
	fi, err := os.Stat(c.Local(rel))
	if err != nil {
		return false, false
	}
	return true, fi.IsDir()
}

// Local is rel as a path on this machine.
func (c *Checkout) Local(rel string) string {
	return filepath.Join(c.dir, filepath.FromSlash(rel))
}

// Remove removes the temporary copy; nothing depends on it.
func (c *Checkout) Remove() { _ = os.RemoveAll(c.dir) }

// Describe names the checkout in messages, Missing says how to fix a
// file it lacks.
func (c *Checkout) Describe() string {
	ref := c.Ref
	if ref == "" {
		ref = "HEAD"
	}
	return fmt.Sprintf("workspace %s at %s", c.URL, ref)
}

func (c *Checkout) Missing(rel string) string {
	return fmt.Sprintf("%s has no %s; commit and push it there, or fix the path", c.Describe(), rel)
}

// FetchWorkspace fetches ref of the repository at gitURL (its HEAD when
// ref is "") into a temporary directory: only that commit, with a shallow
// fetch, or, for a commit no branch names, the whole repository. A URL or
// ref that cannot be fetched, or is no commit, is a usage error. Remove
// the checkout when done.
func FetchWorkspace(ctx context.Context, gitURL, ref string) (*Checkout, error) {
	dir, err := os.MkdirTemp("", "ralph-submit-")
	if err != nil {
		return nil, fmt.Errorf("make a directory to check the workspace in: %w", err)
	}
	c := &Checkout{URL: gitURL, Ref: ref, dir: dir}
	fail := func(err error) (*Checkout, error) {
		c.Remove()
		return nil, err
	}
	if _, err := gitx.Run(ctx, dir, "init", "--quiet"); err != nil {
		return fail(fmt.Errorf("git init: %w; is git installed?", err))
	}
	want := ref
	if want == "" {
		want = "HEAD"
	}
	_, err = gitx.Run(ctx, dir, "fetch", "--quiet", "--depth", "1", "--end-of-options", gitURL, want)
	if err != nil && len(ref) >= 7 && isHex(ref) { // a commit: some servers serve it only with its history
		if _, ferr := gitx.Run(ctx, dir, "fetch", "--quiet", "--end-of-options", gitURL, "+refs/heads/*:refs/remotes/ws/*", "+refs/tags/*:refs/tags/*"); ferr == nil {
			if _, verr := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); verr == nil {
				err = nil
				want = ref
			}
		}
	} else if err == nil {
		want = "FETCH_HEAD"
	}
	if err != nil {
		what := "ref " + want
		if ref == "" {
			what = "HEAD"
		}
		return fail(usage.Errorf("cannot fetch %s of workspace %s (%s); check the URL and the branch, tag or commit after @, and that this machine can reach it", what, gitURL, gitMessage(err)))
	}
	sha, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", want+"^{commit}")
	if err != nil {
		return fail(usage.Errorf("%s of workspace %s is not a commit; give a branch, tag or commit after @", want, gitURL))
	}
	if _, err := gitx.Run(ctx, dir, "checkout", "--quiet", "--detach", sha); err != nil {
		return fail(fmt.Errorf("check out %s of workspace %s: %s", sha, gitURL, gitMessage(err)))
	}
	c.SHA = sha
	return c, nil
}

// gitMessage is git's complaint in one clause, for a sentence of ours.
func gitMessage(err error) string { return strings.TrimSuffix(gitx.Message(err), ".") }
