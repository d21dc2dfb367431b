package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/ledger"
)

// e2eFleet is a NATS node in the test's process, a bare git remote the
// runs' workspaces clone, and a client to look at both.
type e2eFleet struct {
	t    *testing.T
	e    *e2e.E
	url  string
	bare string
	h    *fleet.Handles
}

func newE2EFleet(t *testing.T, e *e2e.E) *e2eFleet {
	t.Helper()
	return fleetOn(t, e, fleettest.Node(t).ClientURL(), fleet.DefaultConfig())
}

// fleetOn makes the fleet's streams and buckets on the NATS at url and a
// bare git remote with one commit on main.
func fleetOn(t *testing.T, e *e2e.E, url string, c fleet.Config) *e2eFleet {
	t.Helper()
	nc, err := fleettest.Dial(url, fleet.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := fleet.Ensure(context.Background(), js, c)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	bare := filepath.Join(root, "remote.git")
	git(t, root, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	seed := filepath.Join(root, "seed")
	git(t, root, "clone", "--quiet", bare, seed)
	writeFile(t, filepath.Join(seed, "README"), "the shared remote\n")
	git(t, seed, "add", "README")
	git(t, seed, "-c", "user.name=seed", "-c", "user.email=seed@localhost", "commit", "--quiet", "-m", "seed")
	git(t, seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	return &e2eFleet{t: t, e: e, url: url, bare: bare, h: h}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// worker starts `ralph worker` as its own process, with a policy that lets
// its jobs run sh and claude; env, when given, is added to its environment.
func (f *e2eFleet) worker(id string, slots int, env ...string) *e2e.Proc {
	f.t.Helper()
	policy := filepath.Join(f.t.TempDir(), "worker.toml")
	writeFile(f.t, policy, "[governance]\nshell_allow = [\"sh\"]\nagent_allow = [\"claude\"]\n")
	return f.workerArgs(id, slots, []string{"--policy", policy}, env...)
}

// workerArgs is worker with args added to its command line in place of
// the policy.
func (f *e2eFleet) workerArgs(id string, slots int, args []string, env ...string) *e2e.Proc {
	f.t.Helper()
	dir := f.t.TempDir()
	return f.e.Ralph(append([]string{"worker", "--nats", f.url, "--creds", fleetCreds(f.t, f.url, fleet.RoleWorker), "--slots", fmt.Sprint(slots), "--dir", filepath.Join(dir, "w"),
		"--ack-wait", "3s", "--id", id}, args...)...).In(dir).With(env...).Start()
}

// submit queues cfg as a job on the shared remote.
func (f *e2eFleet) submit(cfg string) string {
	f.t.Helper()
	return f.submitTo(cfg, f.bare)
}

// submitTo queues cfg as a job on the remote at workspace.
func (f *e2eFleet) submitTo(cfg, workspace string) string {
	f.t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	err := submitJob(f.t, f.url, fleet.Job{RunID: id, Config: cfg, ConfigPath: fleet.DefaultConfigPath, Workspace: workspace, Ref: "main"})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *e2eFleet) state(id string) fleet.RunState {
	f.t.Helper()
	var s fleet.RunState
	f.retry("read the state of run "+id, func() (err error) {
		s, _, err = fleet.GetState(context.Background(), f.h.Runs, id)
		return err
	})
	return s
}

// retry calls fn until it succeeds: a cluster electing a leader answers
// with timeouts for a while.
func (f *e2eFleet) retry(what string, fn func() error) {
	f.t.Helper()
	eventually.NoError(f.t, what, fn)
}

// chain rebuilds the run's chain from the stream, verifying it.
func (f *e2eFleet) chain(id string) ([]ledger.Action, fleet.ChainInfo) {
	f.t.Helper()
	var acts []ledger.Action
	var info fleet.ChainInfo
	f.retry("the chain of run "+id+" in the stream", func() error {
		st, i, err := fleet.RebuildStore(context.Background(), f.h.JS, id, ledger.Options{InMemory: true}, nil)
		if err != nil {
			return err
		}
		defer st.Close()
		info = i
		acts, err = st.ByRun(id)
		return err
	})
	return acts, info
}

// commits is the subjects of the run branch's commits above the seed.
func (f *e2eFleet) commits(id string) []string {
	f.t.Helper()
	log := strings.Split(git(f.t, f.bare, "log", "--format=%s", "ralph/"+id), "\n")
	return log[:len(log)-1]
}

// fleetPlan appends a line per iteration to the charges file (behind an
// idempotency key), writes a file into the workspace, and runs the slow
// step, which leaves a mark before it sleeps.
func fleetPlan(charges, marks string, stopToml string) string {
	return fmt.Sprintf(`[intent]
goal = "fleet e2e"
params = { charges = %q, marks = %q }
[model]
provider = "static"
[plan]
rtfs = '''
(do
  (step "Charge" ^{:idempotency {:key (str "charge-" (:iteration ctx)) :scope :intent}}
    (call :shell.exec {:cmd "sh" :args ["-c" (str "echo " (:run-id ctx) " " (:iteration ctx) " >> " (:charges ctx))]}))
  (step "Write" (call :fs.write {:path (str "it-" (:iteration ctx) ".txt") :content "done"}))
  (step "Slow"
    (call :shell.exec {:cmd "sh" :args ["-c" (str "touch " (:marks ctx) "/" (:run-id ctx) "-" (:iteration ctx) "; sleep 0.3")]})))
'''
[governance]
shell_allow = ["sh"]
%s`, charges, marks, stopToml)
}

const limitStop = "[[stop]]\nname = \"enough\"\nkind = \"max_iterations\"\nmax = %d\n"

// chargesOf counts the charges file's lines per iteration of run id.
func chargesOf(t *testing.T, path, id string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if run, it, ok := strings.Cut(l, " "); ok && run == id {
			n[it]++
		}
	}
	return n
}

func (f *e2eFleet) waitFinal(id string) fleet.RunState {
	f.t.Helper()
	var s fleet.RunState
	waitUntil(f.t, "run "+id+" ends", func() bool { s = f.state(id); return fleet.Final(s.State) })
	return s
}

// checkRun checks a run that ended: its chain in the stream verifies and is
// closed, and each iteration charged once, committed once.
func (f *e2eFleet) checkRun(id, charges string, iterations int) {
	t := f.t
	t.Helper()
	acts, info := f.chain(id)
	completed := 0
	for _, a := range acts {
		if a.Type == ledger.IterationCompleted {
			completed++
		}
	}
	if !info.Ended || completed != iterations {
		t.Errorf("run %s: %d iterations in the stream, ended %v; want %d, ended", id, completed, info.Ended, iterations)
	}
	got := chargesOf(t, charges, id)
	for i := 1; i <= iterations; i++ {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("run %s: iteration %d charged %d times, want once (%v)", id, i, got[fmt.Sprint(i)], got)
		}
	}
	if len(got) != iterations {
		t.Errorf("run %s charged iterations %v, want 1..%d", id, got, iterations)
	}
	if c := f.commits(id); len(c) != iterations || c[0] != fmt.Sprintf("ralph %s iteration %d", id, iterations) {
		t.Errorf("run %s branch commits %q, want one per iteration", id, c)
	}
}

// chargeFiles is a test's directory, the file fleetPlan's charges are
// appended to and the directory of its marks (made).
func chargeFiles(t *testing.T) (dir, charges, marks string) {
	t.Helper()
	dir = t.TempDir()
	charges, marks = filepath.Join(dir, "charges"), filepath.Join(dir, "marks")
	if err := os.Mkdir(marks, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, charges, marks
}

var _ = suite.Add(e2e.Test{Name: "WorkersRunSubmittedJobs", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	dir, charges, marks := chargeFiles(t)
	f.worker("w1", 2)
	f.worker("w2", 2)
	var ids []string
	for i := range 8 {
		cfg := filepath.Join(dir, fmt.Sprintf("run%d.toml", i))
		writeFile(t, cfg, fleetPlan(charges, marks, fmt.Sprintf(limitStop, 1+i%2)))
		out, errOut, code := e.Ralph("submit", cfg, "--nats", f.url, "--workspace", f.bare+"@main").Run()
		if code != 0 {
			t.Fatalf("submit: exit %d: %s", code, errOut)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	for i, id := range ids {
		s := f.waitFinal(id)
		if s.State != fleet.StateLimit || s.Condition != "enough" || s.Iteration != 1+i%2 || s.Goal != "fleet e2e" {
			t.Errorf("run %s: %+v", id, s)
		}
		f.checkRun(id, charges, 1+i%2)
		if out, errOut, code := e.Ralph("chain", "verify", "--nats", f.url, "--run", id).Run(); code != 0 {
			t.Errorf("chain verify --nats --run %s: exit %d\n%s%s", id, code, out, errOut)
		}
	}
	out, errOut, code := e.Ralph("runs", "--nats", f.url, "--json").Run()
	if code != 0 {
		t.Fatalf("runs --nats: exit %d: %s", code, errOut)
	}
	for _, id := range ids {
		if !strings.Contains(out, `"run_id":"`+id+`"`) {
			t.Errorf("runs --nats does not list run %s:\n%s", id, out)
		}
	}
}})

// kill -9 a worker mid-run: after the ack wait the other worker continues
// the run from the replicated chain, the charge is not repeated, and
// max_iterations holds.
var _ = suite.Add(e2e.Test{Name: "WorkerKilledMidRun", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	_, charges, marks := chargeFiles(t)
	workers := map[string]*e2e.Proc{"w1": f.worker("w1", 1), "w2": f.worker("w2", 1)}
	id := f.submit(fleetPlan(charges, marks, fmt.Sprintf(limitStop, 3)))
	mark := filepath.Join(marks, id+"-2")
	waitUntil(t, "iteration 2 reaches its slow step", func() bool { _, err := os.Stat(mark); return err == nil })
	waitUntil(t, "iteration 2's charge is replicated", func() bool {
		acts, _ := f.chain(id)
		return chargedIn(acts, 2)
	})
	s := f.state(id)
	victimID := s.Worker
	victim := workers[victimID]
	if victim == nil {
		t.Fatalf("run %s is on worker %q", id, s.Worker)
	}
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	s = f.waitFinal(id)
	if s.State != fleet.StateLimit || s.Iteration != 3 || s.Worker == victimID {
		t.Fatalf("after the kill: %+v", s)
	}
	f.checkRun(id, charges, 3)
}})

// chargedIn reports whether the chain has iteration's Charge completed.
func chargedIn(acts []ledger.Action, iteration int) bool {
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

var _ = suite.Add(e2e.Test{Name: "WorkerWithoutNATS", Run: func(t *testing.T, e *e2e.E) {
	_, errOut, code := e.Ralph("worker", "--nats", "nats://127.0.0.1:1", "--dir", t.TempDir()).Run()
	want := "no NATS server answers at nats://127.0.0.1:1; start one with `ralph fleet serve` or pass --nats URL"
	if code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, want)
	}
}})

// SIGTERM: the worker pauses its run after the current call, hands it
// back and exits 0; another worker finishes it.
var _ = suite.Add(e2e.Test{Name: "WorkerHandsBackOnSIGTERM", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	_, charges, marks := chargeFiles(t)
	w1 := f.worker("w1", 1)
	id := f.submit(fleetPlan(charges, marks, fmt.Sprintf(limitStop, 3)))
	mark := filepath.Join(marks, id+"-1")
	waitUntil(t, "iteration 1 reaches its slow step", func() bool { _, err := os.Stat(mark); return err == nil })
	if err := w1.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w1.Wait(); err != nil {
		t.Fatalf("worker after SIGTERM: %v", err)
	}
	s := f.state(id)
	if s.State != fleet.StateHandedBack || s.Iteration < 1 {
		t.Fatalf("after SIGTERM: %+v", s)
	}
	acts, info := f.chain(id)
	if info.Ended {
		t.Fatal("a handed-back run has an end line")
	}
	for _, a := range acts {
		if a.Type == ledger.RunAborted {
			t.Fatal("a handed-back run recorded RunAborted")
		}
	}
	f.worker("w2", 1)
	s = f.waitFinal(id)
	if s.State != fleet.StateLimit || s.Iteration != 3 || s.Worker != "w2" {
		t.Fatalf("after the hand-back: %+v", s)
	}
	f.checkRun(id, charges, 3)
}})

// On a three-node cluster: kill -9 a worker mid-run, then stop the chain
// stream's leader; every run completes, each iteration charged and
// committed once, max_iterations held, every chain verifiable.
var _ = suite.Add(e2e.Test{Name: "ClusterSurvivesAWorkerAndALeader", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	c := fleettest.NewTLSCluster(t, 3) // TLS for clients and routes, and the roles
	cfg := fleet.DefaultConfig()
	cfg.Replicas = 3
	f := fleetOn(t, e, c.URL(), cfg)
	_, charges, marks := chargeFiles(t)
	workers := map[string]*e2e.Proc{"w1": f.worker("w1", 2), "w2": f.worker("w2", 2)}
	var ids []string
	for range 4 {
		ids = append(ids, f.submit(fleetPlan(charges, marks, fmt.Sprintf(limitStop, 3))))
	}
	first := ids[0]
	waitUntil(t, "iteration 2 of the first run reaches its slow step", func() bool {
		_, err := os.Stat(filepath.Join(marks, first+"-2"))
		return err == nil
	})
	waitUntil(t, "iteration 2's charge is replicated", func() bool {
		acts, _ := f.chain(first)
		return chargedIn(acts, 2)
	})
	victimID := f.state(first).Worker
	victim := workers[victimID]
	if victim == nil {
		t.Fatalf("run %s is on worker %q", first, victimID)
	}
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	f.worker("w3", 2)
	leader := c.StreamLeader(fleet.StreamChains)
	if leader < 0 {
		t.Fatal("stream RALPH_CHAINS has no leader")
	}
	c.Stop(leader)
	for _, id := range ids {
		s := f.waitFinal(id)
		if s.State != fleet.StateLimit || s.Iteration != 3 {
			t.Errorf("run %s: %+v", id, s)
		}
		f.checkRun(id, charges, 3)
	}
}})

