package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// MaxRefusals bounds the distinct refusals one call (or one iteration's
// loose ones) keeps: a process that is refused in a loop is recorded
// once per thing refused; past this many, further refusals are only
// counted.
const MaxRefusals = 32

// Sink gathers a run's refusals for the calls in flight: the run passes
// its Deny to New as onDenied, and each call (an agent.run, a shell.exec)
// opens Refusals of its own for as long as it runs. The proxy cannot tell
// which process of the run asked, so a refusal lands on every call in
// flight; one that comes while none is (a hook, a stop condition's
// command, the provider) is kept loose until the run takes it
// (TakeLoose). A nil *Sink gathers nothing. Its methods are safe for
// concurrent use.
type Sink struct {
	mu    sync.Mutex
	calls map[*Refusals]struct{}
	loose refusalSet
}

// NewSink returns an empty sink.
func NewSink() *Sink { return &Sink{calls: map[*Refusals]struct{}{}} }

// Deny records d on every call in flight, or loose when there is none.
func (s *Sink) Deny(d Denial) {
	if s == nil {
		return
	}
	s.mu.Lock()
	calls := make([]*Refusals, 0, len(s.calls))
	for c := range s.calls {
		calls = append(calls, c)
	}
	if len(calls) == 0 {
		s.loose.add(d)
	}
	s.mu.Unlock()
	for _, c := range calls {
		c.Add(d)
	}
}

// Open starts gathering the refusals of one call; notify, when set, is
// called once for each refusal the call has not had before (to show it
// live), outside any lock. Close ends it.
func (s *Sink) Open(notify func(Denial)) *Refusals {
	if s == nil {
		return nil
	}
	r := &Refusals{sink: s, notify: notify}
	s.mu.Lock()
	s.calls[r] = struct{}{}
	s.mu.Unlock()
	return r
}

// TakeLoose returns the refusals that came while no call was in flight,
// since the last TakeLoose, and how many more came past
// MaxRefusals.
func (s *Sink) TakeLoose() ([]Denial, int) {
	if s == nil {
		return nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, n := s.loose.list, s.loose.dropped
	s.loose = refusalSet{}
	return l, n
}

// Refusals are one call's refusals, in the order they came, each once.
// A nil *Refusals takes nothing (no sandbox).
type Refusals struct {
	sink   *Sink
	notify func(Denial)
	mu     sync.Mutex
	set    refusalSet
	closed bool
}

// Add records d on the call (once), unless the call has ended.
func (r *Refusals) Add(d Denial) {
	if r == nil {
		return
	}
	r.mu.Lock()
	fresh := !r.closed && r.set.add(d)
	r.mu.Unlock()
	if fresh && r.notify != nil {
		r.notify(d)
	}
}

// Close ends the call's gathering and returns its refusals and how many
// more came past MaxRefusals.
func (r *Refusals) Close() ([]Denial, int) {
	if r == nil {
		return nil, 0
	}
	r.sink.mu.Lock()
	delete(r.sink.calls, r)
	r.sink.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return r.set.list, r.set.dropped
}

// refusalSet is a bounded list of distinct refusals.
type refusalSet struct {
	list    []Denial
	dropped int
}

// add appends d unless it is there already; false when it was, or when
// the set is full (then it is counted).
func (s *refusalSet) add(d Denial) bool {
	for _, e := range s.list {
		if e == d {
			return false
		}
	}
	if len(s.list) >= MaxRefusals {
		s.dropped++
		return false
	}
	s.list = append(s.list, d)
	return true
}

type refusalsKey struct{}

// WithRefusals returns ctx carrying r: what the call running with ctx
// sees refused (a denied path in its tool's output) goes to r.
func WithRefusals(ctx context.Context, r *Refusals) context.Context {
	return context.WithValue(ctx, refusalsKey{}, r)
}

// RefusalsFrom is the Refusals ctx carries; nil when the call runs
// without a sandbox.
func RefusalsFrom(ctx context.Context) *Refusals {
	r, _ := ctx.Value(refusalsKey{}).(*Refusals)
	return r
}

// PathOp is what a process was refused on a path.
type PathOp string

const (
	OpRead  PathOp = "read"
	OpWrite PathOp = "write"
)

// PathDenial is the Denial of op on path, with the [sandbox] line that
// would allow it: `read = ["<path>"]`, or `write = ["<dir>"]` naming the
// nearest directory of path that exists ([sandbox] write takes only
// paths that exist).
func PathDenial(op PathOp, path string) Denial {
	path = filepath.Clean(path)
	allow := path
	if op == OpWrite {
		allow = existingDir(path)
	}
	return Denial{What: string(op) + " " + path, Allow: string(op) + " = [" + strconv.Quote(allow) + "]"}
}

// HostDenial is the Denial of a connection to host:port, with the
// [sandbox] line that would allow it: `hosts = ["<host>"]`.
func HostDenial(host string, port int) Denial {
	return Denial{What: "connect " + host + ":" + strconv.Itoa(port), Allow: "hosts = [" + strconv.Quote(host) + "]"}
}

// existingDir is path when it is a directory, else its nearest parent
// that exists.
func existingDir(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
		if p == filepath.Dir(p) {
			return p
		}
	}
}
