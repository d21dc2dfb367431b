package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/serve"
)

// workerPlan charges once per iteration behind an idempotency key, writes a
// file into the workspace, then runs test.slow (which a test may hold).
const workerPlan = `[model]
provider = "static"
[plan]
rtfs = '''
(do
  (step "Charge" ^{:idempotency {:key (str "charge-" (:iteration ctx)) :scope :intent}}
    (call :test.charge {:iteration (:iteration ctx)}))
  (step "Write" (call :fs.write {:path (str "it-" (:iteration ctx) ".txt") :content "done"}))
  (step "Slow" (call :test.slow {:iteration (:iteration ctx)})))
'''
`

func limitJob(max int) string {
	return workerPlan + fmt.Sprintf("[[stop]]\nname = \"enough\"\nkind = \"max_iterations\"\nmax = %d\n", max)
}

func successJob(n int) string {
	return workerPlan + fmt.Sprintf("[[stop]]\nname = \"charged\"\nkind = \"predicate\"\nrtfs = '(>= (audit.count \"Charge\" :succeeded) %d)'\n", n)
}

// fleetFixture is one NATS node with the fleet's streams, a bare git
// remote, and the test capabilities' shared record of what ran.
type fleetFixture struct {
	t    *testing.T
	url  string
	bare string

	mu      sync.Mutex
	charges map[string]int // run/iteration → test.charge calls, across workers
	// hold, when set for a worker id, is where that worker's test.slow
	// blocks (reporting on holding first) until hold is closed.
	hold    map[string]chan struct{}
	holding chan string
	dirs    []string // the workers' directories
	// releases end every hold; a worker's stop calls them first.
	releases []func()
	runners  map[string]*loop.Runner // the last runner started for each run id
}

func newFleetFixture(t *testing.T) *fleetFixture {
	t.Helper()
	gitHome(t)
	bare, _ := sharedRemote(t)
	srv, err := startTestServer(ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return &fleetFixture{t: t, url: srv.ClientURL(), bare: bare, charges: map[string]int{}, hold: map[string]chan struct{}{},
		holding: make(chan string, 16)}
}

// connect is a fresh connection and the fleet's handles over it.
func (fx *fleetFixture) connect(opts ...nats.Option) (*nats.Conn, *Handles) {
	fx.t.Helper()
	nc, err := connectAs(fx.url, RoleWorker, opts...)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		fx.t.Fatal(err)
	}
	h, err := Ensure(ctxT(fx.t), js, DefaultConfig())
	if err != nil {
		fx.t.Fatal(err)
	}
	return nc, h
}

// submit queues a job on the fixture's remote and returns its run id.
func (fx *fleetFixture) submit(h *Handles, cfg string) string {
	fx.t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	if err := submitJob(ctxT(fx.t), fx.t, h, Job{RunID: id, Config: cfg, ConfigPath: DefaultConfigPath, Workspace: fx.bare, Ref: "main"}); err != nil {
		fx.t.Fatal(err)
	}
	return id
}

// worker runs a worker until the returned stop is called; stop returns
// RunWorker's error.
func (fx *fleetFixture) worker(id string, slots int, ackWait time.Duration, nc *nats.Conn, h *Handles) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	dir := fx.t.TempDir()
	fx.mu.Lock()
	fx.dirs = append(fx.dirs, dir)
	fx.mu.Unlock()
	signer := signerOf(fx.t, nc, RoleWorker)
	go func() {
		done <- RunWorker(ctx, WorkerOptions{NC: nc, Signer: signer, Handles: h, ID: id, Slots: slots, Dir: dir, AckWait: ackWait,
			Start: fx.start(id), GiveUpAfter: 3, RetryDelay: 100 * time.Millisecond})
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			fx.mu.Lock()
			releases := slices.Clone(fx.releases)
			fx.mu.Unlock()
			if fx.t.Failed() { // a held call would keep the hand-back waiting
				for _, r := range releases {
					r()
				}
			}
			cancel()
			err = <-done
		})
		return err
	}
	fx.t.Cleanup(func() { _ = stop() })
	return stop
}

