package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// Cmd is one git invocation.
type Cmd struct {
	Dir   string    // where git runs
	Args  []string  // git's arguments
	Env   []string  // NAME=value pairs added to the clean environment (GIT_INDEX_FILE, …)
	Stdin io.Reader // nil: no input
	// Stdout, when set, receives the output instead of Run's return value
	// (for output too large to hold as a string).
	Stdout io.Writer
}

// Error is a git command that failed, with what it said on stderr.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), Message(e))
}

func (e *Error) Unwrap() error { return e.Err }

// Run runs git with args in dir and returns its standard output without
// the trailing newline.
func Run(ctx context.Context, dir string, args ...string) (string, error) {
	return Cmd{Dir: dir, Args: args}.Run(ctx)
}

// Run runs the command. The process and anything it starts are killed
// when ctx ends. It runs hardened (see hardened): no hook, fsmonitor, pager, editor,
// signing or program the repository's own config names is started.
func (c Cmd) Run(ctx context.Context) (string, error) {
	args := hardened
	if sub := subcommand(c.Args); sub == len(c.Args) || !pureRefCommands[c.Args[sub]] {
		take, err := repoOverrides(ctx, c.Dir, c.Args[:sub])
		if err != nil {
			return "", &Error{Args: c.Args, Err: err}
		}
		args = append(append([]string(nil), hardened...), take...)
	}
	cmd := exec.CommandContext(ctx, "git", append(args[:len(args):len(args)], c.Args...)...)
	cmd.Dir = c.Dir
	cmd.Env = append(Env(), c.Env...)
	cmd.Stdin = c.Stdin
	var stdout bytes.Buffer
	stderr := &procgroup.TailBuffer{Limit: 8 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	if err := procgroup.Run(cmd, 5*time.Second); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", &Error{Args: c.Args, Stderr: stderr.String(), Err: err}
	}
	return strings.TrimRight(stdout.String(), "\n"), nil
}

// Env is the environment git runs with: the caller's, without any GIT_*
// variable and without LC_ALL or LANGUAGE, plus LC_ALL=C (messages ralph
// can parse) and GIT_TERMINAL_PROMPT=0 (no prompt can hang a run).
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") || name == "LC_ALL" || name == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

// Message is the last line git labelled "fatal:" or "error:" on stderr,
// without its label (or its last line when none is labelled, or the error
// itself when git said nothing). Behind git's generic "Could not read from
// remote repository." it gives the transport's own reason, the line before.
func Message(err error) string {
	var ge *Error
	if !errors.As(err, &ge) {
		return err.Error()
	}
	var lines []string
	for _, l := range strings.Split(ge.Stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ge.Err.Error()
	}
	pick := len(lines) - 1
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "fatal: ") || strings.HasPrefix(lines[i], "error: ") {
			pick = i
			break
		}
	}
	msg := strings.TrimPrefix(strings.TrimPrefix(lines[pick], "fatal: "), "error: ")
	if msg == "Could not read from remote repository." && pick > 0 {
		msg = lines[pick-1]
	}
	return msg
}
