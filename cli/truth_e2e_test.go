package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
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
func runsClosed(t *testing.T, dir, store string) []map[string]any {
	t.Helper()
	out, errOut, code := runCommand(t, ralphBin, "", isolatedEnv(dir), "runs", "--json", "--store", store)
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
func TestE2EEveryFailureModeClosesTheRun(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
			writeFile(t, cfg, napConfig(tc.extra))
			args := []string{"run", cfg, "--no-tui", "--store", store}
			if tc.signal == 0 {
				// Nothing to interrupt: iteration 1 sleeps, so a plan without it.
				writeFile(t, cfg, strings.Replace(napConfig(tc.extra), `(call :shell.exec {:cmd "sleep" :args ["30"]})`, `:dozing`, 1))
				out, errOut, code := runCommand(t, ralphBin, "", isolatedEnv(dir), args...)
				if code != tc.code {
					t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard only
				defer cancel()
				cmd := exec.CommandContext(ctx, ralphBin, args...)
				cmd.Env = isolatedEnv(dir)
				pipe, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				lines := linesOf(pipe)
				waitLine(t, lines, "PlanStepStarted Nap")
				if err := cmd.Process.Signal(tc.signal); err != nil {
					t.Fatal(err)
				}
				out := rest(lines)
				if code := exitCode(cmd.Wait()); code != tc.code {
					t.Fatalf("exit %d, want %d\n%s", code, tc.code, out)
				}
			}
			tree, errOut, code := runCommand(t, ralphBin, "", isolatedEnv(dir), "chain", "show", "--tree", "--store", store)
			if code != 0 {
				t.Fatalf("chain show: exit %d %s", code, errOut)
			}
			runs := runsClosed(t, dir, store)
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
}

// A run left open by a killed process with a predicate that cannot be
// evaluated resumes, and closes as failed instead of dying again.
func TestE2EResumeClosesARunWithAFailingPredicate(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
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
	cmd, lines, _ := startHeadless(t, dir, cfg, store)
	waitLine(t, lines, "CapabilityCall kv.put") // "slept" is recorded; sleep starts next
	_ = cmd.Process.Kill()                      // SIGKILL: the run is left open
	_ = cmd.Wait()
	out, _, _ := runCommand(t, ralphBin, "", isolatedEnv(dir), "runs", "--json", "--store", store)
	var rec struct{ ID, State string }
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &rec); err != nil || rec.State != "interrupted" {
		t.Fatalf("run record %q: %v", out, err)
	}
	out, errOut, code := runCommand(t, ralphBin, "", isolatedEnv(dir), "resume", rec.ID, "--no-tui", "--store", store)
	if code != 1 || !strings.Contains(out, "failed after 1 iteration(s)") || !strings.Contains(out, `[[stop]] "three": rtfs:1:1: >= expects a number`) {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	runsClosed(t, dir, store)
}

// startHeadless starts `ralph run CFG --no-tui --store STORE` in dir's
// isolated environment (bounded by a two-minute hang guard) and returns
// the process, the lines it prints, and its stderr so far.
func startHeadless(t *testing.T, dir, cfg, store string) (*exec.Cmd, <-chan string, *strings.Builder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard only
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, ralphBin, "run", cfg, "--no-tui", "--store", store)
	cmd.Env = isolatedEnv(dir)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, linesOf(pipe), &errOut
}

// linesOf delivers r's lines as they come.
func linesOf(r io.Reader) <-chan string {
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// chain show --tree prints each StopConditionsEvaluated under the iteration
// it evaluated, not after the whole run.
func TestE2EChainTreeShowsEvaluationsUnderTheirIteration(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	quickstartRun(t, store)
	tree, errOut, code := runCommand(t, ralphBin, "", isolatedEnv(dir), "chain", "show", "--tree", "--store", store)
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
}

// tmuxScript writes a script that runs ralph with env (each KEY=VALUE) in
// dir, records its exit status in dir/exit and keeps the pane open, and
// returns the command that runs it: the test's environment is not the tmux
// server's, and values may hold quotes and newlines.
func tmuxScript(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\ncd " + shellQuote(dir) + "\n")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" || strings.ContainsAny(k, " ()") {
			continue
		}
		b.WriteString("export " + k + "=" + shellQuote(v) + "\n")
	}
	b.WriteString(shellQuote(ralphBin))
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\necho $? > exit\nsleep 120\n")
	script := filepath.Join(dir, "run-ralph.sh")
	if err := os.WriteFile(script, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// A skip (s in the UI) during a long shell.exec cancels the call: it is
// recorded as cancelled by the skip, never as a timeout, the iteration as
// skipped, and the loop goes on. The running step shows its elapsed time.
func TestE2ESkipInTheUIRecordsTheCallCancelled(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), napConfig(""))
	store := filepath.Join(dir, "store")
	tm := newTmux(t, tmuxScript(t, dir, isolatedEnv(dir), "run", "ralph.toml", "--store", store))
	tm.waitFor("⟳ Nap")
	nap := regexp.MustCompile(`⟳ Nap\s+[1-9][0-9]*s`) // its elapsed time, counting
	tm.waitScreen(nap.String(), nap.MatchString)
	tm.send("s")
	if s := tm.waitIdle(untilEnd); !strings.Contains(s, "Stopped by two") {
		t.Fatalf("the run's end lacks its stop:\n%s", s)
	} else if !strings.Contains(s, "↷ Iteration 1") {
		t.Errorf("the skipped iteration is not marked skipped:\n%s", s)
	}
	tm.send("q")
	if code := waitFile(t, filepath.Join(dir, "exit")); code != "3" {
		t.Fatalf("ralph run exited %s, want 3 (max_iterations):\n%s", code, tm.screen())
	}
	tree, errOut, code := runCommand(t, ralphBin, "", isolatedEnv(dir), "chain", "show", "--tree", "--store", store)
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
}

// The UI shows what the agent streams while its call runs; an abort then
// cancels the call, recorded as cancelled by the abort.
func TestE2EAgentOutputInTheUI(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	p := newAgentProject(t, "FAKE_AGENT_DELAY=2") // each line of the stream two seconds after the last
	tm := newTmux(t, tmuxScript(t, p.dir, p.env, "run"))
	tm.waitFor("Working on step 1 of 3.")
	running := regexp.MustCompile(`Agent ─+ ⟳ \d+s`) // still running
	s := tm.waitScreen(running.String(), running.MatchString)
	if !strings.Contains(s, "⟳ agent.run") && !strings.Contains(s, "⟳ Agent") {
		t.Errorf("the agent's step is not shown running:\n%s", s)
	}
	tm.send("a")
	tm.waitFor("Abort the run?")
	tm.send("y")
	if s := tm.waitIdle(untilEnd); !strings.Contains(s, "Aborted by user_abort") {
		t.Fatalf("the run's end lacks the abort:\n%s", s)
	}
	tm.send("q")
	if code := waitFile(t, filepath.Join(p.dir, "exit")); code != "4" {
		t.Fatalf("ralph run exited %s, want 4 (aborted):\n%s", code, tm.screen())
	}
	tree, errOut, code := p.ralph(t, "chain", "show", "--tree")
	if code != 0 {
		t.Fatalf("chain show: exit %d %s", code, errOut)
	}
	if !strings.Contains(tree, "CapabilityCall agent.run CANCELLED by abort (agent.run: claude was cancelled (aborted by the user)") {
		t.Errorf("the aborted agent call is not recorded as cancelled by the abort:\n%s", tree)
	}
}
