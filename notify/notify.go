package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// Defaults of Options.
const (
	DefaultQueue = 64
	DefaultGrace = 5 * time.Second
)

// Sender delivers one notification; a sink.
type Sender interface {
	Send(ctx context.Context, e Event) error
}

// Options configure a Notifier.
type Options struct {
	Sinks   []config.Notify
	File    string              // the config file, for messages
	Env     func(string) string // url_env and secret_env are read here (nil: os.Getenv)
	Workdir string              // a command sink runs here
	Logger  *slog.Logger        // nil: slog.Default()
	// Record appends a NotifyFailed action; nil records nothing.
	Record func(ctx context.Context, a *ledger.Action) error
	Queue  int           // per sink (default DefaultQueue)
	Grace  time.Duration // the longest the run's end waits for the last notifications (default DefaultGrace)
}

// Notifier sends a run's notifications to its sinks. Each Follow (one per
// run) has queues of its own.
type Notifier struct {
	o     Options
	sinks []*sink
}

// sink is one configured sink and, within a Follow, its queue.
type sink struct {
	cfg     config.Notify
	send    Sender
	q       chan Event   // made by Follow
	dropped atomic.Int64 // dropped (queue full) since the last delivered notification
	lost    atomic.Int64 // still queued when the grace ran out
}

// New checks the sinks, each against its kind's row (as Check does, so a
// table nothing checked yet is refused the same way) and against the
// environment (a webhook's url_env must hold a URL that parses, secret_env
// must be set), and builds them with their rows' New.
func New(o Options) (*Notifier, error) {
	if o.Env == nil {
		o.Env = os.Getenv
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	n := &Notifier{o: o}
	for i, c := range o.Sinks {
		if err := check(&c, o.File, i); err != nil {
			return nil, err
		}
		row, _ := Lookup(c.Kind) // check found it
		s, err := row.New(&c, &o)
		if err != nil {
			return nil, &config.Error{File: o.File, Line: c.Line, Msg: fmt.Sprintf("[[notify]] %s: %v", c.Name, err)}
		}
		n.sinks = append(n.sinks, &sink{cfg: c, send: s})
	}
	return n, nil
}

// Follow reads a run's events until its closing action (or until events
// closes or ctx ends), sending notifications on the way; the channel it
// returns closes once the sinks have sent what they had, or the grace
// after the run's end ran out. It never blocks on a sink.
func (n *Notifier) Follow(ctx context.Context, events <-chan loop.Event) <-chan struct{} {
	done := make(chan struct{})
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sinks := make([]*sink, len(n.sinks))
	var wg sync.WaitGroup
	for i, c := range n.sinks {
		s := &sink{cfg: c.cfg, send: c.send, q: make(chan Event, n.o.Queue)}
		sinks[i] = s
		wg.Go(func() { n.deliver(sendCtx, s) })
	}
	go func() {
		defer close(done)
		defer cancel()
		runID := n.read(ctx, events, sinks)
		for _, s := range sinks {
			close(s.q)
		}
		drained := make(chan struct{})
		go func() { wg.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(n.o.Grace):
			cancel() // what is still queued is dropped and recorded as it fails
			<-drained
		case <-ctx.Done(): // the run's end cannot wait (a signal)
			cancel()
			<-drained
		}
		end := Event{RunID: runID, Time: time.Now()}
		for _, s := range sinks {
			if d := s.dropped.Load(); d > 0 {
				n.failed(context.WithoutCancel(ctx), s, runID, end,
					fmt.Errorf("%d notification(s) were dropped because the sink's queue of %d was full", d, n.o.Queue))
			}
			if l := s.lost.Load(); l > 0 {
				n.failed(context.WithoutCancel(ctx), s, runID, end,
					fmt.Errorf("%d notification(s) were still queued when the %s the run's end waits for them ran out", l, n.o.Grace))
			}
		}
	}()
	return done
}

// read translates events into notifications until the run's closing
// action, and returns the run's id.
func (n *Notifier) read(ctx context.Context, events <-chan loop.Event, sinks []*sink) string {
	var t translator
	runID := ""
	for {
		var e loop.Event
		var ok bool
		select {
		case e, ok = <-events:
		case <-ctx.Done():
			return runID
		}
		if !ok {
			return runID
		}
		runID = e.RunID
		for _, ne := range t.next(&e) {
			enqueue(n.log(), sinks, n.o.Queue, ne)
		}
		if e.Kind == loop.EventAction && loop.IsRunEnd(e.Action.Type) {
			return runID
		}
	}
}

// enqueue offers e to every sink that takes it; a full queue drops it.
func enqueue(log *slog.Logger, sinks []*sink, size int, e Event) {
	for _, s := range sinks {
		if len(s.cfg.On) > 0 && !slices.Contains(s.cfg.On, e.Event) {
			continue
		}
		select {
		case s.q <- e:
		default:
			if s.dropped.Add(1) == 1 {
				log.Warn("notification dropped: the sink is behind", "sink", s.cfg.Name, "event", e.Event, "queue", size)
			}
		}
	}
}

// deliver sends s's queue, one notification at a time.
func (n *Notifier) deliver(ctx context.Context, s *sink) {
	for e := range s.q {
		if ctx.Err() != nil {
			s.lost.Add(1)
			continue
		}
		e.Dropped = int(s.dropped.Swap(0))
		if err := s.send.Send(ctx, e); err != nil {
			n.failed(ctx, s, e.RunID, e, err)
		}
	}
}

// failed logs a sink's failure and records it on the chain.
func (n *Notifier) failed(ctx context.Context, s *sink, runID string, e Event, err error) {
	n.log().Warn("notification failed", "sink", s.cfg.Name, "kind", s.cfg.Kind, "event", e.Event, "err", err)
	if n.o.Record == nil || runID == "" {
		return
	}
	a := &ledger.Action{Type: ledger.NotifyFailed, ActionID: loop.NewID(), RunID: runID, IntentID: runID,
		FunctionName: s.cfg.Name, Success: false, ErrorMessage: err.Error(), Timestamp: time.Now(),
		Metadata: map[string]rtfs.Value{"kind": rtfs.String(s.cfg.Kind), "event": rtfs.String(e.Event)}}
	if e.Iteration > 0 {
		a.Metadata["iteration"] = rtfs.Int(int64(e.Iteration))
	}
	if rerr := n.o.Record(context.WithoutCancel(ctx), a); rerr != nil && !errors.Is(rerr, context.Canceled) {
		n.log().Warn("record a failed notification", "sink", s.cfg.Name, "err", rerr)
	}
}

func (n *Notifier) log() *slog.Logger {
	if n.o.Logger != nil {
		return n.o.Logger
	}
	return slog.Default()
}
