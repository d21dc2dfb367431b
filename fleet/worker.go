package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/serve"
)

// WorkerOptions configure RunWorker.
type WorkerOptions struct {
	NC *nats.Conn
	// Signer signs as the worker's fleet member: the chain key's
	// certificate is asked for with it (certify.go).
	Signer  *Signer
	Handles *Handles // from Ensure
	// ID names this worker in run states and the workers bucket; "" is
	// <host>-<pid>.
	ID string
	// Slots is how many runs the worker drives at once (default 1).
	Slots int
	// Dir holds each run's workspace and store: Dir/runs/<run-id>/{ws,store}.
	Dir string
	// AckWait is how long the worker may go silent before its jobs go to
	// another worker; it heartbeats every AckWait/3 (default 30s).
	AckWait time.Duration
	// Start builds the run a job describes (the cli wires config, provider,
	// engine and runner); it must not start it.
	Start func(ctx context.Context, spec RunSpec) (RunHandle, error)
	// GiveUpAfter is how many deliveries a job that no worker can take (its
	// agent CLI is missing everywhere, its chain cannot be read) gets before
	// it is recorded failed (default 20).
	GiveUpAfter int
	// RetryDelay is how long such a job waits before it is delivered
	// again (default 2s).
	RetryDelay time.Duration
	// StopGrace bounds a stopping worker's closing steps once a run has
	// paused (flush its chain, record it handed back): a worker told to
	// stop while NATS is out of reach still exits, and the job comes back
	// after AckWait (default 15s).
	StopGrace time.Duration
	// Policy is this worker's ceiling: every job's config is held to it
	// before anything of the job runs, and a job that needs more is
	// recorded failed with the reason. nil is the default policy: no
	// shell.exec, no program, no agent.
	Policy *config.WorkerPolicy
	Logger *slog.Logger // nil: slog.Default()
}

// RunSpec is one attempt at a run, as the worker prepared it.
type RunSpec struct {
	Job Job
	// StoreDir is the run's store: empty for a new run, the chain rebuilt
	// from the stream for a resumed one (Resume).
	StoreDir string
	// Workdir is the run's workspace; the job's config is read as if it
	// were Workdir/Job.ConfigPath, so its relative paths name files there.
	Workdir string
	Resume  bool
	// OnIterationEnd commits the workspace after each iteration (nil when
	// the job has no workspace): the runner's RunnerOptions.OnIterationEnd.
	OnIterationEnd func(ctx context.Context, iteration int) (map[string]rtfs.Value, error)
	// Policy is the worker's (WorkerOptions.Policy): Start applies it to
	// the job's config (config.WorkerPolicy.Apply), so the run gets the
	// smaller governance of the two.
	Policy *config.WorkerPolicy
	Logger *slog.Logger
}

// RunHandle is a built run: *loop.Runner's controls and event bus, its
// store, and Close, which releases what Start opened (the store).
type RunHandle interface {
	serve.Runner
	RecordRequest(ctx context.Context, op, via string, by loop.Requester) error
	Run(ctx context.Context) (*loop.Outcome, error)
	Store() *ledger.Store
	Close() error
}

// BadJobError is a Start error of the job itself (its config, a file it
// names): no worker can run it, so the run is recorded failed at once.
type BadJobError struct{ Err error }

func (e *BadJobError) Error() string { return e.Err.Error() }
func (e *BadJobError) Unwrap() error { return e.Err }

// MissingAgentError is a Start error of a job whose agent CLI this worker
// does not have: the job goes back to the queue for a worker that has it.
type MissingAgentError struct {
	CLI string
	Err error
}

func (e *MissingAgentError) Error() string {
	return fmt.Sprintf("this worker has no agent CLI %q: %v", e.CLI, e.Err)
}
func (e *MissingAgentError) Unwrap() error { return e.Err }

// worker is one RunWorker: its options and the runs it drives.
type worker struct {
	o   WorkerOptions
	log *slog.Logger
	// fleetKey certifies the chain keys of the segments the worker
	// rebuilds runs from; certs are its own keys' certificates.
	fleetKey string
	certs    certCache

	mu   sync.Mutex
	runs []string // the run ids it drives now, for its WorkerState
}

