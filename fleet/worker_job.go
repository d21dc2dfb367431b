package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// settle is what becomes of a job's message once this worker is done with it.
type settle int

const (
	settleAck   settle = iota // the run ended: remove the job
	settleNak                 // handed back: deliver it again at once
	settleRetry               // this worker cannot run it now: deliver it again after RetryDelay
	settleTerm                // recorded failed: never deliver it again
	settleNone                // another worker owns the run: leave the message alone
)

// jobRun is one delivery of a job on this worker.
type jobRun struct {
	w          *worker
	msg        jetstream.Msg
	job        Job
	deliveries int
	state      RunState // the run's state as this attempt last recorded it
	log        *slog.Logger
	dir        string                     // <worker dir>/runs/<run-id>
	repl       atomic.Pointer[Replicator] // the run's replication, once it started
	stopRun    context.CancelCauseFunc    // cancels the run's context (set before it starts)
	skipBase   uint64                     // state.ChainSkipped before this attempt's replication began
}

// noteReplSkipped puts on the run's state the messages the replication
// skipped so far.
func (j *jobRun) noteReplSkipped(repl *Replicator) {
	n, note := repl.Skipped()
	if n == 0 {
		return
	}
	j.state.ChainSkipped = j.skipBase + n
	if j.state.ChainNote == "" {
		j.state.ChainNote = note
	}
}

// job runs one delivered job to its end, or hands it back, and settles its
// message accordingly.
func (w *worker) job(ctx context.Context, msg jetstream.Msg) {
	bg := context.WithoutCancel(ctx) // the closing steps outlive a SIGTERM
	if err := checkJob(w.fleetKey, msg.Data(), msg.Headers().Get(HeaderJobSig)); err != nil {
		// Not the keeper's: nothing of it runs, and nothing is recorded on
		// the run it names (it may name a real run to disturb it).
		w.log.Error("a message on the job queue is refused; it is removed", "err", err)
		if terr := msg.TermWithReason("refused: " + err.Error()); terr != nil {
			w.log.Warn("could not remove the message", "err", terr)
		}
		return
	}
	job, err := ParseJob(msg.Data())
	if err != nil {
		w.log.Error("a message on the job queue is not a job; it is removed", "err", err)
		if terr := msg.TermWithReason(err.Error()); terr != nil {
			w.log.Warn("could not remove the message", "err", terr)
		}
		return
	}
	j := &jobRun{w: w, msg: msg, job: job, deliveries: 1, log: w.log.With("run", job.RunID),
		dir: filepath.Join(w.o.Dir, "runs", job.RunID)}
	if md, err := msg.Metadata(); err == nil {
		j.deliveries = int(md.NumDelivered)
	}
	if !w.track(job.RunID, true) {
		// Delivered again while this worker still drives it (its heartbeats
		// did not arrive): the run's directory is in use. The delivery waits;
		// the attempt here goes on, or another worker takes the run over and
		// fences it.
		j.log.Warn("the job came back while this worker still runs it; it waits for the attempt here to end")
		if err := msg.NakWithDelay(w.o.RetryDelay); err != nil {
			j.log.Warn("could not put the job back", "err", err)
		}
		return
	}
	defer w.track(job.RunID, false)
	beatCtx, stopBeat := context.WithCancel(bg)
	beat := make(chan struct{})
	go func() { defer close(beat); j.keepAlive(beatCtx) }()
	s := j.run(ctx)
	stopBeat()
	<-beat
	j.settle(bg, s)
	// What the run left here is in the fleet now (its chain in the stream,
	// its commits on its branch) or is redone from there by the next
	// attempt: the directory goes, so a long-lived worker does not fill its
	// disk with one store per run.
	if err := os.RemoveAll(j.dir); err != nil {
		j.log.Warn("could not remove the run's directory", "dir", j.dir, "err", err)
	}
}

// keepAlive tells the server every AckWait/3 that the job is in progress.
func (j *jobRun) keepAlive(ctx context.Context) {
	t := time.NewTicker(j.w.o.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := j.msg.InProgress(); err != nil {
				j.log.Warn("job heartbeat not sent; the job may go to another worker", "err", err)
			}
		case <-ctx.Done():
			return
		}
	}
}

