package stop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/testenv"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// gitRepo makes dir a git work tree with files committed, or skips the
// test when git is missing.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	testenv.Tool(t, "git")
	dir := t.TempDir()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "start")
	return dir
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goTestOutput is what `go test` prints for the same failing work, with the
// timing that differs on every run.
func goTestOutput(i int) rtfs.Value {
	out := fmt.Sprintf("--- FAIL: TestAdd (0.00%ds)\nFAIL\nFAIL\texample.com/m\t0.00%ds\n", i%10, (i*7)%10)
	return rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("exit"), rtfs.Int(1), rtfs.Keyword("stdout"), rtfs.String(out),
		rtfs.Keyword("stderr"), rtfs.String(""), rtfs.Keyword("duration-ms"), rtfs.Int(int64(40+i))))
}

// An agent that edits nothing while its tests print different timings
// every iteration is stuck, and no_progress says so after exactly N
// unchanged iterations, every time.
func TestNoProgressDetectsStuckAgentDespiteTimings(t *testing.T) {
	t.Parallel()
	needShell(t)
	const n = 3
	for run := range 5 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			t.Parallel()
			dir := gitRepo(t, map[string]string{"add.go": "package m\n", "add_test.go": "package m\n"})
			e := NewEvaluator([]*Condition{
				mustCond(t, config.Stop{Name: "stuck", Kind: "no_progress", Iterations: n}),
				// The tests fail with output that carries a fresh timing each time.
				mustCond(t, config.Stop{Name: "tests", Kind: "command",
					Cmd: []string{"sh", "-c", `echo "FAIL example.com/m 0.00$(date +%N)s"; exit 1`}}),
				mustCond(t, config.Stop{Kind: "max_iterations", Max: 20}),
			}, Options{})
			for i := 1; i <= n+1; i++ {
				acts := []ledger.Action{{Seq: uint64(i), Type: ledger.CapabilityCall, FunctionName: "shell.exec", Success: true, Result: goTestOutput(i + run)}}
				ev, err := e.Evaluate(context.Background(), Input{Iteration: i, Workdir: dir, StoreDir: filepath.Join(dir, ".ralph"), LastActions: acts, HeadSeq: uint64(i)})
				if err != nil {
					t.Fatal(err)
				}
				if stop := i == n+1; ev.ShouldStop != stop || (stop && ev.TriggeredBy != "stuck") {
					t.Fatalf("iteration %d: stop %t by %q (%s), want stop %t by stuck", i, ev.ShouldStop, ev.TriggeredBy, ev.Reason, stop)
				}
				// the ledger grows inside the workdir every iteration, yet is not work
				writeFile(t, filepath.Join(dir, ".ralph", fmt.Sprintf("%06d.vlog", i)), strings.Repeat("x", i))
			}
		})
	}
}

// progressAfter runs no_progress (iterations = 1) over two iterations with
// change between them and reports whether the second was progress.
func progressAfter(t *testing.T, dir string, change func()) bool {
	t.Helper()
	c := mustCond(t, config.Stop{Kind: "no_progress", Iterations: 1})
	first := c.check.check(context.Background(), &Input{Iteration: 1, Workdir: dir})
	if first.err != nil {
		t.Fatal(first.err)
	}
	change()
	o := c.check.check(context.Background(), &Input{Iteration: 2, Workdir: dir})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return !o.met
}

