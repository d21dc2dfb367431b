package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
)

// Workspace is a run's git clone: its working tree is where the loop runs,
// and every iteration's changes go to the branch ralph/<run-id> on the
// remote the clone came from. A Workspace is not safe for concurrent use.
type Workspace struct {
	Dir    string // the clone's working tree
	Branch string // ralph/<run-id>
	Remote string // the URL it was cloned from, its password (if any) hidden

	runID string
	// lease is what the remote's branch holds as far as this workspace
	// knows ("" when the remote has no such branch): every push replaces
	// exactly that, so a resumed run drops the commits its chain never
	// recorded and a push racing another writer is refused, not merged.
	lease string
}

// BranchName is the branch a run's workspace commits to.
func BranchName(runID string) string { return "ralph/" + runID }

// PrepareWorkspace clones url into dir (which must be missing or empty) and
// checks out the run's branch ralph/<runID>.
//
// A first attempt (the remote has no such branch) starts the branch at ref:
// a branch, a tag or a commit sha; "" is the remote's HEAD, and an empty
// repository starts the branch with no parent. A resumed run (the remote has
// the branch) checks it out at commit, the commit the run's last completed
// iteration recorded, or at ref's commit when commit is "" (no iteration
// completed); the first push then replaces whatever the branch held after
// that point, which no completed iteration recorded.
//
// Nothing is left half-written: the clone is made in a temporary directory
// beside dir and renamed into place only once the branch is checked out.
func PrepareWorkspace(ctx context.Context, url, ref, dir, runID, commit string) (*Workspace, error) {
	if url == "" {
		return nil, errors.New("no workspace URL given; pass --workspace GIT_URL[@REF]")
	}
	w := &Workspace{Dir: dir, Branch: BranchName(runID), Remote: redact(url, url), runID: runID}
	if runID == "" || strings.ContainsAny(runID, " ~^:?*[\\") || strings.Contains(runID, "..") || strings.HasPrefix(runID, "-") {
		return nil, fmt.Errorf("run id %q cannot name the git branch %s; run ids are letters, digits and dashes", runID, w.Branch)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("workspace directory %s is not empty; remove it or use another directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("workspace directory %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create the workspace's parent directory: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".clone-*")
	if err != nil {
		return nil, fmt.Errorf("create the workspace's clone directory: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(tmp) // a failed clone leaves nothing behind; an error here changes no outcome
		}
	}()
	if _, err := gitx.Run(ctx, parent, "clone", "--quiet", "--end-of-options", url, tmp); err != nil {
		return nil, fmt.Errorf("cannot clone workspace URL: %s; check the URL and that this worker can reach it", redact(url, gitx.Message(err)))
	}
	if err := w.checkout(ctx, tmp, ref, commit); err != nil {
		return nil, err
	}
	if err := setIdentity(ctx, tmp); err != nil {
		return nil, err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("workspace directory %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("move the clone into the workspace directory: %w", err)
	}
	keep = true
	return w, nil
}

// checkout puts the clone in dir on the run's branch at the right commit
// and records the remote branch's current value as the lease.
func (w *Workspace) checkout(ctx context.Context, dir, ref, commit string) error {
	remoteRef := "refs/remotes/origin/" + w.Branch
	tip, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", remoteRef+"^{commit}")
	onRemote := err == nil
	var target string
	switch {
	case onRemote && commit != "":
		if _, err := gitx.Run(ctx, dir, "merge-base", "--is-ancestor", commit, remoteRef); err != nil {
			return fmt.Errorf("cannot resume the workspace: commit %s, recorded by the run's last completed iteration, is not on branch %s of %s; the branch was rewritten outside ralph: restore it or submit the run again", commit, w.Branch, w.Remote)
		}
		target = commit
	case onRemote:
		// No iteration completed: back to where the branch began, even if
		// ref names another commit by now.
		if target, err = w.branchBase(ctx, dir, remoteRef); err != nil {
			return err
		}
	case commit != "":
		return fmt.Errorf("cannot resume the workspace: %s has no branch %s, which should hold commit %s; restore the branch on the remote or submit the run again", w.Remote, w.Branch, commit)
	default:
		if target, err = w.startPoint(ctx, dir, ref); err != nil {
			return err
		}
	}
	if onRemote {
		w.lease = tip
	}
	if target == "" {
		// An empty repository: the first commit starts the branch.
		_, err = gitx.Run(ctx, dir, "symbolic-ref", "HEAD", "refs/heads/"+w.Branch)
	} else {
		_, err = gitx.Run(ctx, dir, "checkout", "--quiet", "-B", w.Branch, target)
	}
	if err != nil {
		return fmt.Errorf("check out branch %s in the workspace: %s", w.Branch, gitx.Message(err))
	}
	return nil
}

// branchBase is the commit the run's branch started from: the newest
// first-parent ancestor of its tip that is not one of the run's iteration
// commits ("" when the branch started in an empty repository).
func (w *Workspace) branchBase(ctx context.Context, dir, remoteRef string) (string, error) {
	sha, err := gitx.Run(ctx, dir, "log", "--first-parent", "--invert-grep", "--fixed-strings",
		"--grep=ralph "+w.runID+" iteration ", "--max-count=1", "--format=%H", remoteRef)
	if err != nil {
		return "", fmt.Errorf("read branch %s in the workspace: %s", w.Branch, gitx.Message(err))
	}
	return sha, nil
}

// startPoint resolves ref in a fresh clone: a branch of the remote, a tag,
// or a commit ("" is the remote's HEAD; "" is returned for an empty
// repository).
func (w *Workspace) startPoint(ctx context.Context, dir, ref string) (string, error) {
	if ref == "" {
		sha, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
		if err != nil {
			return "", nil // the remote's HEAD names no commit: an empty repository
		}
		return sha, nil
	}
	if !strings.HasPrefix(ref, "-") {
		for _, c := range []string{"refs/remotes/origin/" + ref, "refs/tags/" + ref, ref} {
			if sha, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", c+"^{commit}"); err == nil {
				return sha, nil
			}
		}
		// A commit no branch or tag reaches was not cloned; ask for it.
		if isHex(ref) {
			if _, err := gitx.Run(ctx, dir, "fetch", "--quiet", "origin", ref); err == nil {
				if sha, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", "FETCH_HEAD^{commit}"); err == nil {
					return sha, nil
				}
			}
		}
	}
	return "", fmt.Errorf("workspace ref %q not found in %s: no branch, tag or commit has that name; give an existing ref after @ in --workspace, or none for the remote's HEAD", ref, w.Remote)
}

// Commit records everything in the working tree (git add -A) as the
// iteration's commit, "ralph <run-id> iteration N", even when nothing
// changed, and pushes it to the run's branch. It returns the commit's sha,
// which is on the remote when Commit returns without error.
func (w *Workspace) Commit(ctx context.Context, iteration int) (string, error) {
	if _, err := gitx.Run(ctx, w.Dir, "add", "--all"); err != nil {
		return "", fmt.Errorf("stage the workspace's changes: %s", gitx.Message(err))
	}
	msg := fmt.Sprintf("ralph %s iteration %d", w.runID, iteration)
	if _, err := gitx.Run(ctx, w.Dir, "-c", "commit.gpgsign=false", "commit", "--quiet", "--allow-empty", "--no-verify", "-m", msg); err != nil {
		return "", fmt.Errorf("commit the workspace: %s", gitx.Message(err))
	}
	sha, err := gitx.Run(ctx, w.Dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("read the workspace's commit: %s", gitx.Message(err))
	}
	dst := "refs/heads/" + w.Branch
	lease := "--force-with-lease=" + dst + ":" + w.lease
	if _, err := gitx.Run(ctx, w.Dir, "push", "--quiet", "--no-verify", lease, "origin", "HEAD:"+dst); err != nil {
		return "", fmt.Errorf("push rejected for branch %s: %s; another worker may own this run, or the remote refuses pushes to ralph/* branches", w.Branch, redact(w.Remote, pushMessage(err)))
	}
	w.lease = sha
	return sha, nil
}

// setIdentity gives the clone a committer when git has none configured, in
// the clone's own config: the user's global config is never written.
func setIdentity(ctx context.Context, dir string) error {
	for key, val := range map[string]string{"user.name": "ralph", "user.email": "ralph@localhost"} {
		if v, err := gitx.Run(ctx, dir, "config", "--get", key); err == nil && v != "" {
			continue
		}
		if _, err := gitx.Run(ctx, dir, "config", "--local", key, val); err != nil {
			return fmt.Errorf("set %s in the workspace: %s", key, gitx.Message(err))
		}
	}
	return nil
}

// pushMessage is the line in which git push names the ref it could not
// update and why ("! [rejected] HEAD -> ralph/x (stale info)"), or
// gitMessage when there is none.
func pushMessage(err error) string {
	var ge *gitx.Error
	if errors.As(err, &ge) {
		for _, l := range strings.Split(ge.Stderr, "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "! ") {
				return strings.Join(strings.Fields(l), " ")
			}
		}
	}
	return gitx.Message(err)
}

// redact hides the credentials of a URL wherever msg repeats them (the
// password, or an http(s) user name that is a token), so no secret reaches
// an error, a log or the fleet's run states.
func redact(rawURL, msg string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return msg
	}
	secret, ok := u.User.Password()
	if !ok && (u.Scheme == "http" || u.Scheme == "https") {
		secret = u.User.Username()
	}
	if secret == "" {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "xxxxx")
}

func isHex(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}
