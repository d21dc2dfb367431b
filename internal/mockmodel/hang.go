package mockmodel

import "sync/atomic"

// silent counts the replies a mock keeps silent on purpose (a hang), so a
// test can wait until a reply is hanging instead of waiting a while to see
// that nothing comes.
type silent struct{ n atomic.Int32 }

// Hanging is how many replies are silent now, on purpose, until their
// client leaves (or the mock is closed).
func (s *silent) Hanging() int { return int(s.n.Load()) }

// enter counts one more silent reply; the function it returns counts it
// out.
func (s *silent) enter() (leave func()) {
	s.n.Add(1)
	return func() { s.n.Add(-1) }
}
