package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
)

// quitGrace is how long a command that got SIGQUIT at the hang guard has
// to print its goroutines and exit, and how long a command's output may
// stay open after it exited (a child holding it).
const quitGrace = 10 * time.Second

// Cmd is one command of a test: ralph (E.Ralph) or another program in the
// test's environment (E.Command), with its directory, environment and
// stdin. It runs one of three ways: Run to completion, Start in the
// background, Term in a terminal.
type Cmd struct {
	e         *E
	path      string
	args      []string
	ralph     bool
	dir       string
	env       []string // nil: the test's (E.Env)
	with      []string
	stdin     string
	stdinPipe bool
}

// Ralph is the binary with args (rewritten by Suite.Args), in the test
// process's directory (the package's) and the test's environment.
func (e *E) Ralph(args ...string) *Cmd {
	return &Cmd{e: e, path: e.s.bin, args: args, ralph: true}
}

// Command is another program with args (a shell that runs ralph under a
// limit, a script) in the test's environment.
func (e *E) Command(name string, args ...string) *Cmd {
	return &Cmd{e: e, path: name, args: args}
}

// In runs the command in dir.
func (c *Cmd) In(dir string) *Cmd { c.dir = dir; return c }

// With adds KEY=VALUE variables to the command's environment; a later one
// wins over an earlier one of the same name.
func (c *Cmd) With(kv ...string) *Cmd { c.with = append(c.with, kv...); return c }

// Env is the command's whole environment instead of the test's (With
// still adds to it).
func (c *Cmd) Env(env []string) *Cmd { c.env = slices.Clip(env); return c }

// Stdin is what the command reads on its standard input.
func (c *Cmd) Stdin(s string) *Cmd { c.stdin = s; return c }

// StdinPipe gives the started command (Start) a pipe to write its input
// to: Proc.Stdin.
func (c *Cmd) StdinPipe() *Cmd { c.stdinPipe = true; return c }

func (c *Cmd) argv() []string {
	if c.ralph && c.e.s.Args != nil {
		return c.e.s.Args(c.args)
	}
	return c.args
}

func (c *Cmd) environ() []string {
	env := c.env
	if env == nil {
		env = c.e.Env()
	}
	return append(slices.Clip(env), c.with...)
}

// String names the command in failures: its program's name and args.
func (c *Cmd) String() string { return fmt.Sprintf("%s %q", filepath.Base(c.path), c.args) }

// Exec is the command as an exec.Cmd not started, for what must start it
// itself (an MCP client's transport).
func (c *Cmd) Exec() *exec.Cmd {
	cmd := exec.Command(c.path, c.argv()...)
	cmd.Dir, cmd.Env = c.dir, c.environ()
	return cmd
}

// Run runs the command to its end and returns what it printed and its
// exit code. A command that does not end within the hang guard gets
// SIGQUIT, so that the Go runtime prints where its goroutines were, and
// fails the test with it; one that prints a stack trace or a panic fails
// it too.
func (c *Cmd) Run() (stdout, stderr string, code int) {
	t := c.e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventually.Bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, c.argv()...)
	cmd.Dir, cmd.Env = c.dir, c.environ()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = quitGrace
	cmd.Stdin = strings.NewReader(c.stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s did not end within %s; its goroutines then:\n%s", c, eventually.Bound, errOut.String())
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.Exited():
		code = exitErr.ExitCode()
	default:
		t.Fatalf("%s: %v (stderr %q)", c, err, errOut.String())
	}
	if s := errOut.String(); strings.Contains(s, "goroutine ") || strings.Contains(s, "panic") {
		t.Errorf("%s printed a stack trace or panic:\n%s", c, s)
	}
	return out.String(), errOut.String(), code
}

// Proc is a command started in the background (Cmd.Start). Its output is
// kept whole, however much it prints, so it never blocks on a test that
// does not read it. The test kills it at its end if it still runs, and
// logs what it printed if the test failed.
type Proc struct {
	c      *Cmd
	cmd    *exec.Cmd
	out    output // stdout
	errOut output
	read   int // stdout up to here was returned by WaitLine or Rest
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed

	// Stdin is the pipe to the command's input when it was started with
	// Cmd.StdinPipe.
	Stdin io.WriteCloser
}

