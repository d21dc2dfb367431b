package agent

import (
	"bufio"
	"bytes"
	"cmp"
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
	"github.com/ralphloop/ralph/sandbox"
)

const (
	// MaxStderr is how much of the end of the CLI's standard error a Result keeps.
	MaxStderr = 16 << 10
	// MaxLine is the longest output line parsed; the rest of a longer line
	// is not parsed (the output file has it).
	MaxLine = 4 << 20
	// longKeep is the largest long-line buffer kept for the next line.
	longKeep = 1 << 20
)

// Run runs one agent call to its end. The process runs in its own process group with a Linux parent-death
// signal (SIGKILL), contained by procgroup (a cgroup, else a subreaper and a sweep, and a watcher that
// outlives ralph), so nothing it started survives the call or ralph, not even in a new session; ctx
// cancellation → Stopped "cancelled"; everything is killed on every way out. Every byte the CLI printed is
// read, after it exited too, within the call's timeout (drain). A non-zero exit is NOT an error (Result.Exit
// says it); err is for "could not start" etc., and a *SpoolError when its output could not be kept (the
// Result then says what was read).
func Run(ctx context.Context, o Options) (res Result, err error) {
	start := time.Now()
	res = Result{CLI: o.CLI, Exit: -1}
	b, path, err := resolveCall(&o)
	if err != nil {
		return res, err
	}
	if sandbox.From(ctx) != nil && b.confined != nil {
		env := envOf(o.Env)
		res.SandboxArgs = b.confined(o.Args, env("HOME"), env)
		o.Args = append(o.Args[:len(o.Args):len(o.Args)], res.SandboxArgs...)
	}
	res.CLI, res.Argv = b.Name, b.argv(path, &o)
	if ctx.Err() != nil {
		res.Stopped = StoppedCancelled
		return res, nil
	}
	if o.OutputFile != "" {
		logs, err := openLogs(o.OutputFile, o.Redact)
		if err != nil {
			return res, fmt.Errorf("%w; check that ralph can write to the store's logs directory", err)
		}
		o.logs = logs
		defer func() {
			res.Output, res.ErrOutput = logs.close() // after the readers: every byte read is in the files
		}()
	}
	acc := &accumulator{o: &o}
	emit := acc.emitter()
	c, err := startCall(ctx, res.Argv, b, &o, emit)
	if err != nil {
		if _, ok := errors.AsType[*SpoolError](err); ok {
			return res, err
		}
		return res, fmt.Errorf("cannot start agent %s (%s): %w; check that it is an executable file and that the working directory %q exists", b.Name, res.Argv[0], err, o.Dir)
	}
	bound, unbind := context.WithCancel(ctx)
	if o.Timeout > 0 {
		bound, unbind = context.WithTimeout(ctx, o.Timeout)
	}
	defer unbind()
	stopped := c.drain(ctx, bound, c.watch(ctx, bound, &o))
	c.wg.Wait()
	if b.argsDenial != nil && len(acc.denials) == 0 {
		if d := b.argsDenial(o.Args); d != nil {
			emit(Event{Kind: EventDenied, Denial: d})
		}
	}
	res.Duration = time.Since(start)
	c.result(&res, acc, b, stopped)
	return res, c.stdout.Err()
}

// resolveCall finds the backend o.CLI names and the program to run: the
// CLI's binary on the PATH of the call's environment, or, for a backend
// that TakesCommand, the first word of o.Command.
func resolveCall(o *Options) (backend, string, error) {
	lookPath := o.LookPath
	if lookPath == nil {
		lookPath = lookPathIn(o.Env, o.Dir)
	}
	name, path, err := Resolve(o.CLI, lookPath)
	if err != nil {
		return backend{}, "", err
	}
	b := backendFor(name)
	if b.TakesCommand {
		if len(o.Command) == 0 || o.Command[0] == "" {
			return b, "", errors.New("agent cli \"command\" has no command; set [agent] command to the argv to run, e.g. [\"my-agent\", \"--flag\"]")
		}
		if path, err = lookPath(o.Command[0]); err != nil {
			return b, "", fmt.Errorf("%w: %q is not on PATH; install it or give its full path in [agent] command", ErrNotFound, o.Command[0])
		}
	}
	return b, path, nil
}