func (j *jobRun) settle(ctx context.Context, s settle) {
	var err error
	switch s {
	case settleAck:
		actx, cancel := context.WithTimeout(ctx, j.w.o.AckWait)
		err = j.msg.DoubleAck(actx)
		cancel()
	case settleNak:
		err = j.msg.Nak()
	case settleRetry:
		err = j.msg.NakWithDelay(j.w.o.RetryDelay)
	case settleTerm:
		err = j.msg.TermWithReason(j.state.Error)
	case settleNone:
		return
	}
	if err != nil {
		j.log.Warn("could not settle the job; it is delivered again after the ack wait", "err", err)
	}
}

// admit reads the run's state into j.state and holds the job to this
// worker: its config to the worker's policy, its agent CLI to this
// worker's PATH. When it does not admit the job (ok false), s settles it.
func (j *jobRun) admit(bg context.Context) (s settle, ok bool) {
	runID := j.job.RunID
	cur, found, err := GetState(bg, j.w.o.Handles.Runs, runID)
	if err != nil {
		j.log.Warn("cannot read the run's state; the job goes back to the queue", "err", err)
		return settleRetry, false
	}
	if found && Final(cur.State) {
		return settleAck, false // the run ended on a worker that died before it acked the job
	}
	if !found {
		cur = RunState{RunID: runID, State: StateQueued, Workspace: j.job.Workspace, Submitted: j.job.Submitted}
	}
	if cur.SubmittedBy == "" {
		cur.SubmittedBy = j.job.SubmittedBy
	}
	// A config that does not parse fails when the run is built; one that
	// does is held to the worker's policy before anything of it runs.
	cfg, cfgErr := config.Parse([]byte(j.job.Config), DefaultConfigPath, func(string) string { return "" })
	if cur.Goal == "" && cfgErr == nil { // for the fleet's views
		cur.Goal = cfg.Intent.Goal
	}
	j.state = cur
	j.state.Worker, j.state.Deliveries = j.w.o.ID, j.deliveries
	if cfgErr == nil {
		if err := ApplyPolicy(j.w.o.Policy, cfg, j.job.Workspace); err != nil {
			return j.fail(bg, err), false
		}
	}
	if a := j.job.Agent; a != "" && a != agent.Auto && !agent.TakesCommand(a) {
		if _, err := exec.LookPath(a); err != nil {
			return j.retry(bg, fmt.Errorf("worker %s has no agent CLI %q on its PATH; install it there, or run a worker that has it", j.w.o.ID, a)), false
		}
	}
	return 0, true
}

// run drives the job's run on this worker.
func (j *jobRun) run(ctx context.Context) settle {
	bg := context.WithoutCancel(ctx)
	if s, ok := j.admit(bg); !ok {
		return s
	}
	runID := j.job.RunID
	p, s, ok := j.prepare(ctx)
	if !ok {
		return s
	}
	if ctx.Err() != nil { // stopping: nothing has run here yet
		return j.handBack(bg, nil)
	}
	spec := RunSpec{Job: j.job, StoreDir: p.storeDir, Workdir: p.wsDir, Resume: p.resume, Policy: j.w.o.Policy, Logger: j.log}
	if p.ws != nil {
		spec.OnIterationEnd = j.commitEach(ctx, p.ws)
		j.state.Branch = p.ws.Branch
	}
	h, err := j.w.o.Start(bg, spec)
	if err != nil {
		return j.startFailed(bg, err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			j.log.Warn("closing the run's store", "err", err)
		}
	}()
	j.skipBase = j.state.ChainSkipped
	cert, err := j.w.certs.get(bg, j.w.o.NC, j.w.o.Signer, h.Store().VerifierKeyString())
	if err != nil {
		return j.retry(bg, fmt.Errorf("worker %s: %w", j.w.o.ID, err))
	}
	repl, err := Replicate(bg, j.w.o.Handles.JS, h.Store(), runID, p.fromSeq, p.lastStreamSeq, WithSkipHook(func(note string) {
		j.log.Warn("a message on the run's chain subject is not part of its chain; it is skipped", "why", note)
	}), WithCertificate(cert))
	if err != nil {
		return j.retry(bg, fmt.Errorf("worker %s cannot replicate the run's chain: %w", j.w.o.ID, err))
	}
	j.state.State, j.state.Error = StateRunning, ""
	j.state.Iteration, j.state.CostUSD, j.state.Tokens = p.tally.iteration, p.tally.cost, p.tally.tokens
	if j.state.Started.IsZero() {
		j.state.Started = time.Now().UTC()
	}
	j.repl.Store(repl)
	if err := j.put(bg); err != nil {
		j.closeRepl(bg, repl)
		return j.lost(err)
	}
	return j.drive(ctx, h, repl, p)
}