// Start starts the command in the background.
func (c *Cmd) Start() *Proc {
	t := c.e.t
	t.Helper()
	p := &Proc{c: c, cmd: c.Exec(), done: make(chan struct{})}
	p.out.changed, p.errOut.changed = make(chan struct{}), make(chan struct{})
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
	p.cmd.WaitDelay = quitGrace
	if c.stdinPipe {
		var err error
		if p.Stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		p.cmd.Stdin = strings.NewReader(c.stdin)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", c, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.out.close()
		p.errOut.close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s (pid %d) printed:\n%s", c, p.Pid(), tail(p.Output(), 16<<10))
		}
	})
	return p
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL to the process.
func (p *Proc) Kill() error { return p.cmd.Process.Kill() }

// Done is closed once the process has exited and its output is read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns what exec.Cmd.Wait
// returned (nil, an *exec.ExitError, or a signal's). One that does not
// exit within the hang guard gets SIGQUIT and fails the test with where
// its goroutines were.
func (p *Proc) Wait() error {
	t := p.c.e.t
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(eventually.Bound):
	}
	p.quit()
	t.Fatalf("%s did not exit within %s; it printed:\n%s", p.c, eventually.Bound, tail(p.Output(), 64<<10))
	return nil
}

// State is the exited process's state (after Wait or Done).
func (p *Proc) State() *os.ProcessState { return p.cmd.ProcessState }

// quit asks a hung process where its goroutines are (SIGQUIT), and kills
// it if it does not exit after that.
func (p *Proc) quit() {
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(quitGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitLine reads the lines the process prints, from where the last
// WaitLine or Rest stopped, until one holds want, and returns what it
// read (each line and its newline). Output that ends without such a line,
// or none within the hang guard, fails the test.
func (p *Proc) WaitLine(want string) string {
	t := p.c.e.t
	t.Helper()
	var seen strings.Builder
	deadline := time.After(eventually.Bound)
	for {
		text, changed, closed := p.out.from(p.read)
		for {
			i := strings.IndexByte(text, '\n')
			if i < 0 && !(closed && text != "") {
				break
			}
			line := text
			if i >= 0 {
				line = text[:i]
				p.read += i + 1
				text = text[i+1:]
			} else {
				p.read += len(text)
				text = ""
			}
			line = strings.TrimSuffix(line, "\r")
			seen.WriteString(line + "\n")
			if strings.Contains(line, want) {
				return seen.String()
			}
		}
		if closed {
			t.Fatalf("%s: output ended without %q:\n%s", p.c, want, seen.String())
		}
		select {
		case <-changed:
		case <-deadline:
			p.quit()
			t.Fatalf("%s printed no line with %q within %s:\n%s\nstderr:\n%s", p.c, want, eventually.Bound, seen.String(), p.Stderr())
		}
	}
}

// Rest waits until the process's output ends and returns the lines after
// those WaitLine returned, each with its newline.
func (p *Proc) Rest() string {
	t := p.c.e.t
	t.Helper()
	deadline := time.After(eventually.Bound)
	for {
		text, changed, closed := p.out.from(p.read)
		if closed {
			p.read += len(text)
			var b strings.Builder
			for text != "" { // as a bufio.Scanner splits lines
				line, rest, _ := strings.Cut(text, "\n")
				b.WriteString(strings.TrimSuffix(line, "\r") + "\n")
				text = rest
			}
			return b.String()
		}
		select {
		case <-changed:
		case <-deadline:
			p.quit()
			t.Fatalf("%s: output did not end within %s:\n%s", p.c, eventually.Bound, tail(p.Output(), 64<<10))
		}
	}
}

// Stderr is what the process has printed on stderr so far.
func (p *Proc) Stderr() string { s, _, _ := p.errOut.from(0); return s }

// Output is what the process has printed so far: its stdout, then its
// stderr.
func (p *Proc) Output() string {
	out, _, _ := p.out.from(0)
	return out + p.Stderr()
}

// output is a process's stdout or stderr as it comes: whole, and a
// channel closed (and replaced) at every write, for a reader to wait on.
type output struct {
	mu      sync.Mutex
	b       []byte
	changed chan struct{}
	closed  bool
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b = append(o.b, b...)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(b), nil
}

func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	close(o.changed)
	o.changed = make(chan struct{})
}

// from is the output from offset i on, a channel closed at the next
// write, and whether the output has ended.
func (o *output) from(i int) (string, <-chan struct{}, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.b[i:]), o.changed, o.closed
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("… %d bytes before\n%s", len(s)-n, s[len(s)-n:])
}
