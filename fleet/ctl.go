package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Controls are what a run's controls drive: *loop.Runner satisfies it.
type Controls interface {
	Pause()
	Resume()
	SkipIteration()
	Abort()
}

// The bodies of a control request on CtlSubject(run id). Each is answered
// "ok", or "error: " and a sentence; a tunnel request is answered
// "ok UP DOWN", the subjects of the tunnel (tunnel.go).
const (
	OpPause  = "pause"
	OpResume = "resume"
	OpSkip   = "skip"
	OpAbort  = "abort"
	opTunnel = "tunnel"
)

// maxCtlBody bounds a control request's body.
const maxCtlBody = 64

// ErrNoWorker is the error of Control and DialRun when no worker serves
// the run (NATS has no responder on its control subject).
var ErrNoWorker = errors.New("no worker is running the run")

type noWorkerError struct{ runID, url string }

func (e *noWorkerError) Error() string {
	return fmt.Sprintf("no worker is running run %s; `ralph runs --nats %s` shows where it is", e.runID, e.url)
}

func (e *noWorkerError) Is(target error) bool { return target == ErrNoWorker }

// parseCtl reads a control request's body.
func parseCtl(body []byte) (string, error) {
	if len(body) > maxCtlBody {
		return "", fmt.Errorf("a control is one word of at most %d bytes, not %d bytes", maxCtlBody, len(body))
	}
	op := strings.TrimSpace(string(body))
	switch op {
	case OpPause, OpResume, OpSkip, OpAbort, opTunnel:
		return op, nil
	}
	return "", fmt.Errorf("%.40q is not a control; send pause, resume, skip, abort or tunnel", op)
}

// ctlServer answers one run's controls.
type ctlServer struct {
	nc         *nats.Conn
	runID      string
	c          Controls
	socketPath string
	tunnel     tunnelConfig

	mu      sync.Mutex
	stopped bool
	tunnels map[*tunnel]struct{}
	wg      sync.WaitGroup
}

// ServeControls answers the controls of run runID on CtlSubject(runID)
// until stop is called: pause, resume, skip and abort drive c; a tunnel
// request connects a tunnel to the run's serve socket at socketPath
// ("" = the run serves none, and tunnels are refused). stop ends the
// subscription and every open tunnel, and waits for them.
func ServeControls(nc *nats.Conn, runID string, c Controls, socketPath string) (stop func(), err error) {
	return serveControls(nc, runID, c, socketPath, defaultTunnel())
}

func serveControls(nc *nats.Conn, runID string, c Controls, socketPath string, cfg tunnelConfig) (func(), error) {
	if c == nil {
		return nil, errors.New("ServeControls needs the run's Controls")
	}
	s := &ctlServer{nc: nc, runID: runID, c: c, socketPath: socketPath, tunnel: cfg, tunnels: map[*tunnel]struct{}{}}
	sub, err := nc.Subscribe(CtlSubject(runID), s.handle)
	if err != nil {
		return nil, fmt.Errorf("serve the controls of run %s on %s: %w", runID, CtlSubject(runID), err)
	}
	tsub, err := nc.Subscribe(TunnelSubject(runID), s.handle)
	if err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("serve the tunnels of run %s on %s: %w", runID, TunnelSubject(runID), err)
	}
	// The subscription must reach the server before anyone is told the run
	// is here, or an early control finds no responder.
	if err := nc.Flush(); err != nil {
		sub.Unsubscribe()
		tsub.Unsubscribe()
		return nil, fmt.Errorf("serve the controls of run %s: %w", runID, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// Unsubscribe fails only on a closed connection, which has
			// ended the subscription anyway.
			_ = sub.Unsubscribe()
			_ = tsub.Unsubscribe()
			// Once stop returns, the server knows: a control sent now finds
			// no responder at once, instead of a subscriber that has gone.
			_ = nc.Flush()
			s.mu.Lock()
			s.stopped = true
			open := make([]*tunnel, 0, len(s.tunnels))
			for t := range s.tunnels {
				open = append(open, t)
			}
			s.mu.Unlock()
			for _, t := range open {
				t.closeWith(fmt.Sprintf("the worker stopped serving run %s", runID))
			}
			s.wg.Wait()
		})
	}, nil
}

