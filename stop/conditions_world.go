package stop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// The kinds that read the last iteration's actions, the audit index or the
// outside world.

// MaxCommandOutput caps each of a command's stdout and stderr.
const MaxCommandOutput = 1 << 20

// DefaultCommandTimeout bounds a command condition with no timeout of its
// own and no evaluator default.
const DefaultCommandTimeout = 10 * time.Minute

type command struct {
	argv          []string
	expect        int
	must, mustNot *regexp.Regexp
}

func (c *command) check(ctx context.Context, in *Input) outcome {
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Dir = in.Workdir
	out := procgroup.CappedBuffer{Limit: MaxCommandOutput} // stdout and stderr interleaved, as a user sees them
	cmd.Stdout, cmd.Stderr = &out, &out
	// Contained (see procgroup.Run): a timeout kills every descendant, one
	// in a new session too, and nothing outlives a SIGKILLed ralph.
	_, runErr := sandbox.RunContained(ctx, cmd, time.Second, procgroup.StartOptions{})
	line := strings.Join(c.argv, " ")
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) && ctx.Err() == nil {
		return outcome{err: runErr, reason: fmt.Sprintf("cannot run %s: %v", line, runErr), detail: "error", evidence: line}
	}
	if ctx.Err() != nil {
		detail := "timed out"
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			detail = "cancelled" // the run was aborted or interrupted, not this check's timeout
		}
		return outcome{reason: fmt.Sprintf("%s did not finish (%s); its process group was killed", line, context.Cause(ctx)),
			detail: detail, evidence: line + "\n" + tail(out.String(), 400)}
	}
	exit := cmd.ProcessState.ExitCode()
	text := out.String()
	o := outcome{detail: fmt.Sprintf("exit %d", exit), evidence: fmt.Sprintf("$ %s\nexit %d\n%s", line, exit, commandTail(text, 400))}
	switch {
	case exit != c.expect:
		o.reason = fmt.Sprintf("%s exited %d, want %d", line, exit, c.expect)
	case c.must != nil && !c.must.MatchString(text):
		o.reason = fmt.Sprintf("%s exited %d but its output does not match must_match %q", line, exit, c.must)
	case c.mustNot != nil && c.mustNot.MatchString(text):
		o.reason = fmt.Sprintf("%s exited %d but its output matches must_not_match %q: %q", line, exit, c.mustNot, c.mustNot.FindString(text))
	default:
		o.met, o.progress = true, 1
		o.reason = fmt.Sprintf("%s exited %d", line, exit)
	}
	if out.Truncated {
		o.evidence += "\n(output truncated at 1 MiB)"
		if o.met && c.mustNot != nil {
			// What was cut off may hold exactly what must_not_match refuses.
			o.met, o.progress = false, 0
			o.reason = fmt.Sprintf("%s printed more than 1 MiB, so must_not_match %q cannot be confirmed on all of it", line, c.mustNot)
		}
	}
	return o
}

func (c *command) fingerprint(in *Input, f *fp) bool {
	f.i64(int64(in.Iteration))
	f.u64(in.HeadSeq)
	f.str(in.Workdir)
	return true
}

func (c *command) inputs(in *Input) string {
	return fmt.Sprintf("argv=%q dir=%s iteration=%d head=%d", c.argv, in.Workdir, in.Iteration, in.HeadSeq)
}

// tail returns the last n bytes of s, starting at a line when it can.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return "…" + s
}

type fileExists struct{ path string }

func (c fileExists) check(_ context.Context, in *Input) outcome {
	p := resolve(in.Workdir, c.path)
	fi, err := os.Stat(p)
	switch {
	case err == nil:
		return outcome{met: true, progress: 1, detail: "exists", reason: c.path + " exists",
			evidence: fmt.Sprintf("%s: %d bytes, modified %s", p, fi.Size(), fi.ModTime().Format(time.RFC3339))}
	case errors.Is(err, os.ErrNotExist):
		return outcome{detail: "missing", reason: c.path + " does not exist", evidence: p}
	}
	return outcome{err: err, detail: "error", reason: fmt.Sprintf("cannot stat %s: %v", c.path, err), evidence: p}
}
func (c fileExists) fingerprint(in *Input, f *fp) bool {
	f.stat(resolve(in.Workdir, c.path))
	// A rewrite can keep size and mtime (cp -p, tar x): never reuse a
	// result across iterations or ledger changes.
	f.i64(int64(in.Iteration))
	f.u64(in.HeadSeq)
	return false
}
func (c fileExists) inputs(in *Input) string { return "path=" + resolve(in.Workdir, c.path) }

