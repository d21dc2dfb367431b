package batch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/tasks"
)

func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "batch-test-home")
	if err != nil {
		panic(err)
	}
	for k, v := range map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_STATE_HOME": filepath.Join(home, "state"), "XDG_RUNTIME_DIR": filepath.Join(home, "run"), "GIT_CONFIG_NOSYSTEM": "1"} {
		os.Setenv(k, v)
	}
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// fakeSource lists its tasks and marks one done by writing done/<id> in
// the merge checkout it is given.
type fakeSource struct {
	tasks []tasks.Task
	err   error
	mu    sync.Mutex
	done  []string // ids marked done, in order
	// outside makes it a source outside the repository (a GitHub issue):
	// marked done after the merge, with a note.
	outside bool
	notes   []Note
}

func (s *fakeSource) List(context.Context) ([]tasks.Task, error) { return s.tasks, s.err }
func (s *fakeSource) String() string                             { return "fake:backlog" }
func (s *fakeSource) MarksInCheckout() bool                      { return !s.outside }

func (s *fakeSource) MarkMerged(_ context.Context, t tasks.Task, n Note) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = append(s.done, t.ID)
	s.notes = append(s.notes, n)
	return nil
}

func (s *fakeSource) MarkDone(_ context.Context, dir string, t tasks.Task) error {
	s.mu.Lock()
	s.done = append(s.done, t.ID)
	s.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(dir, "done"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "done", t.ID), []byte("done\n"), 0o644)
}

// fakeTarget makes checkouts as plain directories.
type fakeTarget struct {
	branch string
	broken string // the checkouts whose dir ends so get a work.txt that cannot be written
	mu     sync.Mutex
	made   map[string]string // dir → branch
}

type dirCheckout string

func (d dirCheckout) Dir() string                  { return string(d) }
func (d dirCheckout) Remove(context.Context) error { return os.RemoveAll(string(d)) }

func (t *fakeTarget) Branch() string { return t.branch }

func (t *fakeTarget) Checkout(_ context.Context, dir, branch string, _ bool) (Checkout, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.made == nil {
		t.made = map[string]string{}
	}
	t.made[dir] = branch
	if t.broken != "" && strings.HasSuffix(dir, t.broken) { // work.txt cannot be written there: a link out of the tree
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		return dirCheckout(dir), os.Symlink("/nonexistent/work.txt", filepath.Join(dir, "work.txt"))
	}
	return dirCheckout(dir), os.MkdirAll(dir, 0o755)
}

// fakeMerger copies a task's checkout into a scratch tree (leaving out the
// files lose names for it, so a check there can go red), checks it, and
// merges it by copying it into its target tree, unless conflicts lists
// the task for its next Merge. It counts what it was asked.
type fakeMerger struct {
	target    string              // the "target branch": a directory the merged trees land in
	conflicts map[string]int      // task id → Merge calls that conflict first
	lose      map[string][]string // task id → files left out of its scratch tree
	mu        sync.Mutex          // one merge at a time, as the real queue
	merges    []string            // task ids, each Merge
	resets    []string
	panicOn   string                   // the task whose Merge panics
	gates     map[string]chan struct{} // a task's Merge waits until its gate closes
}