// commitEach is the run's OnIterationEnd: each iteration's changes are
// committed and pushed to the run's branch once its chain is in the
// stream, so a worker that has lost the run pushes nothing over the new
// owner's branch. While NATS does not answer the iteration waits here; a
// worker fenced meanwhile stops the run (drive), which ends this wait, and
// a worker told to stop (stop ends) waits StopGrace more, then hands the
// run back with the iteration uncommitted.
func (j *jobRun) commitEach(stop context.Context, ws *Workspace) func(ctx context.Context, iteration int) (map[string]rtfs.Value, error) {
	return func(ctx context.Context, iteration int) (map[string]rtfs.Value, error) {
		repl := j.repl.Load() // set before the run started
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(stop, func() { time.AfterFunc(j.w.o.StopGrace, cancel) })()
		if err := repl.Flush(fctx); err != nil {
			switch {
			case repl.Err() != nil: // lost for good (fenced): the run stops here at once, recording nothing more
				j.stopRun(&loop.Cancelled{By: loop.CancelHandBack, Reason: "replication stopped: " + err.Error()})
			case stop.Err() != nil:
				j.stopRun(&loop.Cancelled{By: loop.CancelHandBack, Reason: "the worker stopped before the iteration's chain reached the stream"})
			}
			return nil, fmt.Errorf("iteration %d is not committed to the workspace: its chain is not in the fleet's stream: %w", iteration, err)
		}
		sha, err := ws.Commit(ctx, iteration)
		if err != nil {
			return nil, err
		}
		return map[string]rtfs.Value{"commit": rtfs.String(sha), "branch": rtfs.String(ws.Branch)}, nil
	}
}

// startFailed settles a job whose run could not be built: a bad job fails,
// anything else waits for another try (here or on another worker).
func (j *jobRun) startFailed(ctx context.Context, err error) settle {
	var bad *BadJobError
	var noAgent *MissingAgentError
	switch {
	case errors.As(err, &noAgent):
		return j.retry(ctx, err)
	case errors.As(err, &bad):
		return j.fail(ctx, err)
	}
	return j.retry(ctx, fmt.Errorf("worker %s could not start the run: %w", j.w.o.ID, err))
}

// prepared is a run made ready on this worker: its store and workspace.
type prepared struct {
	storeDir, wsDir        string
	ws                     *Workspace // nil: the job has no workspace
	resume                 bool
	fromSeq, lastStreamSeq uint64 // replication goes on from here
	tally                  tally  // what the chain counted so far
}

