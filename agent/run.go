package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
)

const (
	// MaxStderr is how much of the end of the CLI's standard error a Result keeps.
	MaxStderr = 16 << 10
	// MaxLine is the longest output line parsed; the rest of a longer line is dropped.
	MaxLine = 16 << 20
	// pipeGrace is how long the output may stay open after the CLI's group
	// was killed (a descendant that left the group) before it is closed.
	pipeGrace = 2 * time.Second
)

// Run runs one agent call to its end. The process runs in its own process group with a Linux parent-death
// signal (SIGKILL), contained by procgroup (a cgroup, else a subreaper and a sweep, and a watcher that
// outlives ralph), so nothing it started survives the call or ralph, not even in a new session; ctx
// cancellation → Stopped "cancelled"; everything is killed on every way out. A non-zero exit is NOT an error (Result.Exit says it); err is for "could not start" etc.
func Run(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	res := Result{CLI: o.CLI, Exit: -1}
	lookPath := o.LookPath
	if lookPath == nil {
		lookPath = lookPathIn(o.Env, o.Dir)
	}
	name, path, err := Resolve(o.CLI, lookPath)
	if err != nil {
		return res, err
	}
	res.CLI = name
	b := backendFor(name)
	if name == "command" {
		if len(o.Command) == 0 || o.Command[0] == "" {
			return res, errors.New("agent cli \"command\" has no command; set [agent] command to the argv to run, e.g. [\"my-agent\", \"--flag\"]")
		}
		if path, err = lookPath(o.Command[0]); err != nil {
			return res, fmt.Errorf("%w: %q is not on PATH; install it or give its full path in [agent] command", ErrNotFound, o.Command[0])
		}
	}
	res.Argv = b.argv(path, &o)
	if err := ctx.Err(); err != nil {
		res.Stopped = StoppedCancelled
		return res, nil
	}
	acc := &accumulator{o: &o}
	var emitMu sync.Mutex // standard output and standard error are read apart
	emit := func(e Event) {
		emitMu.Lock()
		defer emitMu.Unlock()
		acc.add(e)
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}
	c, err := startCall(res.Argv, b, &o, emit)
	if err != nil {
		return res, fmt.Errorf("cannot start agent %s (%s): %w; check that it is an executable file and that the working directory %q exists", name, res.Argv[0], err, o.Dir)
	}
	stopped := c.watch(ctx, &o)
	c.finish()
	c.wg.Wait()

	res.Duration = time.Since(start)
	res.Exit = c.proc.ExitCode()
	res.Containment = c.proc.Containment()
	res.Stderr = c.stderr.String()
	acc.result(&res)
	if res.Limit == nil && b.limitText != nil && (res.Exit != 0 || res.IsError) {
		// Only what the CLI said besides its retry notices: a notice of a
		// 429 followed by a final 400 is that 400.
		res.Limit = b.limitText(c.errText.String(), time.Now())
	}
	switch {
	case stopped != "":
		res.Stopped = stopped
	case res.Limit != nil:
		res.Stopped = StoppedUsageLimit
	}
	return res, nil
}

// lookPathIn finds executables the way the agent's environment will: on
// the PATH of env when env sets one (else this process's PATH), and a
// name with a slash relative to dir.
func lookPathIn(env []string, dir string) func(string) (string, error) {
	path, ok := "", false
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			path, ok = v, true // the last PATH wins, as in exec.Cmd
		}
	}
	return func(name string) (string, error) {
		if strings.Contains(name, "/") {
			p := name
			if !filepath.IsAbs(p) && dir != "" {
				p = filepath.Join(dir, p)
			}
			if isExecutable(p) {
				return p, nil
			}
			return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
		}
		if !ok {
			return exec.LookPath(name)
		}
		for _, d := range filepath.SplitList(path) {
			if d == "" {
				continue // an empty entry would mean the working directory: not searched
			}
			if p := filepath.Join(d, name); isExecutable(p) {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
	}
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// call is one running agent process and the goroutines that feed it and
// read it.
type call struct {
	proc             *procgroup.Proc
	stdin            *os.File             // write end; nil when the prompt is in argv
	stdout, errPipe  *os.File             // read ends
	stderr           procgroup.TailBuffer // the end of standard error
	errText          procgroup.TailBuffer // the end of standard error less the retry notices
	wg               sync.WaitGroup       // the reading and writing goroutines
	lastOutput       atomic.Int64         // unix nanoseconds of the last output byte
	parser           parser
	emit             func(Event)
	stopOnce         sync.Once
	stopReason       string
	readersDone      chan struct{}
	closeOutputsOnce sync.Once
}

func startCall(argv []string, b backend, o *Options, emit func(Event)) (*call, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = o.Dir, o.Env
	c := &call{stderr: procgroup.TailBuffer{Limit: MaxStderr}, errText: procgroup.TailBuffer{Limit: MaxStderr},
		readersDone: make(chan struct{})}
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			_ = f.Close() // the child holds its own copies
		}
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return nil, err
	}
	childEnds = append(childEnds, outW, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	c.stdout, c.errPipe = outR, errR
	if b.stdin {
		inR, inW, err := os.Pipe()
		if err != nil {
			c.closeOutputs()
			return nil, err
		}
		childEnds = append(childEnds, inR)
		cmd.Stdin, c.stdin = inR, inW
	}
	c.proc, err = procgroup.Start(cmd, procgroup.StartOptions{ParentDeath: true})
	if err != nil {
		c.closeOutputs()
		if c.stdin != nil {
			_ = c.stdin.Close()
		}
		return nil, err
	}
	c.lastOutput.Store(time.Now().UnixNano())
	c.parser, c.emit = b.newParser(time.Now), emit
	var readers sync.WaitGroup
	readers.Add(2)
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		defer readers.Done()
		c.readLines()
	}()
	go func() {
		defer c.wg.Done()
		defer readers.Done()
		c.readErrLines(b.stderrLine) // ends at EOF or when closed
	}()
	go func() {
		readers.Wait()
		close(c.readersDone)
	}()
	if c.stdin != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			// EPIPE when the CLI exits without reading its prompt: nothing to report.
			_, _ = io.WriteString(c.stdin, o.Prompt)
			_ = c.stdin.Close()
		}()
	}
	return c, nil
}