// start builds a run as the cli does (assemble.NewRun), with the test
// capabilities beside the built-ins.
func (fx *fleetFixture) start(workerID string) func(context.Context, RunSpec) (RunHandle, error) {
	return func(ctx context.Context, spec RunSpec) (RunHandle, error) {
		cfg, err := config.Parse([]byte(spec.Job.Config), filepath.Join(spec.Workdir, spec.Job.ConfigPath), func(string) string { return "" })
		if err != nil {
			return nil, &BadJobError{Err: err}
		}
		run, err := assemble.NewRun(ctx, cfg, assemble.RunOptions{Dir: spec.StoreDir, RunID: spec.Job.RunID, Resume: spec.Resume,
			Open: func() (*ledger.Store, error) { return ledger.Open(ledger.Options{Dir: spec.StoreDir}) },
			EngineOptions: assemble.EngineOptions{Capabilities: func(reg *capability.Registry) error {
				fx.testCaps(reg, workerID, spec.Job.RunID)
				return nil
			}}})
		var bad *assemble.ConfigError
		if errors.As(err, &bad) {
			return nil, &BadJobError{Err: err}
		}
		if err != nil {
			return nil, err
		}
		run.Options.OnIterationEnd, run.Options.Logger = spec.OnIterationEnd, spec.Logger
		r, err := run.NewRunner()
		if err != nil {
			run.Discard()
			return nil, &BadJobError{Err: err}
		}
		fx.mu.Lock()
		if fx.runners == nil {
			fx.runners = map[string]*loop.Runner{}
		}
		fx.runners[spec.Job.RunID] = r
		fx.mu.Unlock()
		return testRun{r, run.Store}, nil
	}
}

type testRun struct {
	*loop.Runner
	st *ledger.Store
}

func (r testRun) Store() *ledger.Store { return r.st }
func (r testRun) Close() error         { return r.st.Close() }

