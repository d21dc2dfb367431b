package agent

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// A spool is an agent's standard output as a file rather than a pipe.
//
// Claude Code 2.1.197 exits without flushing what it still has to write
// when its standard output is a pipe: a 1 MiB answer arrived as 591 KB,
// and the result line that carries the call's cost and usage was lost.
// Written to a regular file, its output arrives whole. So the CLI writes
// to an unlinked temporary file, and ralph follows that file as it grows,
// as `tail -f` does: the parser sees the same bytes in the same order, as
// soon as they are written (within a poll interval of at most 50 ms).
//
// What was read is released from the disk as reading goes on (a punched
// hole, on Linux), so a flood never holds more than a few MiB of disk, or
// of memory where the temporary directory is a tmpfs.
type spool struct {
	r    *os.File      // our own open file description: its offset is ours alone
	done chan struct{} // closed once every process that could write has gone
	once sync.Once
	read int64 // bytes read so far
	hole int64 // bytes released so far
}

const (
	spoolPollMin = 2 * time.Millisecond
	spoolPollMax = 50 * time.Millisecond
	// spoolRelease is how far reading must get past the last release
	// before the next.
	spoolRelease = 8 << 20
)

// newSpool makes the file: w is the write end for the child's standard
// output, s follows it through an open file description of its own. The file has no name once both are
// open, so nothing is left behind however ralph ends.
func newSpool() (w *os.File, s *spool, err error) {
	w, err = os.CreateTemp("", "ralph-agent-out-*")
	if err != nil {
		return nil, nil, err
	}
	name := w.Name()
	defer func() { _ = os.Remove(name) }()
	// Read and write: punching a hole (releaseRead) needs a descriptor
	// open for writing; this one only ever reads.
	r, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	return w, &spool{r: r, done: make(chan struct{})}, nil
}

// Read returns what has been written since the last read, waiting for
// more until the writers are gone; then it returns what is left and
// io.EOF.
func (s *spool) Read(p []byte) (int, error) {
	wait := spoolPollMin
	for {
		n, err := s.r.Read(p)
		if n > 0 {
			s.read += int64(n)
			if s.read-s.hole >= spoolRelease {
				s.hole = s.read
				releaseRead(s.r, s.hole)
			}
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		select {
		case <-s.done:
			// Everything that could write has gone: one more read catches
			// what it wrote last.
			n, err := s.r.Read(p)
			s.read += int64(n)
			if n > 0 {
				return n, nil
			}
			if err == nil {
				err = io.EOF
			}
			return 0, err
		case <-time.After(wait):
			wait = min(2*wait, spoolPollMax)
		}
	}
}

// finish says that nothing writes to the file any more: Read returns
// io.EOF once it has read the rest.
func (s *spool) finish() { s.once.Do(func() { close(s.done) }) }

// Close ends reading at once (a Read in progress returns an error).
func (s *spool) Close() error {
	s.finish()
	return s.r.Close()
}