func TestNoProgressSeesTheWork(t *testing.T) {
	t.Parallel()
	start := map[string]string{"add.go": "package m\n\nfunc Add(a, b int) int { return 0 }\n", ".gitignore": "build/\n*.log\n"}
	cases := []struct {
		name     string
		change   func(t *testing.T, dir string)
		progress bool
	}{
		{"nothing", func(*testing.T, string) {}, false},
		{"tracked file edited", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "add.go"), "package m\n\nfunc Add(a, b int) int { return a + b }\n")
		}, true},
		{"untracked file added", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "add_test.go"), "package m\n") }, true},
		{"tracked file deleted", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "add.go")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"gitignored files written", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "build", "out.bin"), time.Now().String())
			writeFile(t, filepath.Join(dir, "test.log"), time.Now().String())
		}, false},
		{"store written", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, ".ralph", "000001.vlog"), "entry") }, false},
		{"touched, same content", func(t *testing.T, dir string) {
			future := time.Now().Add(time.Hour)
			if err := os.Chtimes(filepath.Join(dir, "add.go"), future, future); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"made executable", func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "add.go"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range cases {
		for _, mode := range []string{"git", "plain"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				var dir string
				if mode == "git" {
					dir = gitRepo(t, start)
				} else {
					dir = t.TempDir()
					for name, content := range start {
						writeFile(t, filepath.Join(dir, name), content)
					}
				}
				want := tc.progress
				if mode == "plain" && tc.name == "gitignored files written" {
					want = true // without git there is no .gitignore to honour
				}
				if got := progressAfter(t, dir, func() { tc.change(t, dir) }); got != want {
					t.Errorf("progress %t, want %t", got, want)
				}
			})
		}
	}
}

// A rewrite that keeps the size and the mtime is still seen: a file
// modified within racyWindow of its last read is read again, and an older
// one is caught by its ctime.
func TestNoProgressSeesSameSizeSameMtimeRewrite(t *testing.T) {
	t.Parallel()
	for _, age := range []time.Duration{0, time.Hour} {
		t.Run(age.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "state.txt")
			writeFile(t, path, "aaaa")
			mtime := time.Now().Add(-age).Truncate(time.Second)
			if err := os.Chtimes(path, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			progress := progressAfter(t, dir, func() {
				writeFile(t, path, "bbbb")
				if err := os.Chtimes(path, mtime, mtime); err != nil {
					t.Fatal(err)
				}
			})
			if !progress {
				t.Error("a same-size rewrite with the mtime set back was not seen")
			}
		})
	}
}