// watch waits until the process exits, killing its group on ctx
// cancellation, timeout or idle timeout; it returns which of those ended
// the call ("" when it ended by itself).
func (c *call) watch(ctx context.Context, o *Options) string {
	var timeout, idle <-chan time.Time
	if o.Timeout > 0 {
		t := time.NewTimer(o.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var idleTimer *time.Timer
	if o.IdleTimeout > 0 {
		idleTimer = time.NewTimer(o.IdleTimeout)
		defer idleTimer.Stop()
		idle = idleTimer.C
	}
	cancelled := ctx.Done()
	for {
		select {
		case <-c.proc.Done():
			return c.stopReason
		case <-cancelled:
			c.stop(StoppedCancelled)
			cancelled = nil // closed for good: selecting it again would spin until the group is reaped
		case <-timeout:
			c.stop(StoppedTimeout)
		case <-idle:
			quiet := time.Since(time.Unix(0, c.lastOutput.Load()))
			if quiet >= o.IdleTimeout {
				c.stop(StoppedIdleTimeout)
			} else {
				idleTimer.Reset(o.IdleTimeout - quiet)
			}
		}
	}
}

// stop kills the group once, remembering why; a call that has already
// ended by itself keeps its own ending.
func (c *call) stop(reason string) {
	select {
	case <-c.proc.Done():
		return
	default:
	}
	c.stopOnce.Do(func() {
		c.stopReason = reason
		c.proc.Kill()
	})
}

// finish runs after the process exited and its group was killed: the
// outputs reach EOF at once unless a process that left the group still
// holds them, which gets pipeGrace before they are closed.
func (c *call) finish() {
	select {
	case <-c.readersDone:
	case <-time.After(pipeGrace):
		c.closeOutputs()
		<-c.readersDone
	}
	c.closeOutputs()
	if c.stdin != nil {
		_ = c.stdin.Close() // unblocks a prompt write nobody reads; "already closed" is fine
	}
}

func (c *call) closeOutputs() {
	c.closeOutputsOnce.Do(func() {
		_ = c.stdout.Close() // read ends: closing only ends our reads
		_ = c.errPipe.Close()
	})
}

// readErrLines keeps the end of standard error and hands each line to
// the backend's stderrLine, which emits what it recognises (a retry
// notice) and says whether the line was a notice, which the limit check
// at the end then ignores.
func (c *call) readErrLines(stderrLine func(line string, emit func(Event)) bool) {
	scanLines(activity{c.errPipe, &c.lastOutput}, func(line []byte) {
		_, _ = c.stderr.Write(line)
		_, _ = c.stderr.Write([]byte{'\n'})
		if stderrLine != nil && stderrLine(string(line), c.emit) {
			return
		}
		_, _ = c.errText.Write(line)
		_, _ = c.errText.Write([]byte{'\n'})
	})
}

// readLines feeds standard output to the parser line by line as it
// arrives.
func (c *call) readLines() {
	scanLines(activity{c.stdout, &c.lastOutput}, func(line []byte) { c.parser.line(line, c.emit) })
}

// scanLines calls line for each non-empty line of r (without its line
// ending) as soon as it is complete, and for a last line without a
// newline. A line longer than MaxLine is cut there. It returns at end of
// input or on a read error (the pipe was closed).
func scanLines(r io.Reader, line func([]byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < MaxLine {
				long = append(long, chunk[:min(len(chunk), MaxLine-len(long))]...)
			}
			continue
		}
		if long != nil {
			if len(long) < MaxLine {
				long = append(long, chunk[:min(len(chunk), MaxLine-len(long))]...)
			}
			chunk, long = long, nil
		}
		if l := trimEOL(chunk); len(l) > 0 {
			line(l)
		}
		if err != nil {
			return
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// activity is a reader that notes when it last read a byte.
type activity struct {
	r    io.Reader
	last *atomic.Int64
}

func (a activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.last.Store(time.Now().UnixNano())
	}
	return n, err
}