// prepare makes the run's directory afresh: the run's store rebuilt from
// the stream when the stream holds its chain, and its workspace at the
// commit the last completed iteration recorded. ok false: s settles it.
func (j *jobRun) prepare(ctx context.Context) (p prepared, s settle, ok bool) {
	bg := context.WithoutCancel(ctx)
	runID := j.job.RunID
	p = prepared{storeDir: filepath.Join(j.dir, "store"), wsDir: filepath.Join(j.dir, "ws"), fromSeq: 1}
	// What an earlier attempt left here is stale: the stream is the truth.
	if err := os.RemoveAll(j.dir); err != nil {
		return p, j.retry(bg, fmt.Errorf("worker %s cannot clear %s: %w", j.w.o.ID, j.dir, err)), false
	}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return p, j.retry(bg, fmt.Errorf("worker %s cannot make %s: %w", j.w.o.ID, j.dir, err)), false
	}
	commit := ""
	_, err := j.w.o.Handles.Chains.GetLastMsgForSubject(bg, ChainSubject(runID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound): // a new run
	case err != nil:
		return p, j.retry(bg, fmt.Errorf("worker %s cannot read the run's chain from stream %s: %w", j.w.o.ID, StreamChains, err)), false
	default:
		var ended *ledger.Action
		p.resume = true
		commit, p.fromSeq, p.lastStreamSeq, p.tally, ended, err = j.rebuild(bg, p.storeDir)
		var endLine *chainEndedError
		switch {
		case errors.Is(err, ErrNoChain): // garbage only: a new run, after it
			p.resume, p.fromSeq, p.tally = false, 1, tally{}
		case errors.As(err, &endLine): // the run ended: it is never resumed
			return p, j.fail(bg, err), false
		case err != nil:
			return p, j.retry(bg, err), false
		}
		if ended != nil { // the run ended; its worker died before recording it
			return p, j.finalFromChain(bg, ended, p.tally), false
		}
	}
	if j.job.Workspace == "" {
		if err := os.Mkdir(p.wsDir, 0o700); err != nil {
			return p, j.retry(bg, fmt.Errorf("worker %s cannot make %s: %w", j.w.o.ID, p.wsDir, err)), false
		}
		return p, 0, true
	}
	ws, err := PrepareWorkspace(ctx, j.job.Workspace, j.job.Ref, p.wsDir, runID, commit)
	if err != nil {
		if ctx.Err() != nil {
			return p, j.handBack(bg, nil), false
		}
		return p, j.fail(bg, fmt.Errorf("the run's workspace cannot be made: %w", err)), false
	}
	p.ws = ws
	return p, 0, true
}

// rebuild imports the run's chain from the stream into a new store at dir,
// verified, and rebuilds the store's run record and kv from it.
func (j *jobRun) rebuild(ctx context.Context, dir string) (commit string, fromSeq, lastStreamSeq uint64, t tally, ended *ledger.Action, err error) {
	runID := j.job.RunID
	st, info, err := RebuildStore(ctx, j.w.o.Handles.JS, runID, ledger.Options{Dir: dir, SyncWrites: true}, nil, WithFleetKey(j.w.fleetKey))
	if errors.Is(err, ErrNoChain) {
		j.noteSkipped(info.Skipped, info.SkipNotes)
		return "", 1, info.LastStreamSeq, t, nil, err
	}
	if err != nil {
		return "", 0, 0, t, nil, fmt.Errorf("the run's chain in stream %s does not rebuild: %w", StreamChains, err)
	}
	defer st.Close()
	if info.Skipped > 0 {
		j.noteSkipped(info.Skipped, info.SkipNotes)
	}
	acts, err := st.ByRun(runID)
	if err != nil {
		return "", 0, 0, t, nil, fmt.Errorf("read the rebuilt chain: %w", err)
	}
	for i := range acts {
		t.add(&acts[i])
		if loop.IsRunEnd(acts[i].Type) {
			ended = &acts[i]
		}
	}
	if ended == nil && info.Ended {
		return "", 0, 0, t, nil, &chainEndedError{fmt.Sprintf("the run's chain in stream %s has its end line after action %d but no closing action: the run ended there and is not resumed", StreamChains, info.Actions)}
	}
	if ended == nil {
		if err := loop.RebuildKV(ctx, st, runID); err != nil {
			return "", 0, 0, t, nil, fmt.Errorf("rebuild the run's records from its chain: %w", err)
		}
	}
	return loop.LastCommit(acts), st.Head().Seq + 1, info.LastStreamSeq, t, ended, st.Close()
}

// chainEndedError is rebuild's error for a chain that has its end line but
// no action closing the run: nothing may follow an end line, so the run
// is not resumed.
type chainEndedError struct{ msg string }

func (e *chainEndedError) Error() string { return e.msg }

// noteSkipped reports messages on the run's chain subject that are not
// part of its chain: in the worker's log and on the run's state.
func (j *jobRun) noteSkipped(n uint64, notes []string) {
	first := ""
	if len(notes) > 0 {
		first = notes[0]
	}
	j.log.Warn("messages on the run's chain subject are not part of its chain; they are skipped", "skipped", n, "first", first)
	j.state.ChainSkipped, j.state.ChainNote = n, first
}