func (fx *fleetFixture) testCaps(reg *capability.Registry, workerID, runID string) {
	add := func(id string, fn func(ctx context.Context, in rtfs.Value) error) {
		err := reg.Register(&capability.Capability{
			Spec: &capability.Spec{ID: id, Version: "1", Input: rtfs.MustParseType(":any"), Risk: capability.RiskLow},
			Handler: func(ctx context.Context, in rtfs.Value) (capability.Result, error) {
				return capability.Result{Value: rtfs.True, Cost: 0.01}, fn(ctx, in)
			},
		})
		if err != nil {
			fx.t.Fatal(err)
		}
	}
	add("test.charge", func(_ context.Context, in rtfs.Value) error {
		fx.mu.Lock()
		defer fx.mu.Unlock()
		fx.charges[fmt.Sprintf("%s/%d", runID, in.AsMap().GetKey("iteration").AsInt())]++
		return nil
	})
	add("test.slow", func(ctx context.Context, in rtfs.Value) error {
		fx.mu.Lock()
		hold := fx.hold[workerID]
		fx.mu.Unlock()
		if hold == nil {
			return nil
		}
		fx.holding <- fmt.Sprintf("%s/%d", workerID, in.AsMap().GetKey("iteration").AsInt())
		select {
		case <-hold:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}

// pauseRequested reports whether the last runner started for runID has
// been asked to pause (a stopping worker asks before it hands the run back).
func (fx *fleetFixture) pauseRequested(runID string) bool {
	fx.mu.Lock()
	r := fx.runners[runID]
	fx.mu.Unlock()
	return r != nil && r.Paused()
}

// holdWorker makes worker id's test.slow block until release is called;
// the test's end releases it too, so a failed test never leaves a worker
// waiting for a pause that a held call keeps from coming.
func (fx *fleetFixture) holdWorker(id string) (release func()) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	c := make(chan struct{})
	fx.hold[id] = c
	var once sync.Once
	release = func() { once.Do(func() { close(c) }) }
	fx.releases = append(fx.releases, release)
	return release
}

// waitState polls the run's state until done says it is what the test
// waits for.
func waitState(t *testing.T, h *Handles, runID string, what string, done func(RunState) bool) RunState {
	t.Helper()
	var s RunState
	eventually.NoError(t, fmt.Sprintf("run %s: no %s", runID, what), func() error {
		var found bool
		var err error
		if s, found, err = GetState(context.Background(), h.Runs, runID); err != nil || found && done(s) {
			return err
		}
		return fmt.Errorf("last state %+v", s)
	})
	return s
}

// streamChain rebuilds the run's chain from the stream into memory,
// verifying it, and returns its actions.
func streamChain(t *testing.T, h *Handles, runID string) ([]ledger.Action, ChainInfo) {
	t.Helper()
	st, info, err := RebuildStore(ctxT(t), h.JS, runID, ledger.Options{InMemory: true}, nil)
	if err != nil {
		t.Fatalf("the chain of run %s in the stream: %v", runID, err)
	}
	defer st.Close()
	acts, err := st.ByRun(runID)
	if err != nil {
		t.Fatal(err)
	}
	return acts, info
}

func countType(acts []ledger.Action, typ ledger.ActionType) int {
	n := 0
	for _, a := range acts {
		if a.Type == typ {
			n++
		}
	}
	return n
}

// checkRun checks a finished run: its chain in the stream verifies and has
// its closing action, each iteration charged exactly once, and its branch
// one commit per iteration.
func (fx *fleetFixture) checkRun(h *Handles, runID string, iterations int) {
	t := fx.t
	t.Helper()
	acts, info := streamChain(t, h, runID)
	if !info.Ended {
		t.Errorf("run %s: the stream has no end line", runID)
	}
	if n := countType(acts, ledger.IterationCompleted); n != iterations {
		t.Errorf("run %s: %d IterationCompleted in the stream, want %d", runID, n, iterations)
	}
	ends := 0
	for _, a := range acts {
		if loop.IsRunEnd(a.Type) {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("run %s: %d closing actions, want 1", runID, ends)
	}
	fx.mu.Lock()
	for i := 1; i <= iterations; i++ {
		if n := fx.charges[fmt.Sprintf("%s/%d", runID, i)]; n != 1 {
			t.Errorf("run %s iteration %d charged %d times, want 1", runID, i, n)
		}
	}
	fx.mu.Unlock()
	log := branchLog(t, fx.bare, BranchName(runID))
	want := []string{}
	for i := iterations; i >= 1; i-- {
		want = append(want, fmt.Sprintf("ralph %s iteration %d", runID, i))
	}
	if got := log[:min(len(log), iterations)]; strings.Join(got, "\n") != strings.Join(want, "\n") || len(log) != iterations+1 {
		t.Errorf("run %s branch log %q, want %q above the seed commit", runID, log, want)
	}
}

func TestWorkersRunJobsToTheirEnd(t *testing.T) {
	fx := newFleetFixture(t)
	nc1, h1 := fx.connect()
	nc2, h2 := fx.connect()
	fx.worker("w1", 2, 5*time.Second, nc1, h1)
	fx.worker("w2", 2, 5*time.Second, nc2, h2)
	_, h := fx.connect()
	type want struct {
		state      string
		iterations int
	}
	runs := map[string]want{}
	for i := range 6 {
		if i%2 == 0 {
			runs[fx.submit(h, limitJob(2))] = want{StateLimit, 2}
		} else {
			runs[fx.submit(h, successJob(3))] = want{StateSucceeded, 3}
		}
	}
	for id, w := range runs {
		s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
		if s.State != w.state || s.Iteration != w.iterations || s.Worker == "" || s.Branch != BranchName(id) {
			t.Errorf("run %s: state %+v, want %s after %d iterations", id, s, w.state, w.iterations)
		}
		if w.state == StateLimit && s.Condition != "enough" || w.state == StateSucceeded && s.Condition != "charged" {
			t.Errorf("run %s stopped by %q (%s)", id, s.Condition, s.Reason)
		}
		fx.checkRun(h, id, w.iterations)
	}
	waitNoPending(t, h)
	for _, d := range fx.dirs {
		waitUntil(t, "the runs' directories are removed", func() bool {
			left, _ := filepath.Glob(filepath.Join(d, "runs", "*"))
			return len(left) == 0
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, what, cond)
}

// waitNoPending waits until every job is acked (or terminated).
func waitNoPending(t *testing.T, h *Handles) {
	t.Helper()
	eventually.NoError(t, "every job acked", func() error {
		info, err := h.Jobs.Info(context.Background())
		if err == nil && info.State.Msgs > 0 {
			err = fmt.Errorf("%d jobs still in stream %s", info.State.Msgs, StreamJobs)
		}
		return err
	})
}

// A worker that dies mid-run (its connection gone, its process abandoned)
// loses nothing: after the ack wait another worker resumes the run from the
// replicated chain, the idempotent charge of the interrupted iteration is
// not repeated, max_iterations holds, and the dead worker's late push is
// refused by the branch's lease.
func TestFailoverAfterAWorkerDies(t *testing.T) {
	cases := []struct {
		name, cfg, condition string
		iterations           int     // 0: whatever the budget allows, at least 2
		maxCost              float64 // 0: none
		ackWait              time.Duration
	}{
		{name: "max_iterations", cfg: limitJob(3), condition: "enough", iterations: 3, ackWait: 2 * time.Second},
		{name: "max_cost", cfg: workerPlan + "[[stop]]\nname = \"budget\"\nkind = \"max_cost\"\nusd = 0.05\n[[stop]]\nkind = \"max_iterations\"\nmax = 10\n",
			condition: "budget", maxCost: 0.05, ackWait: 2 * time.Second},
		// The job waits an ack wait of 9s before B takes it, so more than the
		// run's 5s have passed since RunStarted: B, counting from RunStarted,
		// starts no iteration. A clock restarted on B would run two more.
		{name: "max_duration", cfg: workerPlan + "[[stop]]\nname = \"time\"\nkind = \"max_duration\"\nduration = \"5s\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 3\n",
			condition: "time", iterations: 1, ackWait: 9 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := newFleetFixture(t)
			_, h := fx.connect()
			ncA, hA := fx.connect()
			release := fx.holdWorker("A")
			stopA := fx.worker("A", 1, c.ackWait, ncA, hA)
			id := fx.submit(h, c.cfg)
			// iteration 1 runs through; A holds iteration 2 in its last step
			<-fx.holding // A/1
			fx.mu.Lock()
			fx.hold["A"] = nil
			fx.mu.Unlock()
			release()
			release = fx.holdWorker("A")
			if got := <-fx.holding; got != "A/2" {
				t.Fatalf("held %s, want A/2", got)
			}
			// the charge of iteration 2 is in the stream before A dies
			waitUntil(t, "iteration 2's charge reaching the stream", func() bool {
				acts, _ := streamChain(t, h, id)
				return charged(acts, 2)
			})
			ncA.Close() // A is dead to the fleet: no heartbeats, no more replication
			ncB, hB := fx.connect()
			fx.worker("B", 1, c.ackWait, ncB, hB)
			s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
			want := c.iterations
			if want == 0 {
				want = max(s.Iteration, 2)
			}
			if s.State != StateLimit || s.Condition != c.condition || s.Iteration != want || s.Worker != "B" || s.Deliveries < 2 {
				t.Fatalf("state %+v, want limit by %s after %d iterations on B", s, c.condition, want)
			}
			fx.checkRun(h, id, want)
			acts, info := streamChain(t, h, id)
			if want >= 2 && countType(acts, ledger.CapabilityDeduplicated) < 1 {
				t.Error("the resumed iteration 2 ran its charge again instead of deduplicating it")
			}
			if len(info.Keys) < 1 {
				t.Errorf("chain keys %v", info.Keys)
			}
			spent := 0.0 // every call's cost, the dead worker's interrupted iteration's too
			for _, a := range acts {
				if a.Type == ledger.CapabilityCall {
					spent += a.Cost
				}
			}
			t.Logf("%d iterations, $%.4f spent by the calls, $%.4f by the run's count", s.Iteration, spent, s.CostUSD)
			if c.maxCost > 0 && (spent > c.maxCost+1e-9 || s.CostUSD > c.maxCost+1e-9) {
				t.Errorf("spent $%.4f (state says $%.4f) across the failover; the budget is $%.4f", spent, s.CostUSD, c.maxCost)
			}
			// The zombie goes on locally once released; nothing it does
			// reaches the stream, the bucket or the branch.
			before := len(acts)
			release()
			_ = stopA()
			acts, _ = streamChain(t, h, id)
			if len(acts) != before {
				t.Errorf("the dead worker added %d actions to the stream", len(acts)-before)
			}
			fx.checkRun(h, id, want)
			if s2, _, _ := GetState(context.Background(), h.Runs, id); s2.State != StateLimit || s2.Worker != "B" {
				t.Errorf("state after the zombie stopped: %+v", s2)
			}
		})
	}
}

// charged reports whether the chain records iteration's Charge step as
// completed.
func charged(acts []ledger.Action, iteration int) bool {
	current := ""
	for _, a := range acts {
		switch {
		case a.Type == ledger.IterationStarted:
			current = a.FunctionName
		case a.Type == ledger.PlanStepCompleted && a.FunctionName == "Charge" && current == fmt.Sprintf("iteration %d", iteration):
			return true
		}
	}
	return false
}

// SIGTERM pauses the run after its current call, hands it back, and the
// worker returns nil; another worker finishes the run.
func TestWorkerHandsBackOnStop(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	ncA, hA := fx.connect()
	release := fx.holdWorker("A")
	stopA := fx.worker("A", 1, 5*time.Second, ncA, hA)
	id := fx.submit(h, limitJob(2))
	<-fx.holding // A/1, in its last step
	stopped := make(chan error, 1)
	go func() { stopped <- stopA() }()
	waitState(t, h, id, "running state", func(s RunState) bool { return s.State == StateRunning })
	release() // the current call finishes; then the run pauses and goes back
	if err := <-stopped; err != nil {
		t.Fatalf("RunWorker after SIGTERM: %v", err)
	}
	s := waitState(t, h, id, "handed-back state", func(s RunState) bool { return s.State != StateRunning })
	if s.State != StateHandedBack || s.Iteration != 1 {
		t.Fatalf("state %+v, want handed-back after iteration 1", s)
	}
	acts, info := streamChain(t, h, id)
	if info.Ended || countType(acts, ledger.IterationCompleted) != 1 {
		t.Fatalf("handed back with %d iterations completed, ended %v", countType(acts, ledger.IterationCompleted), info.Ended)
	}
	ncB, hB := fx.connect()
	fx.worker("B", 1, 5*time.Second, ncB, hB)
	s = waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateLimit || s.Iteration != 2 || s.Worker != "B" {
		t.Fatalf("state %+v", s)
	}
	fx.checkRun(h, id, 2)
}

func TestWorkerFailsBadJobs(t *testing.T) {
	fx := newFleetFixture(t)
	nc, hw := fx.connect()
	fx.worker("w", 2, 5*time.Second, nc, hw)
	_, h := fx.connect()
	missing := fx.submit(h, strings.Replace(limitJob(1), "[model]", "[intent]\ngoal = \"g\"\nprompt_file = \"PROMPT.md\"\n[model]", 1))
	noAgentID := uuid.Must(uuid.NewV7()).String()
	if err := submitJob(ctxT(t), t, h, Job{RunID: noAgentID, Config: limitJob(1), ConfigPath: DefaultConfigPath, Workspace: fx.bare,
		Agent: "ralph-no-such-agent-cli"}); err != nil {
		t.Fatal(err)
	}
	badRemote := uuid.Must(uuid.NewV7()).String()
	if err := submitJob(ctxT(t), t, h, Job{RunID: badRemote, Config: limitJob(1), ConfigPath: DefaultConfigPath,
		Workspace: filepath.Join(t.TempDir(), "nothing.git")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		id, want string
	}{
		{missing, "ralph.toml:3"},
		{noAgentID, `no agent CLI "ralph-no-such-agent-cli"`},
		{badRemote, "workspace"},
	}
	for _, c := range cases {
		s := waitState(t, h, c.id, "failed state", func(s RunState) bool { return Final(s.State) })
		if s.State != StateFailed || !strings.Contains(s.Error, c.want) {
			t.Errorf("run %s: state %s error %q, want failed naming %q", c.id, s.State, s.Error, c.want)
		}
	}
	waitNoPending(t, h)
}

// A run on a worker takes its controls over NATS, and its store is served
// through a tunnel: abort ends it as aborted, and the job is acked.
func TestWorkerRunTakesControls(t *testing.T) {
	fx := newFleetFixture(t)
	nc, h := fx.connect()
	ncW, hW := fx.connect()
	release := fx.holdWorker("w")
	fx.worker("w", 1, 5*time.Second, ncW, hW)
	id := fx.submit(h, limitJob(50))
	<-fx.holding // w/1
	c, err := serve.DialConn(ctxT(t), id, func(ctx context.Context) (net.Conn, error) {
		return DialRun(ctx, submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id)
	})
	if err != nil {
		t.Fatalf("tunnel to the run's store: %v", err)
	}
	if info := c.Info(); info.RunID != id {
		t.Errorf("the tunnel reached run %q, want %s", info.RunID, id)
	}
	runs, err := c.ListRuns()
	if err != nil || len(runs) != 1 || runs[0].ID != id {
		t.Errorf("runs through the tunnel: %+v, %v", runs, err)
	}
	c.Close()
	if err := Control(ctxT(t), submitterConn(t, nc), signerOf(t, nc, RoleSubmitter), id, "abort"); err != nil {
		t.Fatalf("abort: %v", err)
	}
	release()
	s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateAborted || s.Class != "abort" {
		t.Errorf("state %+v, want aborted", s)
	}
	acts, info := streamChain(t, h, id)
	if !info.Ended || countType(acts, ledger.RunAborted) != 1 {
		t.Errorf("stream: ended %v, %d RunAborted", info.Ended, countType(acts, ledger.RunAborted))
	}
	waitNoPending(t, h)
}

// The NATS server goes away mid-run and comes back: the iteration that
// ended meanwhile waits for its chain to reach the stream, then the run goes
// on, on the same worker, losing and repeating nothing.
func TestWorkerOutlivesANATSRestart(t *testing.T) {
	fx, srv, dir, listen := restartableFleet(t)
	defer func() { srv.Shutdown() }()
	_, h := fx.connect()
	ncW, hW := fx.reconnecting()
	release := fx.holdWorker("w")
	fx.worker("w", 1, 10*time.Second, ncW, hW)
	id := fx.submit(h, limitJob(3))
	<-fx.holding // w/1
	srv.Shutdown()
	release() // iteration 1 ends while NATS is away
	fx.mu.Lock()
	fx.hold["w"] = nil
	fx.mu.Unlock()
	var err error
	if srv, err = startTestServer(ServerOptions{Dir: dir, Listen: listen}); err != nil {
		t.Fatal(err)
	}
	nc2, err := connectAs(srv.ClientURL(), RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Ensure(ctxT(t), js2, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := waitState(t, h2, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateLimit || s.Iteration != 3 || s.Worker != "w" || s.Deliveries != 1 {
		t.Fatalf("state %+v, want limit after 3 iterations on w, delivered once", s)
	}
	fx.checkRun(h2, id, 3)
}

// restartableFleet is a fixture whose NATS server listens on a fixed port
// in dir, so a test can stop it and start it again where clients expect it.
func restartableFleet(t *testing.T) (fx *fleetFixture, srv *Server, dir, listen string) {
	t.Helper()
	gitHome(t)
	bare, _ := sharedRemote(t)
	dir, listen = t.TempDir(), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv, err := startTestServer(ServerOptions{Dir: dir, Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	fx = &fleetFixture{t: t, url: srv.ClientURL(), bare: bare, charges: map[string]int{}, hold: map[string]chan struct{}{},
		holding: make(chan string, 16)}
	return fx, srv, dir, listen
}

// reconnecting is a worker's connection that rides over the server going
// away, and the fleet's handles over it.
func (fx *fleetFixture) reconnecting() (*nats.Conn, *Handles) {
	fx.t.Helper()
	return fx.connect(nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A worker whose run's chain another store has continued (another worker
// took the run over) stops the run at once: nothing more from it reaches
// the stream, the bucket or the branch, and its job is not acked.
func TestWorkerFencedStopsAtOnce(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	ncA, hA := fx.connect()
	release := fx.holdWorker("A")
	fx.worker("A", 1, 30*time.Second, ncA, hA)
	id := fx.submit(h, limitJob(3))
	<-fx.holding // A/1, in its last step
	waitState(t, h, id, "running state", func(s RunState) bool { return s.State == StateRunning })
	// Another store continues the chain, as a worker that took the run over
	// would; it tries again while A's last commits still reach the stream.
	waitUntil(t, "another store takes the chain over", func() bool {
		st, info, err := RebuildStore(ctxT(t), h.JS, id, ledger.Options{InMemory: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		other, err := Replicate(ctxT(t), h.JS, st, id, st.Head().Seq+1, info.LastStreamSeq)
		if errors.Is(err, ErrFenced) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return true
	})
	last, err := h.Chains.GetLastMsgForSubject(ctxT(t), ChainSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := GetState(ctxT(t), h.Runs, id)
	release() // A's iteration 1 ends; its chain is refused
	waitUntil(t, "A lets the run go", func() bool {
		left, _ := filepath.Glob(filepath.Join(fx.dirs[0], "runs", "*"))
		return len(left) == 0
	})
	if now, err := h.Chains.GetLastMsgForSubject(ctxT(t), ChainSubject(id)); err != nil || now.Sequence != last.Sequence {
		t.Errorf("the fenced worker published on the chain: last message %d, was %d (%v)", now.Sequence, last.Sequence, err)
	}
	if after, _, _ := GetState(ctxT(t), h.Runs, id); after.Updated != before.Updated || after.State != StateRunning {
		t.Errorf("the fenced worker wrote the run's state: %+v, was %+v", after, before)
	}
	if _, err := gitx.Run(ctxT(t), fx.bare, "rev-parse", "--verify", "refs/heads/"+BranchName(id)); err == nil {
		t.Error("the fenced worker pushed its iteration to the run's branch")
	}
	if info, err := h.Jobs.Info(ctxT(t)); err != nil || info.State.Msgs != 1 {
		t.Errorf("the job was settled by the fenced worker: %d jobs in the stream (%v)", info.State.Msgs, err)
	}
}

// A worker told to stop while NATS is out of reach still exits, after
// StopGrace; the run it held continues elsewhere once NATS is back.
func TestWorkerStopsWhileNATSIsAway(t *testing.T) {
	fx, srv, dir, listen := restartableFleet(t)
	defer func() { srv.Shutdown() }()
	_, h := fx.connect()
	ncW, hW := fx.reconnecting()
	release := fx.holdWorker("w")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunWorker(ctx, WorkerOptions{NC: ncW, Signer: signerOf(t, ncW, RoleWorker), Handles: hW, ID: "w", Slots: 1, Dir: t.TempDir(), AckWait: 3 * time.Second,
			Start: fx.start("w"), StopGrace: time.Second, RetryDelay: 100 * time.Millisecond})
	}()
	id := fx.submit(h, limitJob(3))
	<-fx.holding // w/1
	srv.Shutdown()
	cancel()  // SIGTERM while NATS is away
	release() // the current call finishes; the run pauses; nothing can be flushed
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunWorker: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a worker told to stop while NATS is away did not exit within 60s")
	}
	var err error
	if srv, err = startTestServer(ServerOptions{Dir: dir, Listen: listen}); err != nil {
		t.Fatal(err)
	}
	fx.mu.Lock()
	fx.hold["w"], fx.url = nil, srv.ClientURL()
	fx.mu.Unlock()
	ncB, hB := fx.connect()
	fx.worker("B", 1, 3*time.Second, ncB, hB)
	s := waitState(t, hB, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateLimit || s.Iteration != 3 || s.Worker != "B" {
		t.Fatalf("state %+v, want limit after 3 iterations on B", s)
	}
	// Iteration 1 never reached the stream from w, so B ran it again
	// (docs/fleet.md): the replicated chain holds B's, and verifies.
	acts, info := streamChain(t, hB, id)
	if !info.Ended || countType(acts, ledger.IterationCompleted) != 3 {
		t.Fatalf("%d iterations completed on the stream, ended %v", countType(acts, ledger.IterationCompleted), info.Ended)
	}
}
