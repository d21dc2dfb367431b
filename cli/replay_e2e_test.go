package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// replayOut is what ralph replay --json prints.
type replayOut struct {
	Stopped    bool `json:"stopped"`
	Iteration  int  `json:"iteration"`
	Iterations []struct {
		Iteration  int         `json:"iteration"`
		Evaluation replayEval  `json:"evaluation"`
		Recorded   *replayEval `json:"recorded"`
		Unknown    []string    `json:"unknown"`
		Stop       bool        `json:"stop"`
		Class      string      `json:"class"`
		By         string      `json:"triggered_by"`
	} `json:"iterations"`
	Decision struct {
		Class  string `json:"class"`
		By     string `json:"triggered_by"`
		Before bool   `json:"before_next"`
	} `json:"decision"`
	RecordedIterations int `json:"recorded_iterations"`
	Recorded           struct {
		Class string `json:"class"`
		By    string `json:"triggered_by"`
	} `json:"recorded"`
	Summary  string `json:"summary"`
	ExitCode int    `json:"exit_code"`
}

type replayEval struct {
	ShouldStop bool   `json:"should_stop"`
	Class      string `json:"class"`
	By         string `json:"triggered_by"`
	Results    []struct {
		Name string `json:"name"`
		Met  bool   `json:"met"`
	} `json:"results"`
}

func replayJSON(t *testing.T, e *e2e.E, dir string, env []string, args ...string) (replayOut, int) {
	t.Helper()
	out, errOut, code := e.Ralph(append([]string{"replay", "--json"}, args...)...).In(dir).With(env...).Run()
	var r replayOut
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("replay %q: exit %d, output is not JSON: %v\n%s\n%s", args, code, err, out, errOut)
	}
	if r.ExitCode != code {
		t.Fatalf("replay %q exited %d but says %d", args, code, r.ExitCode)
	}
	return r, code
}

// assertSameAsRecorded checks that the replay of the recorded config
// gives exactly the recorded decision at every iteration, and the run's
// end, iteration, condition, class and exit code.
func assertSameAsRecorded(t *testing.T, r replayOut, code, runCode int) {
	t.Helper()
	if code != runCode || !r.Stopped || r.Iteration != r.RecordedIterations || r.Decision.By != r.Recorded.By || r.Decision.Class != r.Recorded.Class {
		t.Fatalf("replay of the recorded config: exit %d (run %d): %s", code, runCode, r.Summary)
	}
	for _, it := range r.Iterations {
		rec := it.Recorded
		if rec == nil {
			t.Fatalf("iteration %d: the run recorded no evaluation", it.Iteration)
		}
		ev := it.Evaluation
		if ev.ShouldStop != rec.ShouldStop || ev.Class != rec.Class || ev.By != rec.By || len(ev.Results) != len(rec.Results) {
			t.Fatalf("iteration %d: replayed %+v, recorded %+v", it.Iteration, ev, *rec)
		}
		for i := range ev.Results {
			if ev.Results[i] != rec.Results[i] {
				t.Fatalf("iteration %d: condition %+v replayed, %+v recorded", it.Iteration, ev.Results[i], rec.Results[i])
			}
		}
		if len(it.Unknown) > 0 {
			t.Fatalf("iteration %d: unknown %v", it.Iteration, it.Unknown)
		}
	}
}

// Every end-to-end scenario, replayed with the config it ran with, gives
// exactly the recorded decision at every iteration: success by a command,
// failure by no_progress, a limit by max_iterations, a budget that forbids
// the next iteration, and the ralph-classic example.
var _ = suite.Add(e2e.Test{Name: "ReplayRecordedConfig", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	cases := []struct {
		name    string
		env     []string
		edit    func(string) string
		example string
		code    int
		by      string
	}{
		{name: "tests pass", code: 0, by: "tests"},
		{name: "stuck", env: []string{"FAKE_AGENT_SCENARIO=stuck"}, code: 1, by: "stuck"},
		{name: "iterations", env: []string{"FAKE_AGENT_DONE_AFTER=9"}, edit: func(s string) string { return strings.Replace(s, "max = 20", "max = 3", 1) }, code: 3, by: "iterations"},
		{name: "budget", env: []string{"FAKE_AGENT_SCENARIO=costly", "FAKE_AGENT_DONE_AFTER=9"}, edit: func(s string) string { return strings.Replace(s, "usd = 10.0", "usd = 1.0", 1) }, code: 3, by: "budget"},
		{name: "ralph-classic", example: "../examples/ralph-classic", code: 0, by: "tests-green"},
	}
	for _, tc := range cases {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			p := gitProject(t, e, tc.env...)
			cfg := filepath.Join(p.dir, "ralph.toml")
			if tc.example != "" {
				for _, f := range []string{"ralph.toml", "PROMPT.md"} {
					b, err := os.ReadFile(filepath.Join(tc.example, f))
					if err != nil {
						t.Fatal(err)
					}
					writeFile(t, filepath.Join(p.dir, f), string(b))
				}
			}
			if tc.edit != nil {
				writeFile(t, cfg, tc.edit(p.read(t, "ralph.toml")))
			}
			out, errOut, code := p.ralph("run", "--no-tui")
			if code != tc.code || !strings.Contains(out, " by "+tc.by+" ") {
				t.Fatalf("run: exit %d, want %d by %s\n%s\n%s", code, tc.code, tc.by, out, errOut)
			}
			r, rcode := replayJSON(t, e, p.dir, p.env, p.runID(t), "--config", cfg)
			assertSameAsRecorded(t, r, rcode, code)
		})
	}
}})

