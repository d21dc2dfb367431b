package arbiter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/sandbox"
)

// Defaults for the command provider.
const (
	DefaultCommandTimeout = 10 * time.Minute // agent CLIs think for a while
	DefaultCommandOutput  = 1 << 20          // stdout kept from one answer
	commandStderrKept     = 64 << 10         // the tail of stderr kept
	commandStderrShown    = 2000             // bytes of that tail an error quotes
)

// CommandOptions configure the command provider.
type CommandOptions struct {
	// Timeout bounds one run of the command (default 10m); when it passes,
	// the command's whole process group is killed.
	Timeout time.Duration
	// Workdir is where the command runs ("" for the current directory).
	Workdir string
	// Env is the command's environment; nil inherits ralph's.
	Env []string
	// MaxOutput bounds stdout (default 1 MiB); more is an error and the
	// command is killed.
	MaxOutput int
	// Price turns the estimated tokens (four bytes a token; the command
	// reports none) into a cost.
	Price config.Price
}

// commandModel is the command provider: a local agent CLI such as
// `claude -p` or `codex exec` that reads the prompt on stdin and writes its
// answer on stdout.
type commandModel struct {
	argv []string
	opts CommandOptions
}

// NewCommand returns the command provider running argv.
func NewCommand(argv []string, opts CommandOptions) (Model, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, &transportError{kind: ErrFatal, msg: `provider "command" needs model.command, e.g. ["claude", "-p"]`}
	}
	if err := findProgram(argv[0], opts.Workdir); err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultCommandTimeout
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultCommandOutput
	}
	return &commandModel{argv: append([]string(nil), argv...), opts: opts}, nil
}

// findProgram checks, before any run starts, that the program exists and
// can be run: a bare name on PATH, a path relative to workdir.
func findProgram(prog, workdir string) error {
	if !strings.Contains(prog, "/") {
		if _, err := exec.LookPath(prog); err != nil {
			return &transportError{kind: ErrFatal, msg: fmt.Sprintf("command %s was not found on PATH: install it or fix model.command", prog)}
		}
		return nil
	}
	path := prog
	if !filepath.IsAbs(path) {
		path = filepath.Join(workdir, path)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return &transportError{kind: ErrFatal, msg: fmt.Sprintf("command %s was not found: install it or fix model.command", path)}
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return &transportError{kind: ErrFatal, msg: fmt.Sprintf("command %s is not executable: chmod +x it or fix model.command", path)}
	}
	return nil
}

// Name is "command/<program>", e.g. "command/claude".
func (m *commandModel) Name() string { return "command/" + filepath.Base(m.argv[0]) }

// Flatten renders chat messages as one prompt for a program that reads
// text: a lone message as it is; several under "# System", "# User" and
// "# Assistant (your previous answer)" headings, in order.
func Flatten(msgs []Message) string {
	if len(msgs) == 1 {
		return msgs[0].Content
	}
	var b strings.Builder
	for i, msg := range msgs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		switch msg.Role {
		case "system":
			b.WriteString("# System\n\n")
		case "assistant":
			b.WriteString("# Assistant (your previous answer)\n\n")
		default:
			b.WriteString("# User\n\n")
		}
		b.WriteString(msg.Content)
	}
	return b.String()
}

// jsonInstruction ends the prompt when the completion asks for JSON: a
// command has no response_format to set.
const jsonInstruction = "\n\nReply with one JSON object and nothing else."