// emitter is the one way events reach the accumulator and o.OnEvent:
// standard output and standard error are read apart, so it serializes
// them.
func (a *accumulator) emitter() func(Event) {
	var mu sync.Mutex
	return func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		a.add(e)
		if a.o.OnEvent != nil {
			a.o.OnEvent(e)
		}
	}
}

// result fills res from the ended call: its exit, containment and
// standard error, what the accumulator gathered, a limit standard error
// names, and why it stopped.
func (c *call) result(res *Result, acc *accumulator, b backend, stopped string) {
	res.Exit = c.proc.ExitCode()
	res.Containment = c.proc.Containment()
	res.Stderr = c.stderr.String()
	acc.result(res)
	stderrLimit(b, c.errText.String(), res)
	switch {
	case stopped != "":
		res.Stopped = stopped
	case res.Limit != nil:
		res.Stopped = StoppedUsageLimit
	}
}

// stderrLimit reads a limit from what a failed call printed on standard
// error besides its retry notices (a notice of a 429 followed by a final
// 400 is that 400), when its stream named none, or named one without its
// reset: that limit then takes the reset standard error gives.
func stderrLimit(b backend, errText string, res *Result) {
	if (res.Limit != nil && !res.Limit.Reset.IsZero()) || b.limitText == nil || (res.Exit == 0 && !res.IsError) {
		return
	}
	if l := b.limitText(errText, time.Now()); res.Limit == nil {
		res.Limit = l
	} else if l != nil && !l.Reset.IsZero() {
		with := *res.Limit
		with.Reset, with.Exact = l.Reset, l.Exact
		res.Limit = &with
	}
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
	stdout           *spool               // standard output, followed as a file (spool.go)
	errPipe          *os.File             // read end
	stderr           procgroup.TailBuffer // the end of standard error
	errText          procgroup.TailBuffer // the end of standard error less the retry notices
	wg               sync.WaitGroup       // the reading and writing goroutines
	lastOutput       atomic.Int64         // unix nanoseconds of the last output byte
	parser           parser
	emit             func(Event)
	stopOnce         sync.Once
	stopReason       string
	readersDone      chan struct{} // both readers have returned
	outDone          chan struct{} // the reader of standard output has returned
	closeOutputsOnce sync.Once
	logs             *callLogs // the output files; nil when none are kept
}

// startCall starts the CLI, confined by the sandbox ctx carries.
func startCall(ctx context.Context, argv []string, b backend, o *Options, emit func(Event)) (*call, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = o.Dir, o.Env
	c := &call{stderr: procgroup.TailBuffer{Limit: MaxStderr}, errText: procgroup.TailBuffer{Limit: MaxStderr},
		readersDone: make(chan struct{}), outDone: make(chan struct{})}
	c.logs = o.logs // set before the readers start
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			_ = f.Close() // the child holds its own copies
		}
	}()
	outW, outR, err := newSpool(cmp.Or(o.spoolDir, os.TempDir()))
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
	c.proc, err = sandbox.Start(ctx, cmd, procgroup.StartOptions{ParentDeath: true})
	if err != nil {
		c.closeOutputs()
		if c.stdin != nil {
			_ = c.stdin.Close()
		}
		return nil, err
	}
	c.lastOutput.Store(time.Now().UnixNano())
	c.parser, c.emit = b.newParser(time.Now), emit
	c.startIO(b, o.Prompt)
	return c, nil
}

// startIO starts the goroutines of a started call: the readers of its
// standard output and standard error (readersDone closes when both have
// returned, outDone when the first has) and the writer of its prompt.
func (c *call) startIO(b backend, prompt string) {
	var readers sync.WaitGroup
	readers.Add(2)
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		defer readers.Done()
		defer close(c.outDone)
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
			_, _ = io.WriteString(c.stdin, prompt)
			_ = c.stdin.Close()
		}()
	}
}

