package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/loop"
)

// Controls are what a run's controls drive: *loop.Runner satisfies it.
// RecordRequest records who asked for a control on the run's chain before
// it takes effect (§17).
type Controls interface {
	Pause()
	Resume()
	SkipIteration()
	Abort()
	RecordRequest(ctx context.Context, op, via string, by loop.Requester) error
}

// ControlOptions say how a run's controls are served.
type ControlOptions struct {
	// Socket is the run's serve socket that tunnels reach ("" = the run
	// serves none, and tunnels are refused).
	Socket string
	// Owner is the member who submitted the run: the only one whose
	// signed controls change it. Every other member's tunnel reads only.
	Owner string
	// Nonces is the fleet's record of taken requests (Handles.Nonces): with
	// it a request this worker took is refused on every other worker too
	// (a run that moved); nil remembers them in this process only.
	Nonces jetstream.KeyValue
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
	owner      string
	tunnel     tunnelConfig
	seen       nonceBook

	mu      sync.Mutex
	stopped bool
	tunnels map[*tunnel]struct{}
	wg      sync.WaitGroup
}

// ServeControls answers the controls of run runID on CtlSubject(runID)
// and its tunnels on TunnelSubject(runID) until stop is called. Every
// request must be signed by a fleet member (identity.go), checked against
// the keeper's roster: pause, resume, skip and abort from the run's owner
// are recorded on its chain with the owner's name, then drive c; anyone
// else's are refused. A tunnel connects to the run's serve socket through
// a proxy that lets the owner control the run (each control recorded) and
// everyone else read it only. stop ends the subscriptions and every open
// tunnel, and waits for them.
func ServeControls(nc *nats.Conn, runID string, c Controls, o ControlOptions) (stop func(), err error) {
	return serveControls(nc, runID, c, o, defaultTunnel())
}

func serveControls(nc *nats.Conn, runID string, c Controls, o ControlOptions, cfg tunnelConfig) (func(), error) {
	if c == nil {
		return nil, errors.New("ServeControls needs the run's Controls")
	}
	s := &ctlServer{nc: nc, runID: runID, c: c, socketPath: o.Socket, owner: o.Owner, tunnel: cfg, tunnels: map[*tunnel]struct{}{},
		seen: &nonces{}}
	if o.Nonces != nil {
		s.seen = kvNonces{o.Nonces}
	}
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
	}
	var who Member
	if err == nil {
		who, err = s.signer(m)
	}
	switch {
	case err != nil:
	case op == opTunnel:
		reply, err = s.serveTunnel(who, s.mayControl(who, "control") == nil)
	default:
		err = s.do(who, op, "control")
	}
	if err != nil {
		reply = answer(err)
	}
	if m.Reply == "" {
		return // a publish, not a request: nobody waits for the answer
	}
	// A requester that gave up is gone; its tunnel, if any, ends at its
	// dead interval.
	_ = m.Respond([]byte(reply))
}

// signer is the member who signed m, checked against the keeper's roster.
func (s *ctlServer) signer(m *nats.Msg) (Member, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	r, err := FetchRoster(ctx, s.nc)
	if err != nil {
		return Member{}, fmt.Errorf("the worker cannot check who sent the request: %w", err)
	}
	return verifySigned(m, r, s.seen, time.Now())
}

// mayControl says whether who may op the run: its owner alone may.
func (s *ctlServer) mayControl(who Member, op string) error {
	if s.owner == "" {
		return refused(fmt.Errorf("run %s records no submitter, so no member may %s it", s.runID, op))
	}
	if who.Role != RoleSubmitter || who.Name != s.owner {
		return refused(fmt.Errorf("member %s (%s) may not %s run %s: only its submitter, %s, may", who.Name, who.Role, op, s.runID, s.owner))
	}
	return nil
}

func requester(m Member) loop.Requester {
	return loop.Requester{Name: m.Name, Role: string(m.Role), Key: m.Key}
}

// do records that who asked for op through via, then does it.
func (s *ctlServer) do(who Member, op, via string) error {
	if err := s.mayControl(who, op); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	if err := s.c.RecordRequest(ctx, op, via, requester(who)); err != nil {
		return fmt.Errorf("run %s: %w", s.runID, err)
	}
	switch op {
	case OpPause:
		s.c.Pause()
	case OpResume:
		s.c.Resume()
	case OpSkip:
		s.c.SkipIteration()
	case OpAbort:
		s.c.Abort()
	}
	return nil
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
func Control(ctx context.Context, nc *nats.Conn, signer *Signer, runID, op string) error {
	switch op {
	case OpPause, OpResume, OpSkip, OpAbort:
	default:
		return fmt.Errorf("%q is not a control; use pause, resume, skip or abort", op)
	}
	reply, err := request(ctx, nc, signer, runID, op)
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
func request(ctx context.Context, nc *nats.Conn, signer *Signer, runID, body string) (string, error) {
	if signer == nil {
		return "", errors.New("a control must be signed by a fleet member; pass --creds FILE")
	}
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
	msg := &nats.Msg{Subject: subject, Data: []byte(body)}
	if err := signer.Sign(msg); err != nil {
		return "", err
	}
	m, err := nc.RequestMsgWithContext(ctx, msg)
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
	if err := answerError(reply); err != nil {
		return "", err
	}
	return reply, nil
}
