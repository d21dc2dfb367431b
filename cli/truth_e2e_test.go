package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/ledger"
)

// napConfig sleeps through shell.exec in iteration 1 only, with extra
// [[stop]] tables after a max_iterations of 2.
func napConfig(extra string) string {
	return `[intent]
goal = "Nap, then wake"
[model]
provider = "static"
[plan]
rtfs = '''(do (step "Nap" (if (= (:iteration ctx) 1) (call :shell.exec {:cmd "sleep" :args ["30"]}) :awake)))'''
[governance]
shell_allow = ["sleep"]
[[stop]]
name = "two"
kind = "max_iterations"
max = 2
` + extra
}

// runsClosed checks that `ralph runs` lists every run of store closed.
func runsClosed(t *testing.T, e *e2e.E, store string) []map[string]any {
	t.Helper()
	out, errOut, code := e.Ralph("runs", "--json", "--store", store).Run()
	if code != 0 {
		t.Fatalf("runs: exit %d %s", code, errOut)
	}
	var runs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("runs line %q: %v", l, err)
		}
		switch r["state"] {
		case "done", "failed", "stopped", "aborted":
		default:
			t.Errorf("run %v is %v, not closed", r["id"], r["state"])
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		t.Fatal("no run listed")
	}
	return runs
}

// Each failure mode of a run ends it with its closing action, and a call
// cut short is recorded as cancelled, by whom, never as a timeout.
var _ = suite.Add(e2e.Test{Name: "EveryFailureModeClosesTheRun", Run: func(t *testing.T, e *e2e.E) {
	cases := []struct {
		name   string
		extra  string
		signal syscall.Signal
		code   int
		want   []string // in the output of chain show --tree
	}{
		{name: "ctrl-c", signal: syscall.SIGINT, code: 4,
			want: []string{"CapabilityCall shell.exec CANCELLED by signal (shell.exec sleep: cancelled (interrupt signal received)", "RunAborted user_signal"}},
		{name: "sigterm", signal: syscall.SIGTERM, code: 4,
			want: []string{"CapabilityCall shell.exec CANCELLED by signal (shell.exec sleep: cancelled (terminated signal received)", "RunAborted user_signal"}},
		{name: "predicate type error", signal: syscall.SIGINT, code: 4, extra: `[[stop]]
name = "three"
kind = "predicate"
rtfs = '(>= (audit.count "Nap" :succeeded) "three")'
`, want: []string{"RunAborted user_signal"}},
		{name: "predicate type error, no signal", code: 1, extra: `[[stop]]
name = "three"
kind = "predicate"
rtfs = '(and (>= (audit.iteration) 2) (>= (audit.count "Nap" :succeeded) "three"))'
`, want: []string{`RunFailed three FAILED (could not be evaluated: `, `ralph.toml:13: [[stop]] "three": rtfs:1:31: >= expects a number`}},
		{name: "command cannot start", code: 1, extra: `[[stop]]
name = "check"
kind = "command"
cmd = ["./missing-check.sh"]
`, want: []string{`RunFailed check FAILED (could not be evaluated: `, `ralph.toml:13: [[stop]] "check": fork/exec ./missing-check.sh`}},
	}
	for _, tc := range cases {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
			writeFile(t, cfg, napConfig(tc.extra))
			args := []string{"run", cfg, "--no-tui", "--store", store}
			if tc.signal == 0 {
				// Nothing to interrupt: iteration 1 sleeps, so a plan without it.
				writeFile(t, cfg, strings.Replace(napConfig(tc.extra), `(call :shell.exec {:cmd "sleep" :args ["30"]})`, `:dozing`, 1))
				out, errOut, code := e.Ralph(args...).Run()
				if code != tc.code {
					t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
				}
			} else {
				ralph := e.Ralph(args...).Start()
				ralph.WaitLine("PlanStepStarted Nap")
				if err := ralph.Signal(tc.signal); err != nil {
					t.Fatal(err)
				}
				out := ralph.Rest()
				if code := exitCode(ralph.Wait()); code != tc.code {
					t.Fatalf("exit %d, want %d\n%s", code, tc.code, out)
				}
			}
			tree, errOut, code := e.Ralph("chain", "show", "--tree", "--store", store).Run()
			if code != 0 {
				t.Fatalf("chain show: exit %d %s", code, errOut)
			}
			runs := runsClosed(t, e, store)
			said := tree + fmt.Sprint(runs[0]["reason"])
			for _, w := range tc.want {
				if !strings.Contains(said, w) {
					t.Errorf("chain show --tree and the run's reason lack %q:\n%s", w, said)
				}
			}
			if strings.Contains(said, "timed out") {
				t.Errorf("a cancellation is recorded as a timeout:\n%s", said)
			}
		})
	}
}})