// finalFromChain records the final state of a run whose closing action is
// in the stream already, and removes its job.
func (j *jobRun) finalFromChain(ctx context.Context, end *ledger.Action, t tally) settle {
	j.state.Iteration, j.state.CostUSD, j.state.Tokens = t.iteration, t.cost, t.tokens
	j.state.Class = end.Metadata["class"].Str()
	j.state.State = finalState(stop.Class(j.state.Class))
	j.state.Condition, j.state.Reason = end.Metadata["condition"].Str(), end.Metadata["reason"].Str()
	if err := j.put(ctx); err != nil {
		return j.lost(err)
	}
	return settleAck
}

// finalState is the run state of a run that stopped with class c.
func finalState(c stop.Class) string {
	switch c {
	case stop.ClassSuccess:
		return StateSucceeded
	case stop.ClassLimit:
		return StateLimit
	case stop.ClassAbort:
		return StateAborted
	}
	return StateFailed
}

// put records j.state; an error wrapping ErrStale or ErrRunEnded means
// another worker has the run.
func (j *jobRun) put(ctx context.Context) error {
	j.state.Updated = time.Now().UTC()
	pctx, cancel := context.WithTimeout(ctx, j.w.o.AckWait)
	defer cancel()
	return PutState(pctx, j.w.o.Handles.Runs, j.state)
}

// lost settles a job whose state could not be recorded: another worker has
// the run (leave its message alone), or the bucket did not answer.
func (j *jobRun) lost(err error) settle {
	if errors.Is(err, ErrStale) || errors.Is(err, ErrRunEnded) {
		j.log.Warn("another worker has the run; this worker lets it go", "err", err)
		return settleNone
	}
	j.log.Warn("the run's state could not be recorded; the job goes back to the queue", "err", err)
	return settleRetry
}

// retry records why this worker cannot run the job now and sends the job
// back to the queue; after GiveUpAfter deliveries the run is failed.
func (j *jobRun) retry(ctx context.Context, why error) settle {
	if j.deliveries >= j.w.o.GiveUpAfter {
		return j.fail(ctx, fmt.Errorf("%w (given up after %d deliveries)", why, j.deliveries))
	}
	j.log.Warn("the job goes back to the queue", "why", why)
	if j.state.State == StateRunning {
		j.state.State = StateHandedBack
	}
	j.state.Error = why.Error()
	if err := j.put(ctx); err != nil && (errors.Is(err, ErrStale) || errors.Is(err, ErrRunEnded)) {
		return j.lost(err)
	}
	return settleRetry
}

// fail records the run failed for why and removes its job.
func (j *jobRun) fail(ctx context.Context, why error) settle {
	j.log.Error("the run failed", "err", why)
	j.state.State, j.state.Error = StateFailed, why.Error()
	if j.state.Class == "" {
		j.state.Class, j.state.Condition, j.state.Reason = string(stop.ClassFailure), "worker", why.Error()
	}
	if err := j.put(ctx); err != nil {
		if errors.Is(err, ErrStale) || errors.Is(err, ErrRunEnded) {
			return j.lost(err)
		}
		j.log.Warn("the failure could not be recorded; the job goes back to the queue", "err", err)
		return settleRetry
	}
	return settleTerm
}

// handBack records the run handed back (err: why, when it is not the
// worker stopping) and gives its job back to the queue at once.
func (j *jobRun) handBack(ctx context.Context, why error) settle {
	j.state.State, j.state.Error = StateHandedBack, ""
	if why != nil {
		j.state.Error = why.Error()
	}
	if err := j.put(ctx); err != nil && (errors.Is(err, ErrStale) || errors.Is(err, ErrRunEnded)) {
		return j.lost(err)
	}
	return settleNak
}

// tally counts a run's iterations, cost and tokens from its chain, as the
// runner does: an iteration an account limit stopped is spent, not counted.
type tally struct {
	iteration int
	cost      float64
	tokens    int64
}

func (t *tally) add(a *ledger.Action) bool {
	if a.Type != ledger.IterationCompleted {
		return false
	}
	t.cost += a.Cost
	if m := a.Result.AsMap(); m != nil {
		t.tokens += m.GetKey("tokens").AsInt()
	}
	if ledger.StatusOf(a) != ledger.StatusUsageLimit {
		t.iteration = int(a.Metadata["iteration"].AsInt())
	}
	return true
}
