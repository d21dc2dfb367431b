package fleetrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/testenv"
	"github.com/ralphloop/ralph/stop"
	"github.com/ralphloop/ralph/tasks"
	"github.com/ralphloop/ralph/tasks/batch"
)

func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "fleetrun-test-home")
	if err != nil {
		panic(err)
	}
	for k, v := range map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_STATE_HOME": filepath.Join(home, "state"), "XDG_RUNTIME_DIR": filepath.Join(home, "run"), "GIT_CONFIG_NOSYSTEM": "1"} {
		os.Setenv(k, v)
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = t\n\temail = t@localhost\n"), 0o644); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// world is a NATS node with its users and the fleet's streams, a user's
// repository with a task's checkout, and a bare workspace repository.
type world struct {
	t        *testing.T
	ctx      context.Context
	h        *fleet.Handles
	remote   *Remote
	checkout *tasks.Checkout
	bare     string
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitx.Run(context.Background(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

func newWorld(t *testing.T) *world {
	t.Helper()
	testenv.Tool(t, "git")
	ctx, cancel := context.WithTimeout(context.Background(), eventually.Bound)
	t.Cleanup(cancel)
	url := fleettest.Node(t).ClientURL()
	js, err := jetstream.New(fleettest.Connect(t, url, fleet.RoleWorker))
	if err != nil {
		t.Fatal(err)
	}
	h, err := fleet.Ensure(ctx, js, fleet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	repo, bare := filepath.Join(root, "repo"), filepath.Join(root, "ws.git")
	git(t, root, "init", "-q", "-b", "main", repo)
	if err := os.WriteFile(filepath.Join(repo, "calc.go"), []byte("package calc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "start")
	git(t, root, "init", "-q", "--bare", bare)
	tg, err := tasks.PrepareTarget(ctx, repo, "ralph/b/merged")
	if err != nil {
		t.Fatal(err)
	}
	c, err := tg.Checkout(ctx, filepath.Join(root, "task"), "ralph/b/task/US-1", false)
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{NC: fleettest.Connect(t, url, fleet.RoleSubmitter), Signer: fleettest.Signer(t, url, fleet.RoleSubmitter), Runs: h.Runs,
		Workspace: bare, Config: "[intent]\ngoal = \"g\"\n", ConfigPath: "ralph.toml", AbortWait: time.Second})
	return &world{t: t, ctx: ctx, h: h, remote: r, checkout: c, bare: bare}
}

// job waits for the one job on the queue.
func (w *world) job() fleet.Job {
	w.t.Helper()
	var j fleet.Job
	eventually.NoError(w.t, "the job is queued", func() error {
		m, err := w.h.Jobs.GetMsg(w.ctx, 1)
		if err != nil {
			return err
		}
		j, err = fleet.ParseJob(m.Data)
		return err
	})
	return j
}

// put records s as the run's state, as its worker would.
func (w *world) put(s fleet.RunState) {
	w.t.Helper()
	if err := fleet.PutState(w.ctx, w.h.Runs, s); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) run(id string) (rr batch.RemoteRun, told *[]int, done chan error, got chan *stopOutcome) {
	told = &[]int{}
	var mu sync.Mutex
	rr = batch.RemoteRun{ID: id, Batch: "01a2266c-0000-7000-8000-000000000001", Task: tasks.Task{ID: "US-1", Title: "Add", Criteria: []string{"tests pass"}},
		Prompt: "## Task US-1: Add\n", Try: 1, Attempt: 1, Checkout: w.checkout,
		OnIteration: func(n int, _ string, _ float64) { mu.Lock(); *told = append(*told, n); mu.Unlock() }}
	done, got = make(chan error, 1), make(chan *stopOutcome, 1)
	go func() {
		out, err := w.remote.Run(w.ctx, rr)
		if out != nil {
			got <- &stopOutcome{class: out.Class, by: out.TriggeredBy, iterations: out.Iterations}
		} else {
			got <- nil
		}
		done <- err
	}()
	return rr, told, done, got
}

type stopOutcome struct {
	class      stop.Class
	by         string
	iterations int
}

// A task's run on the fleet: its work is sent, its job carries the task
// and starts from the sent commit, its iterations are told as its state
// moves, and a green end brings the worker's branch into the checkout.
func TestRemoteRunGreen(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := os.WriteFile(filepath.Join(w.checkout.Dir, "calc.go"), []byte("package calc // begun\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := "01a2266c-0000-7000-8000-0000000000a1"
	_, told, done, got := w.run(id)
	j := w.job()
	sent := git(t, w.checkout.Dir, "rev-parse", "HEAD")
	if j.RunID != id || j.Ref != sent || j.Workspace != w.bare || j.Task == nil || j.Task.Prompt != "## Task US-1: Add\n" || j.Task.Criteria[0] != "tests pass" {
		t.Fatalf("job %+v (task %+v), want run %s from %s", j, j.Task, id, sent)
	}
	wk := filepath.Join(t.TempDir(), "ws")
	git(t, filepath.Dir(wk), "clone", "-q", w.bare, wk)
	git(t, wk, "checkout", "-q", "-b", fleet.BranchName(id), j.Ref)
	if err := os.WriteFile(filepath.Join(wk, "calc.go"), []byte("package calc // done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, wk, "commit", "-q", "-am", "ralph "+id+" iteration 2")
	git(t, wk, "push", "-q", "origin", "HEAD:refs/heads/"+fleet.BranchName(id))
	w.put(fleet.RunState{RunID: id, State: fleet.StateRunning, Deliveries: 1, Iteration: 1, CostUSD: 0.01})
	w.put(fleet.RunState{RunID: id, State: fleet.StateSucceeded, Deliveries: 1, Iteration: 2, CostUSD: 0.02, Class: "success", Condition: "tests"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o := <-got; o == nil || o.class != stop.ClassSuccess || o.by != "tests" || o.iterations != 2 {
		t.Fatalf("outcome %+v", o)
	}
	if b, _ := os.ReadFile(filepath.Join(w.checkout.Dir, "calc.go")); string(b) != "package calc // done\n" {
		t.Fatalf("the checkout holds %q, not the worker's work", b)
	}
	if len(*told) != 2 || (*told)[0] != 1 || (*told)[1] != 2 {
		t.Fatalf("iterations told %v, want [1 2]", *told)
	}
}

// A run that ends otherwise brings nothing back; one that failed with an
// error is that error; a run the batch stops is no longer waited for.
func TestRemoteRunNotGreen(t *testing.T) {
	t.Parallel()
	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		id := "01a2266c-0000-7000-8000-0000000000b1"
		_, _, done, got := w.run(id)
		head := git(t, w.checkout.Dir, "rev-parse", "HEAD")
		w.job()
		w.put(fleet.RunState{RunID: id, State: fleet.StateLimit, Deliveries: 1, Iteration: 3, Condition: "iterations"})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if o := <-got; o == nil || o.class != stop.ClassLimit || o.by != "iterations" {
			t.Fatalf("outcome %+v", o)
		}
		if git(t, w.checkout.Dir, "rev-parse", "HEAD") != head {
			t.Fatal("a run that was not green moved the checkout")
		}
	})
	t.Run("error", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		id := "01a2266c-0000-7000-8000-0000000000b2"
		_, _, done, _ := w.run(id)
		w.job()
		w.put(fleet.RunState{RunID: id, State: fleet.StateFailed, Deliveries: 1, Worker: "w9", Error: "the run's workspace cannot be made"})
		if err := <-done; err == nil || !strings.Contains(err.Error(), "on worker w9: the run's workspace cannot be made") {
			t.Fatalf("Run: %v", err)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		ctx, cancel := context.WithCancel(w.ctx)
		w.ctx = ctx
		_, _, done, _ := w.run("01a2266c-0000-7000-8000-0000000000b3")
		w.job()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after the batch stopped: %v", err)
		}
	})
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    fleet.RunState
		want stop.Class
	}{
		{fleet.RunState{State: fleet.StateSucceeded}, stop.ClassSuccess},
		{fleet.RunState{State: fleet.StateLimit}, stop.ClassLimit},
		{fleet.RunState{State: fleet.StateAborted}, stop.ClassAbort},
		{fleet.RunState{State: fleet.StateFailed}, stop.ClassFailure},
		{fleet.RunState{State: fleet.StateFailed, Class: "limit"}, stop.ClassLimit},
	} {
		if got := outcome(c.s).Class; got != c.want {
			t.Errorf("outcome(%+v) = %s, want %s", c.s, got, c.want)
		}
	}
	if o := outcome(fleet.RunState{State: fleet.StateFailed, Error: "boom"}); o.Reason != "boom" {
		t.Errorf("reason %q, want the error", o.Reason)
	}
}
