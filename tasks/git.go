package tasks

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
)

// ralphIdentity is the author and committer of ralph's commits when git
// has no identity of the user's to give them (see identity).
var ralphIdentity = []string{"GIT_AUTHOR_NAME=ralph", "GIT_AUTHOR_EMAIL=ralph@localhost",
	"GIT_COMMITTER_NAME=ralph", "GIT_COMMITTER_EMAIL=ralph@localhost"}

// noMaintenance keeps a porcelain command that would start `git
// maintenance run --auto` after it (commit, merge, fetch) from doing so:
// a batch's commits come one per task, and a repack of the user's
// repository is the user's to start.
var noMaintenance = []string{"-c", "maintenance.auto=false"}

// gitError is a git step of the queue that failed: what it was doing,
// then git's own reason.
type gitError struct {
	op  string
	err error
}

func (e *gitError) Error() string { return e.op + ": " + gitx.Message(e.err) }
func (e *gitError) Unwrap() error { return e.err }

// failed wraps err, a git command's failure, with what ralph was doing.
func failed(op string, err error) error {
	if err == nil {
		return nil
	}
	return &gitError{op: op, err: err}
}

// git runs git with args in dir (hardened, through gitx), with env added
// to its environment.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return gitx.Cmd{Dir: dir, Args: args, Env: env}.Run(ctx)
}

// exitCode is the exit status of the git command that failed with err,
// or -1 when it did not exit by itself (not started, killed).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// resolve is the commit rev names in dir's repository, or "" when it
// names none (a missing branch, an unborn HEAD).
func resolve(ctx context.Context, dir, rev string) (string, error) {
	out, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	var ge *gitx.Error
	if errors.As(err, &ge) && ge.Stderr == "" && exitCode(err) == 1 {
		return "", nil // --quiet: a name that resolves to nothing says nothing and exits 1
	}
	return out, err
}

// identity is the environment ralph's commits in dir's repository need:
// none when git can name a committer from the user's configuration (the
// user's name and email then go on the commits), else ralphIdentity.
func identity(ctx context.Context, dir string) []string {
	if _, err := gitx.Run(ctx, dir, "var", "GIT_COMMITTER_IDENT"); err != nil {
		return ralphIdentity // git var says "Please tell me who you are" and fails, as a commit would
	}
	return nil
}

// literal is the pathspec that names the repository-relative path p as
// it is: no glob, and from the top whatever directory git runs in.
func literal(p string) string { return ":(top,literal)" + p }

// short is a commit's hash abbreviated for a message.
func short(commit string) string {
	if len(commit) > 10 {
		return commit[:10]
	}
	return commit
}

// samePath reports whether a and b name the same directory, once
// symbolic links are followed where they exist.
func samePath(a, b string) bool {
	real := func(p string) string {
		p = filepath.Clean(p)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	return real(a) == real(b)
}

// oneLine is s with every control character (a newline, a tab) made a
// space and the ends trimmed: a task's id or title as one line of a
// commit message.
func oneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s))
}

// tail is the last limit bytes of s, cut at a line's start, behind a
// line that says how much was left out; s itself when it fits.
func tail(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := len(s) - limit
	if i := strings.IndexByte(s[cut:], '\n'); s[cut-1] != '\n' && i >= 0 && i < len(s)-cut-1 {
		cut += i + 1
	}
	return fmt.Sprintf("[… %d bytes before this left out]\n", cut) + s[cut:]
}

// head is the first limit bytes of s, cut at a line's end, before a line
// that says how much was left out; s itself when it fits.
func head(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	if i := strings.LastIndexByte(s[:cut], '\n'); i > 0 {
		cut = i + 1
	}
	return s[:cut] + fmt.Sprintf("[… %d bytes after this left out]\n", len(s)-cut)
}