// An unchanged file whose mtime is old is not read again: the stat cache
// answers.
func TestWorkspaceReadsOnlyChangedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for i := range 5 {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		writeFile(t, p, strings.Repeat("x", i))
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	var ws workspace
	pass := func() tally {
		f := newFP()
		tl, err := ws.hash(context.Background(), dir, "", &f)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	if tl := pass(); tl.files != 5 || tl.read != 5 {
		t.Fatalf("first pass: %+v", tl)
	}
	if tl := pass(); tl.files != 5 || tl.read != 0 {
		t.Fatalf("unchanged tree read again: %+v", tl)
	}
	writeFile(t, filepath.Join(dir, "f2"), "yy")
	if tl := pass(); tl.read != 1 {
		t.Fatalf("one changed file: %+v", tl)
	}
	if err := os.Remove(filepath.Join(dir, "f0")); err != nil {
		t.Fatal(err)
	}
	if tl := pass(); tl.files != 4 || len(ws.files) != 4 {
		t.Fatalf("deleted file still cached: %+v, %d cached", tl, len(ws.files))
	}
}

// The success verdicts are part of the fingerprint; their evidence is not.
// Hashing the files git listed stops when the check's context ends, as
// the walk does, instead of reading every file past the check's timeout.
func TestWorkspaceListedStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var paths []string
	for i := range 3 {
		name := fmt.Sprintf("f%d", i)
		writeFile(t, filepath.Join(dir, name), name)
		paths = append(paths, name)
	}
	var ws workspace
	ws.files, ws.buf = map[string]*fileState{}, make([]byte, 4096)
	noSkip := func(string) bool { return false }
	var tl tally
	f := newFP()
	if err := ws.addListed(context.Background(), dir, paths, noSkip, &f, &tl); err != nil || tl.read != 3 {
		t.Fatalf("listed files hashed: %+v, %v", tl, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tl, f = tally{}, newFP()
	ws.files = map[string]*fileState{}
	if err := ws.addListed(ctx, dir, paths, noSkip, &f, &tl); !errors.Is(err, context.Canceled) || tl.read != 0 {
		t.Fatalf("with the context ended: %+v, %v; want nothing read and context.Canceled", tl, err)
	}
}

func TestNoProgressSeesVerdicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := mustCond(t, config.Stop{Kind: "no_progress", Iterations: 1})
	steps := []struct {
		verdicts []verdict
		met      bool
	}{
		{[]verdict{{"tests", false, ClassSuccess}}, false},
		{[]verdict{{"tests", false, ClassSuccess}, {"budget", true, ClassLimit}}, true}, // a limit verdict is no progress
		{[]verdict{{"tests", true, ClassSuccess}}, false},
	}
	for i, s := range steps {
		o := c.check.check(context.Background(), &Input{Iteration: i + 1, Workdir: dir, verdicts: s.verdicts})
		if o.met != s.met {
			t.Errorf("step %d: met %t, want %t (%s)", i+1, o.met, s.met, o.evidence)
		}
	}
}

// no_progress, even inside a composite, is checked after the conditions
// whose verdicts it reads, and results keep priority order.
func TestEvaluatorChecksNoProgressAfterVerdicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flag := filepath.Join(dir, "..", filepath.Base(dir)+".done") // outside the workdir: only the verdict changes
	t.Cleanup(func() { os.Remove(flag) })
	for _, opts := range []Options{{}, {Sequential: true}} {
		e := NewEvaluator([]*Condition{
			mustCond(t, config.Stop{Name: "stuck", Kind: "any", Class: "failure", Conditions: []config.Stop{{Kind: "no_progress", Iterations: 1}}}),
			mustCond(t, config.Stop{Name: "done", Kind: "file_exists", Path: flag, Class: "success", Priority: intp(1)}),
		}, opts)
		ev1, err := e.Evaluate(context.Background(), Input{Iteration: 1, Workdir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if ev1.Results[0].Name != "stuck" || ev1.Results[1].Name != "done" || ev1.ShouldStop {
			t.Fatalf("first evaluation: %+v", ev1.Results)
		}
		writeFile(t, flag, "")
		ev2, err := e.Evaluate(context.Background(), Input{Iteration: 2, Workdir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if ev2.TriggeredBy != "done" || ev2.Results[0].Met {
			t.Errorf("a changed verdict is progress: %+v", ev2)
		}
		os.Remove(flag)
	}
}

// The store is skipped however its path and the workdir's are spelled: as
// given, relative, or through a symlink to the same directory.
func TestStoreSkipper(t *testing.T) {
	t.Parallel()
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		testenv.Need(t, "symlinks", err)
	}
	if err := os.Mkdir(filepath.Join(real, "st"), 0o755); err != nil { // a store exists by the time it is skipped
		t.Fatal(err)
	}
	cases := []struct {
		root, store string
		skipped     []string
		kept        []string
	}{
		{real, "", []string{".ralph", ".ralph/000001.vlog"}, []string{"ralph", ".ralphrc", "src/.ralph"}},
		{real, filepath.Join(real, "state", "store"), []string{"state/store", "state/store/KEYREGISTRY"}, []string{"state", "state/storex", ".ralph"}},
		{real, "state/store", []string{"state/store/x"}, []string{"state/x"}},
		{link, filepath.Join(real, "st"), []string{"st/x"}, []string{"s"}},
		{real, filepath.Join(t.TempDir(), "elsewhere"), nil, []string{".ralph/x", "elsewhere"}},
	}
	for _, tc := range cases {
		skip := storeSkipper(tc.root, tc.store)
		for _, p := range tc.skipped {
			if !skip(p) {
				t.Errorf("root %s, store %q: %s not skipped", tc.root, tc.store, p)
			}
		}
		for _, p := range tc.kept {
			if skip(p) {
				t.Errorf("root %s, store %q: %s skipped", tc.root, tc.store, p)
			}
		}
	}
}
