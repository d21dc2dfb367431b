package detach

import (
	"io"
	"sync"
)

// SwitchWriter discards what is written until Set, then writes to the
// writer Set gives it: log records of a run whose UI drew on the terminal
// go to the run's log once it has detached.
type SwitchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Set sends what is written from now on to w.
func (s *SwitchWriter) Set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *SwitchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}