// maxFileContains bounds how much of a file file_contains reads.
const maxFileContains = 16 << 20

type fileContains struct {
	path string
	re   *regexp.Regexp
}

func (c fileContains) check(_ context.Context, in *Input) outcome {
	p := resolve(in.Workdir, c.path)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return outcome{detail: "missing", reason: c.path + " does not exist", evidence: p}
	}
	if err != nil {
		return outcome{err: err, detail: "error", reason: fmt.Sprintf("cannot read %s: %v", c.path, err), evidence: p}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileContains))
	if err != nil {
		return outcome{err: err, detail: "error", reason: fmt.Sprintf("cannot read %s: %v", c.path, err), evidence: p}
	}
	if loc := c.re.FindIndex(data); loc != nil {
		line := bytes.Count(data[:loc[0]], []byte("\n")) + 1
		return outcome{met: true, progress: 1, detail: "found", reason: fmt.Sprintf("%s matches %q", c.path, c.re),
			evidence: fmt.Sprintf("%s:%d: %q", p, line, data[loc[0]:loc[1]])}
	}
	return outcome{detail: "not found", reason: fmt.Sprintf("%s does not match %q", c.path, c.re),
		evidence: fmt.Sprintf("%s (%d bytes read)", p, len(data))}
}
func (c fileContains) fingerprint(in *Input, f *fp) bool {
	f.stat(resolve(in.Workdir, c.path))
	// A rewrite can keep size and mtime (cp -p, tar x): never reuse a
	// result across iterations or ledger changes.
	f.i64(int64(in.Iteration))
	f.u64(in.HeadSeq)
	return false
}
func (c fileContains) inputs(in *Input) string {
	return fmt.Sprintf("path=%s pattern=%q", resolve(in.Workdir, c.path), c.re)
}

// outputPattern looks for the completion promise in the text of the last
// iteration's capability results.
type outputPattern struct {
	text string
	re   *regexp.Regexp // nil: text is matched exactly (as a substring)
}

// ResultText is the text output_pattern reads from an action: strings as
// they are, maps through :stdout and :stderr when present, anything else
// in canonical form.
func ResultText(v rtfs.Value) string {
	switch v.Kind() {
	case rtfs.KindString:
		return v.Str()
	case rtfs.KindNil:
		return ""
	case rtfs.KindMap:
		m := v.AsMap()
		so, se := m.GetKey("stdout"), m.GetKey("stderr")
		if so.Kind() == rtfs.KindString || se.Kind() == rtfs.KindString {
			return so.Str() + se.Str()
		}
	}
	return rtfs.Print(v)
}

func (c outputPattern) check(_ context.Context, in *Input) outcome {
	n := 0
	for i := range in.LastActions {
		a := &in.LastActions[i]
		if a.Type != ledger.CapabilityCall && a.Type != ledger.CapabilityDeduplicated {
			continue
		}
		// The promise is something the work printed: a failed call's output
		// is not a completion, and reading a file or the kv store only
		// repeats what is already written (the prompt itself may contain the
		// promise).
		if !a.Success || (in.EchoesStored != nil && in.EchoesStored(a.FunctionName)) {
			continue
		}
		n++
		text := ResultText(a.Result)
		var found string
		if c.re != nil {
			found = c.re.FindString(text)
			if found == "" && !c.re.MatchString(text) {
				continue
			}
		} else if strings.Contains(text, c.text) {
			found = c.text
		} else {
			continue
		}
		return outcome{met: true, progress: 1, detail: "found", reason: fmt.Sprintf("%s printed %q", a.FunctionName, found),
			evidence: fmt.Sprintf("seq %d %s %s", a.Seq, a.FunctionName, a.ActionID)}
	}
	return outcome{detail: "not found", reason: fmt.Sprintf("no result of the last iteration contains %q", c.text),
		evidence: fmt.Sprintf("%d capability results", n)}
}
func (c outputPattern) fingerprint(in *Input, f *fp) bool { f.lastActions(in); return false }

