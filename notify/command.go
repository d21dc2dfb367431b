package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/sandbox"
)

// command runs argv with the notification as JSON on its standard input,
// in the workdir, contained like shell.exec (its own process group, killed
// whole at the timeout).
type command struct {
	argv    []string
	dir     string
	timeout time.Duration
}

func newCommand(n *config.Notify, o *Options) (Sender, error) {
	return &command{argv: n.Cmd, dir: o.Workdir, timeout: n.Timeout.Duration}, nil
}

// checkCommand: a command sink needs its argv.
func checkCommand(n *config.Notify) error {
	if len(n.Cmd) == 0 || n.Cmd[0] == "" {
		return errors.New("a command sink needs cmd, e.g. [\"notify-send-wrapper\"]: it gets the event as JSON on stdin")
	}
	return nil
}

// first is argv's program, or "".
func first(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

func (c *command) Send(ctx context.Context, e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Dir = c.dir
	cmd.Stdin = bytes.NewReader(append(body, '\n'))
	out := procgroup.CappedBuffer{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = &out, &out
	_, err = sandbox.RunContained(ctx, cmd, time.Second, procgroup.StartOptions{})
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%s did not finish within %s; its process group was killed", c.argv[0], c.timeout)
	case errors.As(err, &exitErr):
		return fmt.Errorf("%s exited with status %d: %s", c.argv[0], exitErr.ExitCode(), Tail(out.String(), 400))
	}
	return fmt.Errorf("%s could not start: %v; check cmd in [[notify]]", c.argv[0], err)
}

// Tail is the last n bytes of s, trimmed, cut at a rune boundary.
func Tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return "…" + s[i:]
		}
	}
	return "…" + s
}
