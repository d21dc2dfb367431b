package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

const (
	// MaxText is how much of a call's text (the final answer, or the end
	// of what it printed) a Result keeps; TextCut says how much was left
	// out, and the output file holds all of it.
	MaxText = 64 << 10
	// redacted replaces a secret in the output file, as on the chain.
	redacted = "[REDACTED]"
)

// Output is the file a call's output was written to: its path, how many
// bytes it holds and their SHA-256 (hex). Err is the first error writing
// it; the call itself went on.
type Output struct {
	Path   string
	Bytes  int64
	SHA256 string
	Err    error
}

// outputLog writes one stream of a call to its file, as it is read: the
// bytes with the secrets replaced go, in buffers of outputBuf, to a
// writer goroutine that hashes, counts and writes them, so that the file
// system's time is not the parser's. At most outputBufs buffers exist: a
// slow disk slows the reading, never grows the memory. A write error is
// kept, not returned: the call and its parsing go on.
type outputLog struct {
	path string
	f    *os.File
	buf  []byte        // being filled; nil until a free one is taken
	full chan []byte   // to the writer
	free chan []byte   // back from it
	done chan struct{} // closed when the writer has written everything
	red  redactor
	err  error // creating the file
	lazy bool  // the file is created at the first byte (standard error)

	// The writer's, read after done.
	h    hash.Hash
	n    int64
	werr error
}

const (
	outputBuf  = 256 << 10
	outputBufs = 4
)

// openOutput creates path (0600, its directory 0700) for a stream;
// lazy defers that to the first byte written, so a silent stream leaves
// no file.
func openOutput(path string, secrets []string, lazy bool) (*outputLog, error) {
	l := &outputLog{path: path, h: sha256.New(), red: newRedactor(secrets), lazy: lazy}
	if !lazy {
		if err := l.create(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *outputLog) create() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("create the agent's output directory: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create the agent's output file: %w", err)
	}
	l.f = f
	l.full, l.free, l.done = make(chan []byte, outputBufs), make(chan []byte, outputBufs), make(chan struct{})
	for range outputBufs {
		l.free <- make([]byte, 0, outputBuf)
	}
	go l.writer()
	return nil
}

func (l *outputLog) writer() {
	defer close(l.done)
	for b := range l.full {
		if l.werr == nil {
			l.h.Write(b)
			if _, err := l.f.Write(b); err != nil {
				l.werr = fmt.Errorf("write the agent's output to %s: %w", l.path, err)
			} else {
				l.n += int64(len(b))
			}
		}
		l.free <- b[:0]
	}
}

// Write takes bytes as the CLI printed them; it never fails.
func (l *outputLog) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if l.f == nil && l.err == nil {
		l.err = l.create()
	}
	if l.err == nil {
		l.red.write(p, l.put)
	}
	return len(p), nil
}

func (l *outputLog) put(p []byte) {
	for len(p) > 0 {
		if l.buf == nil {
			l.buf = <-l.free
		}
		k := copy(l.buf[len(l.buf):cap(l.buf)], p)
		l.buf, p = l.buf[:len(l.buf)+k], p[k:]
		if len(l.buf) == cap(l.buf) {
			l.full <- l.buf
			l.buf = nil
		}
	}
}

// close writes what is left, closes the file and says what it holds;
// the zero Output for a lazy stream that never printed.
func (l *outputLog) close() Output {
	if l == nil || (l.f == nil && l.err == nil) {
		return Output{}
	}
	if l.err != nil {
		return Output{Path: l.path, Err: l.err}
	}
	l.red.flush(l.put)
	if len(l.buf) > 0 {
		l.full <- l.buf
	}
	l.buf = nil
	close(l.full)
	<-l.done
	if err := l.f.Close(); err != nil && l.werr == nil {
		l.werr = fmt.Errorf("close the agent's output file %s: %w", l.path, err)
	}
	return Output{Path: l.path, Bytes: l.n, SHA256: hex.EncodeToString(l.h.Sum(nil)), Err: l.werr}
}

// redactor replaces secrets in a stream that arrives in pieces: it holds
// back the last len(longest secret)-1 bytes, which may be the start of a
// secret the next piece ends.
type redactor struct {
	secrets [][]byte
	hold    int
	buf     []byte
}

func newRedactor(secrets []string) redactor {
	var r redactor
	for _, s := range secrets {
		if len(s) < 8 { // as the chain's redaction: shorter ones would match ordinary text
			continue
		}
		r.secrets = append(r.secrets, []byte(s))
		r.hold = max(r.hold, len(s)-1)
	}
	return r
}

func (r *redactor) write(p []byte, out func([]byte)) {
	if len(r.secrets) == 0 {
		out(p)
		return
	}
	buf := append(r.buf, p...)
	for _, s := range r.secrets {
		if bytes.Contains(buf, s) {
			buf = bytes.ReplaceAll(buf, s, []byte(redacted))
		}
	}
	if len(buf) <= r.hold {
		r.buf = buf
		return
	}
	cut := len(buf) - r.hold
	out(buf[:cut])
	r.buf = append(r.buf[:0:0], buf[cut:]...)
}

func (r *redactor) flush(out func([]byte)) {
	if len(r.buf) > 0 {
		out(r.buf)
	}
	r.buf = nil
}

// textTail keeps the last MaxText bytes of a call's text lines, joined by
// newlines, and counts the bytes it let go.
type textTail struct {
	b     []byte
	cut   int64
	lines int
}

func (t *textTail) add(s string) {
	if t.lines > 0 {
		t.b = append(t.b, '\n')
	}
	t.lines++
	if len(s) > MaxText {
		t.cut += int64(len(t.b) + len(s) - MaxText)
		t.b = append(t.b[:0], s[len(s)-MaxText:]...)
		return
	}
	t.b = append(t.b, s...)
	if len(t.b) > 2*MaxText { // amortised: one copy per MaxText bytes
		drop := len(t.b) - MaxText
		t.cut += int64(drop)
		t.b = t.b[:copy(t.b, t.b[drop:])]
	}
}

// text is what is kept, starting at a character boundary, and how many
// bytes before it were cut.
func (t *textTail) text() (string, int64) {
	b, cut := t.b, t.cut
	if len(b) > MaxText {
		cut += int64(len(b) - MaxText)
		b = b[len(b)-MaxText:]
	}
	if cut > 0 {
		n := 0
		for n < len(b) && n < utf8.UTFMax && !utf8.RuneStart(b[n]) {
			n++
		}
		b, cut = b[n:], cut+int64(n)
	}
	return string(b), cut
}

// tailString is the last MaxText bytes of s from a character boundary,
// and how many bytes were cut.
func tailString(s string) (string, int64) {
	var t textTail
	t.add(s)
	return t.text()
}

// callLogs are one call's output files: standard output and standard
// error.
type callLogs struct{ out, err *outputLog }

// openLogs creates the standard output file at path at once (an empty
// file says the CLI printed nothing) and the standard error file, path
// with .err for .out, at its first byte.
func openLogs(path string, secrets []string) (*callLogs, error) {
	out, err := openOutput(path, secrets, false)
	if err != nil {
		return nil, err
	}
	errLog, _ := openOutput(strings.TrimSuffix(path, ".out")+".err", secrets, true) // lazy: cannot fail here
	return &callLogs{out: out, err: errLog}, nil
}

func (l *callLogs) close() (out, errOut Output) { return l.out.close(), l.err.close() }