func (c outputPattern) inputs(in *Input) string {
	return fmt.Sprintf("pattern=%q regex=%t actions=%d", c.text, c.re != nil, len(in.LastActions))
}

// onError fails the run when an action of the last iteration failed with
// an error matching the pattern.
type onError struct{ re *regexp.Regexp }

func (c onError) check(_ context.Context, in *Input) outcome {
	failed := 0
	for i := range in.LastActions {
		a := &in.LastActions[i]
		if a.ErrorMessage == "" {
			continue
		}
		failed++
		if m := c.re.FindString(a.ErrorMessage); m != "" || c.re.MatchString(a.ErrorMessage) {
			return outcome{met: true, progress: 1, detail: "matched", reason: fmt.Sprintf("%s failed: %s", a.FunctionName, a.ErrorMessage),
				evidence: fmt.Sprintf("seq %d %s %s", a.Seq, a.Type, a.ActionID)}
		}
	}
	return outcome{detail: fmt.Sprintf("%d errors, none match", failed), reason: fmt.Sprintf("no error of the last iteration matches %q", c.re),
		evidence: fmt.Sprintf("%d actions, %d with errors", len(in.LastActions), failed)}
}
func (c onError) fingerprint(in *Input, f *fp) bool { f.lastActions(in); return false }
func (c onError) inputs(in *Input) string {
	return fmt.Sprintf("pattern=%q actions=%d", c.re, len(in.LastActions))
}

// predicate evaluates a completion predicate against the run's audit index.
// It compiles the predicate once per index (the audit.* builtins are bound
// to it) and keeps the last binding.
type predicate struct {
	p     *Predicate
	mu    sync.Mutex
	bound *Bound
}

func (c *predicate) bind(ix *Index) (*Bound, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bound != nil && c.bound.ix == ix {
		return c.bound, nil
	}
	b, err := c.p.Bind(ix)
	if err != nil {
		return nil, err
	}
	c.bound = b
	return b, nil
}

func (c *predicate) check(ctx context.Context, in *Input) outcome {
	if in.Audit == nil {
		err := errors.New("no audit index for this run")
		return outcome{err: err, detail: "error", reason: "predicate cannot be evaluated: " + err.Error()}
	}
	b, err := c.bind(in.Audit)
	if err != nil {
		return outcome{err: err, detail: "error", reason: "predicate does not compile: " + err.Error()}
	}
	holds, ev, err := b.Explain(ctx)
	if err != nil {
		return outcome{err: err, detail: "error", reason: "predicate failed: " + err.Error()}
	}
	o := outcome{met: holds, detail: "does not hold", evidence: FormatEvidence(ev)}
	o.reason = "predicate does not hold: " + c.p.Source
	if holds {
		o.progress, o.detail, o.reason = 1, "holds", "predicate holds: "+c.p.Source
	}
	return o
}

func (c *predicate) fingerprint(in *Input, f *fp) bool {
	f.str(in.RunID)
	if in.Audit != nil {
		f.u64(in.Audit.Observed())
	}
	return false
}

func (c *predicate) inputs(in *Input) string {
	n := uint64(0)
	if in.Audit != nil {
		n = in.Audit.Observed()
	}
	return fmt.Sprintf("source=%q observed=%d", c.p.Source, n)
}

// FormatEvidence renders what a predicate looked at, one query a line.
func FormatEvidence(ev []Evidence) string {
	var b strings.Builder
	for i, e := range ev {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "(%s) → %t", e.Query, e.Holds)
		if e.Seq != 0 {
			fmt.Fprintf(&b, " at seq %d (%s)", e.Seq, e.ActionID)
		}
	}
	return b.String()
}