func (f *fakeMerger) Merge(ctx context.Context, m MergeRequest) (MergeResult, error) {
	if gate := f.gates[m.Task.ID]; gate != nil {
		select { // the merge waits until the test opens it
		case <-gate:
		case <-time.After(eventually.Bound):
			return MergeResult{}, fmt.Errorf("the gate of %s's merge was never opened", m.Task.ID)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := m.Task.ID
	f.merges = append(f.merges, id)
	if id == f.panicOn {
		var m map[string]int
		m["boom"]++ // a bug in the queue
	}
	if f.conflicts[id] > 0 {
		f.conflicts[id]--
		return MergeResult{Outcome: Conflicted, Conflicts: []string{"shared.txt"}, Evidence: "<<<<<<< ours"}, nil
	}
	scratch, err := os.MkdirTemp("", "scratch")
	if err != nil {
		return MergeResult{}, err
	}
	defer os.RemoveAll(scratch)
	if err := copyTree(m.Checkout.Dir(), scratch, f.lose[id]); err != nil {
		return MergeResult{}, err
	}
	if len(f.lose[id]) > 0 {
		f.lose[id] = nil // lost once
	}
	ok, evidence, err := m.Check(ctx, scratch)
	if err != nil {
		return MergeResult{}, err
	}
	if !ok {
		return MergeResult{Outcome: Red, Evidence: evidence}, nil
	}
	if m.Edit != nil {
		if err := m.Edit(ctx, scratch); err != nil {
			return MergeResult{}, err
		}
	}
	if err := copyTree(scratch, f.target, nil); err != nil {
		return MergeResult{}, err
	}
	return MergeResult{Outcome: Merged, Commit: fmt.Sprintf("c0ffee%02d%s", len(f.merges), strings.Repeat("0", 34))}, nil
}

func (f *fakeMerger) Close(context.Context) error { return nil }

func (f *fakeMerger) Reset(_ context.Context, c Checkout, r MergeResult) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, c.Dir())
	return "The merge queue said: " + firstLine(r.Evidence), nil
}

// copyTree copies the files under from into to, but those named in skip.
func copyTree(from, to string, skip []string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
}

// fixture is a batch over fakes, with a real store, a real config and
// real runs of a static plan that writes work.txt, and a file_exists
// success condition on it.
type fixture struct {
	repo   string
	cfg    *config.Config
	store  *ledger.Store
	src    *fakeSource
	target *fakeTarget
	merger *fakeMerger
	events []Event
	mu     sync.Mutex
}

const workPlan = `(do (step "work" (call :fs.write {:path "work.txt" :content "done"})))`

func newFixture(t *testing.T, toml string, ts ...tasks.Task) *fixture {
	t.Helper()
	f := &fixture{repo: t.TempDir(), src: &fakeSource{tasks: ts}, target: &fakeTarget{branch: "ralph/b/merged"}}
	f.merger = &fakeMerger{target: t.TempDir(), conflicts: map[string]int{}, lose: map[string][]string{}}
	if toml == "" {
		toml = "[intent]\ngoal = \"do the task\"\n[plan]\nrtfs = '" + workPlan + "'\n[loop]\ncheckpoints = false\n" +
			"[[stop]]\nname = \"work\"\nkind = \"file_exists\"\npath = \"work.txt\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 3\n"
	}
	path := filepath.Join(f.repo, "ralph.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	st, err := ledger.Open(ledger.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.store = st
	return f
}

func (f *fixture) options(t *testing.T) Options {
	return Options{Config: f.cfg, Store: f.store, StoreDir: f.store.Dir(), Source: f.src, Target: f.target, Merger: f.merger,
		Repo: f.repo, Dir: t.TempDir(), Parallel: 2, Retries: 2, Integrate: "rebase",
		Order: func(ts []tasks.Task) ([]tasks.Task, error) {
			return slices.DeleteFunc(slices.Clone(ts), func(t tasks.Task) bool { return t.Done }), nil
		},
		RefName: func(id string) string { return id },
		OnEvent: func(e Event) { f.mu.Lock(); f.events = append(f.events, e); f.mu.Unlock() }}
}

// batchActions are the store's actions of the batch's own run, by type.
func (f *fixture) batchActions(t *testing.T, id string) []ledger.Action {
	t.Helper()
	acts, err := f.store.ByRun(id)
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

func task(id string, deps ...string) tasks.Task {
	return tasks.Task{ID: id, Title: "Title of " + id, Text: "Text of " + id, Criteria: []string{"criterion of " + id}, DependsOn: deps}
}