func (s *ctlServer) handle(m *nats.Msg) {
	reply := "ok"
	op, err := parseCtl(m.Data)
	switch {
	case err != nil:
	case op == opTunnel && m.Subject != TunnelSubject(s.runID):
		err = fmt.Errorf("tunnels to run %s open on %s", s.runID, TunnelSubject(s.runID))
	case op != opTunnel && m.Subject != CtlSubject(s.runID):
		err = fmt.Errorf("controls of run %s go to %s", s.runID, CtlSubject(s.runID))
	case op == OpPause:
		s.c.Pause()
	case op == OpResume:
		s.c.Resume()
	case op == OpSkip:
		s.c.SkipIteration()
	case op == OpAbort:
		s.c.Abort()
	case op == opTunnel:
		reply, err = s.serveTunnel()
	}
	if err != nil {
		reply = "error: " + err.Error()
	}
	if m.Reply == "" {
		return // a publish, not a request: nobody waits for the answer
	}
	// A requester that gave up is gone; its tunnel, if any, ends at its
	// dead interval.
	_ = m.Respond([]byte(reply))
}

// room says whether another tunnel may open now.
func (s *ctlServer) room() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roomLocked()
}

func (s *ctlServer) roomLocked() error {
	switch {
	case s.stopped:
		return fmt.Errorf("run %s is no longer served on this worker", s.runID)
	case len(s.tunnels) >= s.tunnel.open:
		return fmt.Errorf("run %s has no room for another tunnel (at most %d at once); close a view of it and try again", s.runID, s.tunnel.open)
	}
	return nil
}

// track counts t among the open tunnels, which stop closes.
func (s *ctlServer) track(t *tunnel) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.roomLocked(); err != nil {
		return err
	}
	s.tunnels[t] = struct{}{}
	s.wg.Add(1)
	return nil
}

func (s *ctlServer) untrack(t *tunnel) {
	s.mu.Lock()
	delete(s.tunnels, t)
	s.mu.Unlock()
	s.wg.Done()
}

// Control sends op (pause, resume, skip or abort) to the worker running
// runID and returns its answer: nil for "ok", else its sentence.
func Control(ctx context.Context, nc *nats.Conn, runID, op string) error {
	switch op {
	case OpPause, OpResume, OpSkip, OpAbort:
	default:
		return fmt.Errorf("%q is not a control; use pause, resume, skip or abort", op)
	}
	reply, err := request(ctx, nc, runID, op)
	if err != nil {
		return err
	}
	if reply != "ok" {
		return fmt.Errorf("the worker running run %s answered %.120q", runID, reply)
	}
	return nil
}

// ctlTimeout bounds a control request whose context has no deadline.
const ctlTimeout = 10 * time.Second

// request sends body to the run's control subject and returns the answer;
// an "error: …" answer is returned as that error.
func request(ctx context.Context, nc *nats.Conn, runID, body string) (string, error) {
	if !plainSubject(CtlSubject(runID)) || strings.Count(runID, ".") > 0 {
		return "", fmt.Errorf("%q is not a run id", runID)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ctlTimeout)
		defer cancel()
	}
	subject := CtlSubject(runID)
	if body == opTunnel {
		subject = TunnelSubject(runID)
	}
	m, err := nc.RequestWithContext(ctx, subject, []byte(body))
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		url := nc.ConnectedUrlRedacted()
		if url == "" {
			url = "URL"
		}
		return "", &noWorkerError{runID: runID, url: url}
	case errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("the worker running run %s did not answer %s in time: %w", runID, body, err)
	case err != nil:
		return "", fmt.Errorf("send %s to run %s: %w", body, runID, err)
	}
	reply := string(m.Data)
	if msg, ok := strings.CutPrefix(reply, "error: "); ok {
		return "", errors.New(msg)
	}
	return reply, nil
}