// The quickstart example (a static plan that ends on a completion
// predicate) replays to its recorded decision too.
var _ = suite.Add(e2e.Test{Name: "ReplayQuickstart", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	p := &agentProject{e: e, dir: t.TempDir()}
	b, err := os.ReadFile("../examples/quickstart/ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(p.dir, "ralph.toml"), string(b))
	writeFile(t, filepath.Join(p.dir, ".gitignore"), ".ralph/\n")
	p.git(t, "init", "-q")
	out, errOut, code := p.ralph("run", "--no-tui")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	r, rcode := replayJSON(t, e, p.dir, p.env, p.runID(t), "--config", filepath.Join(p.dir, "ralph.toml"))
	assertSameAsRecorded(t, r, rcode, code)
	if r.Decision.By != "counted-to-three" {
		t.Fatalf("quickstart replay: %s", r.Summary)
	}
}})

// A changed config gives the right iteration and class: a tighter limit,
// a predicate, a command unknown without --rerun and checked with it
// against each iteration's checkpoint, never the user's work tree.
var _ = suite.Add(e2e.Test{Name: "ReplayChangedConfig", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	p := gitProject(t, e, "FAKE_AGENT_DONE_AFTER=4")
	if out, errOut, code := p.ralph("run", "--no-tui"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	run, base := p.runID(t), p.read(t, "ralph.toml")
	variant := func(name, text string) string {
		path := filepath.Join(t.TempDir(), name)
		writeFile(t, path, text)
		return path
	}
	tight := variant("tight.toml", strings.Replace(base, "max = 20", "max = 2", 1))
	r, code := replayJSON(t, e, p.dir, p.env, run, "--config", tight)
	if code != 3 || r.Iteration != 2 || r.Decision.By != "iterations" || r.Decision.Class != "limit" {
		t.Fatalf("tighter max_iterations: exit %d: %s", code, r.Summary)
	}
	// The UI's history view shows the same replay beside the recorded verdicts
	// (a subtest: without tmux it alone is skipped).
	e.Run("history view", func(t *testing.T, e *e2e.E) {
		tm := e.Ralph("view", run, "--replay", tight, "--store", filepath.Join(p.dir, ".ralph")).In(t.TempDir()).With(p.env...).With("PWD=" + p.dir).Term()
		if s := tm.WaitIdle(e2e.UntilEnd); !strings.Contains(s, "Done") {
			t.Fatalf("the view of the recorded run:\n%s", s)
		}
		tm.Send("v")
		tm.WaitFor("tight.toml would have stopped the run here: reached max_iterations 2")
	}, e2e.Tmux)
	promise := variant("promise.toml", base+"\n[[stop]]\nname = \"step-two\"\nkind = \"output_pattern\"\npattern = \"Step 2 of 4 is done\"\n")
	r, code = replayJSON(t, e, p.dir, p.env, run, "--config", promise)
	if code != 0 || r.Iteration != 2 || r.Decision.By != "step-two" {
		t.Fatalf("output_pattern: exit %d: %s", code, r.Summary)
	}
	count := variant("count.toml", strings.Replace(base, `cmd = ["go", "test", "./..."]`, `cmd = ["go", "test", "-count=1", "./..."]`, 1))
	r, code = replayJSON(t, e, p.dir, p.env, run, "--config", count)
	if code != 5 || r.Stopped || len(r.Iterations) != 4 || len(r.Iterations[0].Unknown) != 1 {
		t.Fatalf("changed command without --rerun: exit %d, want 5 with the command unknown: %s", code, r.Summary)
	}
	before, progress := p.userState(t), p.read(t, "progress.txt")
	writeFile(t, filepath.Join(p.dir, "calc.go"), "package calc\n\nfunc Add(a, b int) int { return 0 }\n") // the user's tree fails the tests now
	r, code = replayJSON(t, e, p.dir, p.env, run, "--config", count, "--rerun", "--jobs", "2")
	if code != 0 || r.Iteration != 4 || r.Decision.By != "tests" {
		t.Fatalf("changed command with --rerun: exit %d, want 0 at iteration 4: %s", code, r.Summary)
	}
	if after := p.userState(t); after != before || p.read(t, "progress.txt") != progress || !strings.Contains(p.read(t, "calc.go"), "return 0") {
		t.Fatalf("--rerun touched the user's work tree or git state:\n%s\n%s", before, after)
	}
	if wts, _ := filepath.Glob(filepath.Join(p.dir, ".git", "worktrees", "*")); len(wts) != 0 {
		t.Fatalf("--rerun left worktrees behind: %v", wts)
	}

	// Bad input: exit 2, one sentence naming the fix.
	bad := variant("bad.toml", "[[stop]]\nkind = \"max_iterations\"\nmax = \n")
	none := variant("none.toml", "[intent]\ngoal = \"x\"\n")
	other := t.TempDir()
	for _, args := range [][]string{
		{"replay", run, "--config", bad},
		{"replay", run, "--config", none},
		{"replay", run},
		{"replay", run, "--config", tight, "--store", other},
		{"replay", "no-such-run", "--config", tight},
	} {
		_, errOut, code := p.ralph(args...)
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("ralph %q: exit %d, want 2 and one sentence:\n%s", args, code, errOut)
		}
	}
	if _, errOut, _ := p.ralph("replay", run, "--config", bad); !strings.Contains(errOut, "bad.toml:3") {
		t.Errorf("a config that does not parse: %s, want its file:line", errOut)
	}
}})