// watch waits until the process exits, killing its group when bound is
// done (ctx cancelled, or the call's timeout), on the idle timeout, or
// when its output can no longer be kept (the spool's file system full);
// it returns which of those ended the call ("" when it ended by itself,
// or for want of room: Run's error says that).
func (c *call) watch(ctx, bound context.Context, o *Options) string {
	var idle <-chan time.Time
	var idleTimer *time.Timer
	if o.IdleTimeout > 0 {
		idleTimer = time.NewTimer(o.IdleTimeout)
		defer idleTimer.Stop()
		idle = idleTimer.C
	}
	done, full := bound.Done(), c.stdout.Full()
	for {
		select {
		case <-c.proc.Done():
			return c.stopReason
		case <-done:
			c.stop(boundReason(ctx))
			done = nil // closed for good: selecting it again would spin until the group is reaped
		case <-full:
			c.stop("")
			full = nil
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

// boundReason says why a call's bound is done: ctx itself (the caller
// cancelled it), else the call's own timeout.
func boundReason(ctx context.Context) string {
	if ctx.Err() != nil {
		return StoppedCancelled
	}
	return StoppedTimeout
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

// drain runs after the process exited and its group was killed, and
// reads what it printed to the end: standard output, every byte of it,
// however long the parser takes (nothing can write to the spool any
// more, so it has an end), and standard error to its EOF, which comes
// once the last process holding it has died (one that left the group,
// or even the session, was killed with it: procgroup's containment).
// The one bound is the call's own (bound: ctx and the call's timeout,
// counted from its start): when it is done, reading stops where it is,
// the rest is not recorded, and the call ends as cancelled or timed out
// unless it had ended otherwise already. It returns how the call ended.
func (c *call) drain(ctx, bound context.Context, stopped string) string {
	c.stdout.finish()
	select {
	case <-c.readersDone:
	case <-bound.Done():
		if stopped == "" {
			stopped = boundReason(ctx)
		}
	}
	c.closeOutputs()
	<-c.readersDone
	if c.stdin != nil {
		_ = c.stdin.Close() // unblocks a prompt write nobody reads; "already closed" is fine
	}
	return stopped
}

func (c *call) closeOutputs() {
	c.closeOutputsOnce.Do(func() {
		_ = c.stdout.Close() // our read ends: closing only ends our reads
		_ = c.errPipe.Close()
	})
}

// readErrLines keeps the end of standard error and hands each line to
// the backend's stderrLine, which emits what it recognises (a retry
// notice) and says whether the line was a notice, which the limit check
// at the end then ignores.
func (c *call) readErrLines(stderrLine func(line string, emit func(Event)) bool) {
	var r io.Reader = activity{c.errPipe, &c.lastOutput}
	if c.logs != nil {
		r = tee{r, c.logs.err}
	}
	scanLines(r, func(line []byte) {
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
// arrives, and writes it, whole, to the output file as it is read. A
// line is output for the idle clock unless all its parser made of it was
// progress notices (EventProgress: a heartbeat of a tool still running
// is no sign of life of the work); bytes of a line not ended yet (a
// prompt, a spinner, the part of a long line read so far) count as
// output as they are read.
func (c *call) readLines() {
	var r io.Reader = c.stdout
	if c.logs != nil {
		r = tee{r, c.logs.out}
	}
	if bp, ok := c.parser.(blockParser); ok {
		scanBlocks(activity{r, &c.lastOutput}, func(b []byte) { bp.block(b, c.emit) })
	} else {
		l := lineActivity{c: c}
		emit := l.emit
		scanLines(unfinishedActivity{r, &c.lastOutput}, func(line []byte) {
			l.events, l.progress = 0, 0
			c.parser.line(line, emit)
			if l.events == 0 || l.progress < l.events {
				c.lastOutput.Store(time.Now().UnixNano())
			}
		})
	}
	if e, ok := c.parser.(ender); ok {
		e.end(c.emit)
	}
}

// lineActivity counts the events one line of output made, and how many
// of them were progress notices.
type lineActivity struct {
	c                *call
	events, progress int
}

func (l *lineActivity) emit(e Event) {
	l.events++
	if e.Kind == EventProgress {
		l.progress++
	}
	l.c.emit(e)
}

// blockParser is a parser that takes many complete lines at once: a
// plain-text agent's output needs no line-by-line reading, and one event
// per read rather than per line keeps a flood cheap.
type blockParser interface {
	parser
	// block handles complete lines joined by their newlines, without the
	// last one; b is only valid during the call.
	block(b []byte, emit func(Event))
}

// scanBlocks calls block with the complete lines of each read (without
// the newline that ends the last), as soon as they are read, and with a
// last line without a newline at the end. A line longer than the buffer
// is handed over alone once complete, cut at MaxLine.
func scanBlocks(r io.Reader, block func([]byte)) {
	buf := make([]byte, 0, 64<<10)
	var long []byte
	inLong := false
	for {
		if len(buf) == cap(buf) { // no newline in a full buffer: part of a long line
			if len(long) < MaxLine {
				long = append(long, buf[:min(len(buf), MaxLine-len(long))]...)
			}
			inLong, buf = true, buf[:0]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		read := buf[len(buf) : len(buf)+n]
		buf = buf[:len(buf)+n]
		if i := bytes.LastIndexByte(read, '\n'); i >= 0 {
			end := len(buf) - n + i // the last newline
			lines := buf[:end]
			if inLong {
				j := bytes.IndexByte(buf, '\n')
				if len(long) < MaxLine {
					long = append(long, buf[:min(j, MaxLine-len(long))]...)
				}
				if l := trimEOL(long); len(l) > 0 {
					block(l)
				}
				long, inLong = long[:0], false
				if cap(long) > longKeep {
					long = nil
				}
				lines = buf[min(j+1, end):end]
			}
			if len(lines) > 0 {
				block(lines)
			}
			buf = buf[:copy(buf, buf[end+1:])]
		}
		if err != nil {
			if inLong {
				if len(long) < MaxLine {
					long = append(long, buf[:min(len(buf), MaxLine-len(long))]...)
				}
				buf = long
			}
			if l := trimEOL(buf); len(l) > 0 {
				block(l)
			}
			return
		}
	}
}

// tee is a reader that writes what it reads to w, which never fails.
type tee struct {
	r io.Reader
	w io.Writer
}

func (t tee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		_, _ = t.w.Write(p[:n])
	}
	return n, err
}

// scanLines calls line for each non-empty line of r (without its line
// ending) as soon as it is complete, and for a last line without a
// newline. A line longer than MaxLine is cut there (the output
// file has it whole). It returns at end of input or on a read error (the
// pipe was closed). It holds at most one line of MaxLine bytes: the
// buffer of a long line is kept for the next one up to longKeep, and let
// go beyond.
func scanLines(r io.Reader, line func([]byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	inLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < MaxLine {
				long = append(long, chunk[:min(len(chunk), MaxLine-len(long))]...)
			}
			inLong = true
			continue
		}
		if inLong {
			if len(long) < MaxLine {
				long = append(long, chunk[:min(len(chunk), MaxLine-len(long))]...)
			}
			chunk, inLong = long, false
			if cap(long) > longKeep {
				long = nil
			} else {
				long = long[:0]
			}
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

// unfinishedActivity is a reader that notes when it read bytes that end
// without a newline: a line not complete yet, which the line reader will
// judge only once it ends.
type unfinishedActivity struct {
	r    io.Reader
	last *atomic.Int64
}

func (a unfinishedActivity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 && p[n-1] != '\n' {
		a.last.Store(time.Now().UnixNano())
	}
	return n, err
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

// envOf reads env ("NAME=value", the last of a name wins, as in
// exec.Cmd); nil env is this process's environment.
func envOf(env []string) Env {
	if env == nil {
		return os.Getenv
	}
	return func(name string) string {
		v := ""
		for _, kv := range env {
			if val, ok := strings.CutPrefix(kv, name+"="); ok {
				v = val
			}
		}
		return v
	}
}