// defaults fills in the options left zero.
func (o *WorkerOptions) defaults() {
	if o.Slots < 1 {
		o.Slots = 1
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultConfig().AckWait
	}
	if o.GiveUpAfter < 1 {
		o.GiveUpAfter = 20
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 15 * time.Second
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 2 * time.Second
	}
	if o.ID == "" {
		host, _ := os.Hostname() // "" names the worker by its pid alone
		o.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
}

// RunWorker pulls jobs and runs up to o.Slots of them at once until ctx
// ends. Each job is acked only once its run has ended (the closing action
// replicated, the final state recorded); while it goes on the worker
// heartbeats it. When ctx ends (SIGTERM) every run is paused after its
// current call, its chain flushed to the stream, its state set handed-back
// and its job given back to the queue; then RunWorker returns nil.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	if o.NC == nil || o.Handles == nil || o.Start == nil || o.Dir == "" || o.Signer == nil {
		return errors.New("a worker needs a NATS connection, the fleet's handles, a Start function, a directory and its member's signer")
	}
	o.defaults()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	roster, err := FetchRoster(rctx, o.NC)
	cancel()
	if err != nil {
		return fmt.Errorf("the worker cannot learn the fleet's key: %w", err)
	}
	if m, ok := roster.Member(o.Signer.Key()); !ok || m.Role != RoleWorker {
		return fmt.Errorf("the credentials the worker signs with (key %s) are not a worker's of this fleet; pass --creds FILE with a worker's credentials", shortKey(o.Signer.Key()))
	}
	if o.Handles.Nonces == nil {
		kv, err := o.Handles.JS.KeyValue(ctx, BucketNonces)
		if err != nil {
			return fmt.Errorf("the fleet has no bucket %s (%v): the fleet's keeper makes it; run the keeper of this ralph version (`ralph fleet serve` or `ralph fleet keeper`)", BucketNonces, err)
		}
		h := *o.Handles
		h.Nonces = kv
		o.Handles = &h
	}
	w := &worker{o: o, log: o.Logger, fleetKey: roster.FleetKey}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.log = w.log.With("worker", o.ID)
	cons, err := WorkerConsumer(ctx, o.Handles.Jobs, o.AckWait)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return fmt.Errorf("worker directory %s: %w; pass another --dir", o.Dir, err)
	}
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	var beats sync.WaitGroup
	beats.Go(func() { w.heartbeat(beatCtx) })
	defer func() { stopBeat(); beats.Wait() }()

	var jobs sync.WaitGroup
	defer jobs.Wait() // every job has ended or been handed back
	slots := make(chan struct{}, o.Slots)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		msg, err := w.next(ctx, cons)
		if msg == nil {
			<-slots
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		jobs.Go(func() {
			defer func() { <-slots }()
			w.job(ctx, msg)
		})
	}
}

// next waits for the next job; a nil message with a nil error means none
// came (or ctx ended). A closed connection is the worker's end.
func (w *worker) next(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := cons.Next(jetstream.FetchContext(fctx))
	switch {
	case err == nil && ctx.Err() != nil: // taken as the worker stops: straight back
		if nerr := msg.Nak(); nerr != nil {
			w.log.Warn("could not give a job back; it is redelivered after the ack wait", "err", nerr)
		}
		return nil, nil
	case err == nil:
		return msg, nil
	case errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrConnectionClosed):
		return nil, fmt.Errorf("the NATS connection closed: %w", err)
	case ctx.Err() != nil || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrNoMessages):
		return nil, nil
	}
	w.log.Warn("fetching a job failed; trying again", "err", err)
	select { // a server that is electing a leader or restarting: do not spin
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	return nil, nil
}

// heartbeat puts the worker's state every AckWait/3 (sooner when the
// workers bucket forgets entries sooner) until ctx ends.
func (w *worker) heartbeat(ctx context.Context) {
	host, _ := os.Hostname() // an unknown host is shown empty
	every := w.o.AckWait / 3
	if st, err := w.o.Handles.Workers.Status(ctx); err == nil && st.TTL() > 0 && st.TTL()/3 < every {
		every = st.TTL() / 3
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.mu.Lock()
		runs := slices.Clone(w.runs)
		w.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, every)
		err := PutWorker(pctx, w.o.Handles.Workers, WorkerState{ID: w.o.ID, Host: host, Slots: w.o.Slots, Runs: runs,
			Heartbeat: time.Now().UTC(), PID: os.Getpid()})
		cancel()
		if err != nil && ctx.Err() == nil {
			w.log.Warn("worker heartbeat not recorded", "err", err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// track adds runID to the runs the worker drives (on) or removes it; it
// returns false when runID is to be added and is already there.
func (w *worker) track(runID string, on bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !on {
		w.runs = slices.DeleteFunc(w.runs, func(id string) bool { return id == runID })
		return true
	}
	if slices.Contains(w.runs, runID) {
		return false
	}
	w.runs = append(w.runs, runID)
	return true
}