// A worker without the job's agent CLI puts the job back, saying why in
// the run's state; a worker that has the CLI runs it.
var _ = suite.Add(e2e.Test{Name: "WorkerWithoutTheAgentCLI", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	if _, err := exec.LookPath("claude"); err == nil {
		t.Skip("a real claude is on PATH")
	}
	f := newE2EFleet(t, e)
	seed := filepath.Join(t.TempDir(), "seed")
	git(t, filepath.Dir(seed), "clone", "--quiet", f.bare, seed)
	writeFile(t, filepath.Join(seed, "PROMPT.md"), "Write one line of progress.\n")
	writeFile(t, filepath.Join(seed, "ralph.toml"), `[intent]
goal = "make progress"
prompt_file = "PROMPT.md"
[agent]
cli = "claude"
[[stop]]
name = "enough"
kind = "max_iterations"
max = 2
`)
	git(t, seed, "add", ".")
	git(t, seed, "-c", "user.name=seed", "-c", "user.email=seed@localhost", "commit", "--quiet", "-m", "agent loop")
	git(t, seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	f.worker("bare", 1)
	out, errOut, code := e.Ralph("submit", filepath.Join(seed, "ralph.toml"), "--nats", f.url, "--workspace", f.bare+"@main").Run()
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	waitUntil(t, "the worker without claude puts the job back", func() bool {
		return strings.Contains(f.state(id).Error, `worker bare has no agent CLI "claude" on its PATH`)
	})
	if s := f.state(id); fleet.Final(s.State) || s.State == fleet.StateRunning {
		t.Fatalf("state %+v, want the job waiting for a worker with claude", s)
	}
	f.worker("equipped", 1, "PATH="+fakeAgentBin(t)+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_AGENT_STATE="+t.TempDir())
	s := f.waitFinal(id)
	if s.State != fleet.StateLimit || s.Worker != "equipped" || s.Iteration != 2 || s.Error != "" {
		t.Fatalf("state %+v, want 2 iterations on the worker with claude", s)
	}
	if c := f.commits(id); len(c) < 3 || c[0] != fmt.Sprintf("ralph %s iteration 2", id) {
		t.Errorf("branch commits %q", c)
	}
}})

// Who submitted a run and who controlled it is on its chain (§17): the
// worker takes a control only when its submitter signed it, and records it
// as a ControlRequested action before acting on it.
var _ = suite.Add(e2e.Test{Name: "WorkerRecordsWhoControlledTheRun", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	_, charges, marks := chargeFiles(t)
	f.worker("w1", 1)
	id := f.submit(fleetPlan(charges, marks, fmt.Sprintf(limitStop, 3)))
	waitUntil(t, "iteration 1 reaches its slow step", func() bool {
		_, err := os.Stat(filepath.Join(marks, id+"-1"))
		return err == nil
	})
	nc, err := fleettest.Dial(f.url, fleet.RoleSubmitter)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = fleet.Control(ctx, nc, fleettest.Signer(t, f.url, fleet.RoleViewer), id, fleet.OpAbort)
	if want := "member viewer (viewer) may not abort run " + id + ": only its submitter, submitter, may"; err == nil || err.Error() != want {
		t.Errorf("a viewer's abort: %v, want %q", err, want)
	}
	if err := fleet.Control(ctx, nc, fleettest.Signer(t, f.url, fleet.RoleSubmitter), id, fleet.OpPause); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Control(ctx, nc, fleettest.Signer(t, f.url, fleet.RoleSubmitter), id, fleet.OpResume); err != nil {
		t.Fatal(err)
	}
	s := f.waitFinal(id)
	if s.State != fleet.StateLimit || s.SubmittedBy != "submitter" {
		t.Fatalf("final state %+v, want limit, submitted by submitter", s)
	}
	acts, _ := f.chain(id)
	var controls []string
	for _, a := range acts {
		switch a.Type {
		case ledger.RunStarted:
			if by := a.Metadata["submitted_by"].Str(); by != "submitter" {
				t.Errorf("RunStarted records submitted_by %q", by)
			}
		case ledger.ControlRequested:
			controls = append(controls, a.Metadata["op"].Str()+" by "+a.Metadata["by"].Str()+" ("+a.Metadata["role"].Str()+", "+a.Metadata["via"].Str()+")")
		}
	}
	if got := strings.Join(controls, "; "); got != "pause by submitter (submitter, control); resume by submitter (submitter, control)" {
		t.Errorf("controls on the chain: %q", got)
	}
}})
