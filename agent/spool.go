package agent

import (
	"errors"
	"fmt"
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
//
// A write the CLI could not make (its file system full) is lost to the
// CLI alone: it may say nothing, or die. So whenever reading has caught up
// with the file, and before each release, the spool asks whether the CLI
// could still write past the file's end (hasRoom); when it could not, the
// spool is full: full is closed and Err names it.
type spool struct {
	r    *os.File      // our own open file description: its offset is ours alone
	dir  string        // where the file was made
	done chan struct{} // closed once every process that could write has gone
	once sync.Once
	read int64 // bytes read so far
	hole int64 // bytes released so far

	full     chan struct{} // closed when the CLI can no longer write to the file
	fullOnce sync.Once
	err      error // why, set before full closes

	noHoles bool  // the file system cannot punch holes: none is tried again
	holeErr error // the first failure to punch one for another reason
}

const (
	spoolPollMin = 2 * time.Millisecond
	spoolPollMax = 50 * time.Millisecond
	// spoolRelease is how far reading must get past the last release
	// before the next.
	spoolRelease = 8 << 20
)

// SpoolError is a call whose standard output could not be kept: the
// temporary directory (TMPDIR) could not hold the spool, because it is
// not writable or its file system is full. Ran says the CLI had started:
// the call was ended when the spool was found full, and what the CLI
// printed after that is lost.
type SpoolError struct {
	Dir string
	Err error
	Ran bool
}

func (e *SpoolError) Error() string {
	if !e.Ran {
		return fmt.Sprintf("the agent's standard output needs a file in %s, which could not be made (%v); set TMPDIR to a writable directory with room", e.Dir, e.Err)
	}
	return fmt.Sprintf("the agent's standard output could not be kept in its file in %s (%v), so the call was ended and what it printed from then on is lost; free space in %[1]s or set TMPDIR to a directory with room",
		e.Dir, e.Err)
}

func (e *SpoolError) Unwrap() error { return e.Err }

// newSpool makes the file in dir: w is the write end for the child's
// standard output, s follows it through an open file description of its
// own. The file has no name once both are open, so nothing is left behind
// however ralph ends. An error is a *SpoolError.
func newSpool(dir string) (w *os.File, s *spool, err error) {
	w, err = os.CreateTemp(dir, "ralph-agent-out-*")
	if err != nil {
		return nil, nil, &SpoolError{Dir: dir, Err: unwrapPath(err)}
	}
	name := w.Name()
	defer func() { _ = os.Remove(name) }()
	// Read and write: punching a hole (releaseRead) and asking for room
	// (hasRoom) need a descriptor open for writing; this one never writes.
	r, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		_ = w.Close()
		return nil, nil, &SpoolError{Dir: dir, Err: unwrapPath(err)}
	}
	return w, &spool{r: r, dir: dir, done: make(chan struct{}), full: make(chan struct{})}, nil
}

// unwrapPath is the cause of a path error (the directory names the path).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
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
				s.checkRoom() // before the release frees what a full disk is short of
				s.release()
			}
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		s.checkRoom() // caught up: can the CLI still write?
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

// release frees what was read, unless holes cannot be punched here.
func (s *spool) release() {
	s.hole = s.read
	if s.noHoles || s.holeErr != nil {
		return
	}
	unsupported, err := releaseRead(s.r, s.hole)
	switch {
	case unsupported:
		s.noHoles = true // the space comes back when the file is closed
	case err != nil && !errors.Is(err, os.ErrClosed): // closed: reading was ended, and the space comes back
		s.holeErr = err
	}
}

// checkRoom marks the spool full once the CLI could not write past the
// file's end.
func (s *spool) checkRoom() {
	select {
	case <-s.full:
		return
	default:
	}
	if err := hasRoom(s.r); err != nil && !errors.Is(err, os.ErrClosed) { // closed: reading was ended on purpose
		if s.holeErr != nil {
			err = fmt.Errorf("%w; the read part could not be released either: %v", err, s.holeErr)
		}
		s.fullOnce.Do(func() {
			s.err = &SpoolError{Dir: s.dir, Err: err, Ran: true}
			close(s.full)
		})
	}
}

// Full is closed once the CLI can no longer write to the spool; Err then
// says why. It is read by other goroutines than the reader's.
func (s *spool) Full() <-chan struct{} { return s.full }

// Err is why the spool could not take the CLI's output (a *SpoolError),
// or nil; it is set before Full is closed.
func (s *spool) Err() error {
	select {
	case <-s.full:
		return s.err
	default:
		return nil
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