// A run left open by a killed process with a predicate that cannot be
// evaluated resumes, and closes as failed instead of dying again.
var _ = suite.Add(e2e.Test{Name: "ResumeClosesARunWithAFailingPredicate", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
	// The first process sleeps and is killed; the resumed one finds "slept".
	writeFile(t, cfg, `[intent]
goal = "Nap once"
[model]
provider = "static"
[plan]
rtfs = '''
(do (step "Nap"
  (if (call :kv.get {:key "slept"})
    :awake
    (do (call :kv.put {:key "slept" :value true})
        (call :shell.exec {:cmd "sleep" :args ["30"]})))))
'''
[governance]
shell_allow = ["sleep"]
[[stop]]
kind = "max_iterations"
max = 3
[[stop]]
name = "three"
kind = "predicate"
rtfs = '(>= (audit.count "Nap" :succeeded) "three")'
`)
	cmd := e.Ralph("run", cfg, "--no-tui", "--store", store).Start()
	cmd.WaitLine("CapabilityCall kv.put") // "slept" is recorded; sleep starts next
	_ = cmd.Kill()                        // SIGKILL: the run is left open
	_ = cmd.Wait()
	out, _, _ := e.Ralph("runs", "--json", "--store", store).Run()
	var rec struct{ ID, State string }
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &rec); err != nil || rec.State != "interrupted" {
		t.Fatalf("run record %q: %v", out, err)
	}
	out, errOut, code := e.Ralph("resume", rec.ID, "--no-tui", "--store", store).Run()
	if code != 1 || !strings.Contains(out, "failed after 1 iteration(s)") || !strings.Contains(out, `[[stop]] "three": rtfs:1:1: >= expects a number`) {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	runsClosed(t, e, store)
}})