// Complete runs the command once with the flattened prompt on stdin and
// returns its stdout. Streamed output goes to obs.Token as it arrives. A
// non-zero exit, a timeout or too much output is an error quoting the tail
// of stderr; a command that cannot be started is ErrFatal.
func (m *commandModel) Complete(ctx context.Context, c Completion, obs Observer) (Reply, error) {
	prompt := Flatten(c.Messages)
	if c.JSON {
		prompt += jsonInstruction
	}
	rctx, cancel := context.WithTimeoutCause(ctx, m.opts.Timeout, errRequestTimeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, m.argv[0], m.argv[1:]...)
	cmd.Dir, cmd.Env = m.opts.Workdir, m.opts.Env
	cmd.Stdin = strings.NewReader(prompt)
	stdout := &outputWriter{limit: m.opts.MaxOutput, obs: obs, overflow: cancel}
	stderr := &tailWriter{keep: commandStderrKept}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Own process group: a timeout kills every descendant, none outlives the
	// command, and a grandchild holding stdout open does not hold us.
	_, err := sandbox.RunContained(rctx, cmd, 2*time.Second, procgroup.StartOptions{})
	switch {
	case ctx.Err() != nil:
		return Reply{}, fmt.Errorf("command %s: %w", m.shown(), context.Cause(ctx))
	case stdout.over:
		return Reply{}, m.failure(fmt.Sprintf("wrote more than %d bytes on stdout; it was stopped", m.opts.MaxOutput), stderr)
	case errors.Is(context.Cause(rctx), errRequestTimeout):
		return Reply{}, m.failure(fmt.Sprintf("did not finish within %s (model.timeout); its process group was killed", m.opts.Timeout), stderr)
	case err != nil:
		return Reply{}, m.runError(err, stderr)
	}
	text := stdout.String()
	u := Usage{PromptTokens: roughTokens(len(prompt)), CompletionTokens: roughTokens(len(text))}
	u.CostUSD = priced(m.opts.Price, u)
	return Reply{Text: text, Model: filepath.Base(m.argv[0]), Usage: u}, nil
}

// shown is the argv as a user would type it.
func (m *commandModel) shown() string {
	parts := make([]string, len(m.argv))
	for i, a := range m.argv {
		parts[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			parts[i] = fmt.Sprintf("%q", a)
		}
	}
	return strings.Join(parts, " ")
}

func (m *commandModel) runError(err error, stderr *tailWriter) error {
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return m.failure(fmt.Sprintf("was killed by %s", ws.Signal()), stderr)
		}
		return m.failure(fmt.Sprintf("exited with status %d", exitErr.ExitCode()), stderr)
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		return &transportError{kind: ErrFatal, msg: fmt.Sprintf("command %s was not found: install it or fix model.command", m.argv[0])}
	case errors.Is(err, os.ErrPermission):
		return &transportError{kind: ErrFatal, msg: fmt.Sprintf("command %s cannot be run (permission denied): make it executable or fix model.command", m.argv[0])}
	}
	return m.failure(err.Error(), stderr)
}

func (m *commandModel) failure(what string, stderr *tailWriter) error {
	msg := fmt.Sprintf("command %s %s", m.shown(), what)
	if tail := stderr.tail(commandStderrShown); tail != "" {
		msg += "; stderr: " + tail
	}
	return &transportError{msg: msg}
}

// outputWriter collects stdout up to a limit, passing whole runes to the
// observer as they arrive.
type outputWriter struct {
	limit    int
	obs      Observer
	overflow func()

	buf     bytes.Buffer
	pending int // bytes at the end of buf not yet passed on (an incomplete rune)
	over    bool
}

func (w *outputWriter) Write(p []byte) (int, error) {
	if w.over {
		return 0, errAnswerTooLarge
	}
	if w.buf.Len()+len(p) > w.limit {
		w.over = true
		w.overflow()
		return 0, errAnswerTooLarge
	}
	w.buf.Write(p)
	if w.obs != nil {
		b := w.buf.Bytes()
		start, end := len(b)-len(p)-w.pending, len(b)
		for i := end - 1; i >= start && i >= end-utf8.UTFMax; i-- { // hold back a rune cut in two
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:end]) {
					end = i
				}
				break
			}
		}
		if end > start {
			w.obs.Token(string(b[start:end]))
		}
		w.pending = len(b) - end
	}
	return len(p), nil
}

func (w *outputWriter) String() string {
	if w.obs != nil && w.pending > 0 { // invalid bytes at the very end: pass them on as they are
		w.obs.Token(string(w.buf.Bytes()[w.buf.Len()-w.pending:]))
		w.pending = 0
	}
	return w.buf.String()
}

// tailWriter keeps the last keep bytes written to it.
type tailWriter struct {
	mu   sync.Mutex
	keep int
	buf  []byte
	cut  bool
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if extra := len(w.buf) - w.keep; extra > 0 {
		w.buf = append(w.buf[:0], w.buf[extra:]...)
		w.cut = true
	}
	return len(p), nil
}

// tail is the last n bytes, trimmed, on one line where they were short
// enough, marked when cut.
func (w *tailWriter) tail(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf
	cut := w.cut
	if len(b) > n {
		b, cut = b[len(b)-n:], true
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if cut && s != "" {
		s = "…" + s
	}
	return s
}