// chain show --tree prints each StopConditionsEvaluated under the iteration
// it evaluated, not after the whole run.
var _ = suite.Add(e2e.Test{Name: "ChainTreeShowsEvaluationsUnderTheirIteration", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	quickstartRun(t, e, store)
	tree, errOut, code := e.Ralph("chain", "show", "--tree", "--store", store).Run()
	if code != 0 {
		t.Fatalf("chain show --tree: exit %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(tree), "\n")
	evals, iter := 0, ""
	for _, l := range lines {
		if strings.Contains(l, "IterationStarted") {
			iter = l
		}
		if !strings.Contains(l, "StopConditionsEvaluated") {
			continue
		}
		evals++
		if !strings.HasPrefix(l, "│  └─ ") || iter == "" {
			t.Errorf("evaluation %q is not the last child of an iteration", l)
		}
	}
	if evals != 3 || !strings.Contains(lines[len(lines)-1], "RunCompleted") {
		t.Errorf("%d evaluations; tree:\n%s", evals, tree)
	}
}})

// A skip (s in the UI) during a long shell.exec cancels the call: it is
// recorded as cancelled by the skip, never as a timeout, the iteration as
// skipped, and the loop goes on. The running step shows its elapsed time.
var _ = suite.Add(e2e.Test{Name: "SkipInTheUIRecordsTheCallCancelled", Needs: []e2e.Need{e2e.Tmux}, Files: map[string]string{"ralph.toml": napConfig("")}, Run: func(t *testing.T, e *e2e.E) {
	dir := e.Dir
	store := filepath.Join(dir, "store")
	tm := e.Ralph("run", "ralph.toml", "--store", store).In(dir).Term()
	if s := tm.WaitIdle(seqOf(t, store, ledger.PlanStepStarted, "Nap")); !strings.Contains(s, "⟳ Nap") {
		t.Fatalf("the UI, idle past the start of Nap, does not show it running:\n%s", s)
	}
	nap := regexp.MustCompile(`⟳ Nap\s+[1-9][0-9]*s`) // its elapsed time, counting
	tm.WaitScreen(nap.String(), nap.MatchString)
	tm.Send("s")
	if s := tm.WaitIdle(e2e.UntilEnd); !strings.Contains(s, "Stopped by two") {
		t.Fatalf("the run's end lacks its stop:\n%s", s)
	} else if !strings.Contains(s, "↷ Iteration 1") {
		t.Errorf("the skipped iteration is not marked skipped:\n%s", s)
	}
	tm.Send("q")
	if code := tm.Exit(); code != 3 {
		t.Fatalf("ralph run exited %d, want 3 (max_iterations):\n%s", code, tm.Screen())
	}
	tree, errOut, code := e.Ralph("chain", "show", "--tree", "--store", store).Run()
	if code != 0 {
		t.Fatalf("chain show: exit %d %s", code, errOut)
	}
	for _, want := range []string{
		"CapabilityCall shell.exec CANCELLED by skip (shell.exec sleep: cancelled (iteration skipped by the user); the process group was killed)",
		"PlanStepFailed Nap CANCELLED by skip",
		"PlanAborted iteration-1.rtfs CANCELLED by skip",
		"IterationCompleted iteration 1 CANCELLED by skip",
		"IterationCompleted iteration 2 ok",
		"RunStopped two",
	} {
		if !strings.Contains(tree, want) {
			t.Errorf("chain show --tree lacks %q:\n%s", want, tree)
		}
	}
	if strings.Contains(tree, "timed out") {
		t.Errorf("the skip is recorded as a timeout:\n%s", tree)
	}
}})

// The UI shows what the agent streams while its call runs; an abort then
// cancels the call, recorded as cancelled by the abort.
var _ = suite.Add(e2e.Test{Name: "AgentOutputInTheUI", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e, "FAKE_AGENT_DELAY=2") // each line of the stream two seconds after the last
	tm := p.cmd("run").Term()
	tm.WaitFor("Working on step 1 of 3.")
	running := regexp.MustCompile(`Agent ─+ ⟳ \d+s`) // still running
	s := tm.WaitScreen(running.String(), running.MatchString)
	if !strings.Contains(s, "⟳ agent.run") && !strings.Contains(s, "⟳ Agent") {
		t.Errorf("the agent's step is not shown running:\n%s", s)
	}
	tm.Send("a")
	tm.WaitFor("Abort the run?")
	tm.Send("y")
	if s := tm.WaitIdle(e2e.UntilEnd); !strings.Contains(s, "Aborted by user_abort") {
		t.Fatalf("the run's end lacks the abort:\n%s", s)
	}
	tm.Send("q")
	if code := tm.Exit(); code != 4 {
		t.Fatalf("ralph run exited %d, want 4 (aborted):\n%s", code, tm.Screen())
	}
	tree, errOut, code := p.ralph("chain", "show", "--tree")
	if code != 0 {
		t.Fatalf("chain show: exit %d %s", code, errOut)
	}
	if !strings.Contains(tree, "CapabilityCall agent.run CANCELLED by abort (agent.run: claude was cancelled (aborted by the user)") {
		t.Errorf("the aborted agent call is not recorded as cancelled by the abort:\n%s", tree)
	}
}})
