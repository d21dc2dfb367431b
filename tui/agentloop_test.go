package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// The agent loop as ralph init --agent writes it: an agent call on the
// prompt each iteration, the tests as the success condition, and the
// limits and failure conditions around them.
const agentLoopTOML = `
[intent]
goal = "Make the tests pass"
prompt_file = "PROMPT.md"

[agent]
cli = "claude"

[[stop]]
name = "tests"
kind = "command"
cmd = ["go", "test", "./..."]
class = "success"

[[stop]]
name = "iterations"
kind = "max_iterations"
max = 20

[[stop]]
name = "budget"
kind = "max_cost"
usd = 10.0

[[stop]]
name = "stuck"
kind = "no_progress"
iterations = 3

[[stop]]
name = "broken"
kind = "consecutive_failures"
count = 3
`

const (
	agentLoopPlan = `(do (step "Agent" (call :agent.run {:prompt "# Task\n\nMake the tests pass.\n"})))`
	goTestFail    = "--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(2, 3) = -1, want 5\nFAIL\nFAIL\tcalc\t0.002s\nFAIL\n"
)

// agentLoopEnd is how the scripted agent loop ends.
type agentLoopEnd int

const (
	agentMidRun agentLoopEnd = iota // iteration 3's agent call is streaming
	agentStuck                      // no_progress fires after iteration 3: the run fails
	agentGreen                      // the tests pass after iteration 3
)

// agentLoopEvaluation is the evaluation after iteration it: the tests fail
// until green, nothing changes in the workspace (stuck counts up).
func agentLoopEvaluation(it int, green bool) stop.Evaluation {
	cost := 0.14 * float64(it)
	tests := stop.Result{Name: "tests", Kind: "command", Class: stop.ClassSuccess, Priority: 60, Detail: "exit 1",
		Reason:   "go test ./... exited 1, want 0",
		Evidence: "$ go test ./...\nexit 1\n" + goTestFail, Duration: 944 * time.Millisecond}
	if green {
		tests.Met, tests.Progress, tests.Detail, tests.Reason = true, 1, "exit 0", "go test ./... exited 0"
		tests.Evidence = "$ go test ./...\nexit 0\nok  \tcalc\t0.002s\n"
	}
	unchanged := it - 1
	stuck := stop.Result{Name: "stuck", Kind: "no_progress", Class: stop.ClassFailure, Priority: 70,
		Progress: float64(unchanged) / 3, Detail: fmt.Sprintf("no progress %d/3", unchanged),
		Reason:   fmt.Sprintf("%d unchanged iterations of 3 allowed", unchanged),
		Evidence: "fingerprint 9f2c4e1a0b3d5f67 (4 files listed by git, 4 read; tests not met)", Duration: 2 * time.Millisecond}
	rs := []stop.Result{
		{Name: "iterations", Kind: "max_iterations", Class: stop.ClassLimit, Priority: 80, Progress: float64(it) / 20,
			Detail: fmt.Sprintf("%d/20", it), Reason: fmt.Sprintf("iteration %d of at most 20", it), Evidence: fmt.Sprintf("iteration %d", it)},
		{Name: "budget", Kind: "max_cost", Class: stop.ClassLimit, Priority: 80, Progress: cost / 10,
			Detail: fmt.Sprintf("$%.2f/$10.00", cost), Reason: fmt.Sprintf("$%.2f of $10.00", cost), Evidence: fmt.Sprintf("cost $%.4f", cost)},
		stuck,
		{Name: "broken", Kind: "consecutive_failures", Class: stop.ClassFailure, Priority: 70, Detail: "0/3 failures",
			Reason: "0 of 3 consecutive failures", Evidence: "0 failed iterations in a row"},
		tests,
	}
	ev := stop.Evaluation{Iteration: it, Results: rs, At: fixtureStart.Add(time.Duration(it) * time.Minute), Duration: 946 * time.Millisecond}
	switch {
	case green:
		ev.ShouldStop, ev.Class, ev.TriggeredBy, ev.Reason = true, stop.ClassSuccess, "tests", tests.Reason
	case unchanged >= 3:
		ev.Results[2].Met, ev.Results[2].Progress = true, 1
		ev.Results[2].Reason = "nothing changed for 3 iterations"
		ev.ShouldStop, ev.Class, ev.TriggeredBy, ev.Reason = true, stop.ClassFailure, "stuck", ev.Results[2].Reason
	}
	return ev
}

// agentLoopRun scripts the agent loop to end.
func agentLoopRun(end agentLoopEnd) []ledger.Action {
	s := &scripter{clock: fixtureStart}
	run := s.add(ledger.Action{Type: ledger.RunStarted, FunctionName: "Make the tests pass", Success: true,
		Metadata: map[string]rtfs.Value{"provider": rtfs.String("agent"), "model": rtfs.String("claude")}}, 0)
	iters := 3
	if end == agentStuck {
		iters = 4
	}
	for it := 1; it <= iters; it++ {
		iter := s.add(ledger.Action{Type: ledger.IterationStarted, ParentActionID: run, FunctionName: fmt.Sprintf("iteration %d", it),
			Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it))}}, 500)
		s.add(ledger.Action{Type: ledger.PlanGenerated, ParentActionID: iter, FunctionName: "agent", Success: true,
			Arguments: []rtfs.Value{rtfs.String(agentLoopPlan)},
			Metadata:  map[string]rtfs.Value{"mode": rtfs.String("agent"), "repairs": rtfs.Int(0)}}, 2)
		plan := s.add(ledger.Action{Type: ledger.PlanStarted, ParentActionID: iter, FunctionName: fmt.Sprintf("iteration-%d.rtfs", it),
			Arguments: []rtfs.Value{rtfs.String(agentLoopPlan)}, Success: true}, 1)
		step := s.add(ledger.Action{Type: ledger.PlanStepStarted, ParentActionID: plan, FunctionName: "Agent", Success: true}, 1)
		if end == agentMidRun && it == iters {
			break // the agent call streams
		}
		s.add(ledger.Action{Type: ledger.CapabilityCall, ParentActionID: step, FunctionName: "agent.run", Success: true,
			Cost: 0.14, DurationMS: 71_000, Metadata: map[string]rtfs.Value{"exit": rtfs.String("0"),
				"prompt_tokens": rtfs.String("12000"), "completion_tokens": rtfs.String("900")}}, 71_000)
		s.add(ledger.Action{Type: ledger.PlanStepCompleted, ParentActionID: step, FunctionName: "Agent", Success: true, DurationMS: 71_000}, 1)
		s.add(ledger.Action{Type: ledger.PlanCompleted, ParentActionID: plan, FunctionName: fmt.Sprintf("iteration-%d.rtfs", it),
			Success: true, DurationMS: 71_002}, 1)
		s.add(ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iter, FunctionName: fmt.Sprintf("iteration %d", it),
			Success: true, DurationMS: 71_004, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it)), "status": rtfs.String("ok")}}, 1)
		s.add(evaluationAction(run, agentLoopEvaluation(it, end == agentGreen && it == iters)), 946)
	}
	md := func(cond, class, reason, evidence string) map[string]rtfs.Value {
		return map[string]rtfs.Value{"condition": rtfs.String(cond), "class": rtfs.String(class),
			"reason": rtfs.String(reason), "evidence": rtfs.String(evidence)}
	}
	switch end {
	case agentStuck:
		s.add(ledger.Action{Type: ledger.RunFailed, ParentActionID: run, FunctionName: "stuck", ErrorMessage: "nothing changed for 3 iterations",
			Metadata: md("stuck", "failure", "nothing changed for 3 iterations", "the workspace and the tests' verdict are the same after iterations 2, 3 and 4")}, 1)
	case agentGreen:
		s.add(ledger.Action{Type: ledger.RunCompleted, ParentActionID: run, FunctionName: "tests", Success: true,
			Metadata: md("tests", "success", "go test ./... exited 0", "ok  \tcalc\t0.002s")}, 1)
	}
	return s.acts
}

func agentLoopConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(agentLoopTOML), "/work/ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// agentLoopModel is a live UI over the scripted agent loop, w×h.
func agentLoopModel(t *testing.T, end agentLoopEnd, w, h int) (*model, []ledger.Action) {
	t.Helper()
	st, stored := fixtureStore(t, agentLoopRun(end))
	o := &Options{Store: st, Config: agentLoopConfig(t), RunID: fixtureRun,
		Now: func() time.Time { return stored[len(stored)-1].Timestamp.Add(42 * time.Second) }}
	m := newModel(o, newStyles(&strings.Builder{}, termenv.Ascii))
	m.live, m.loading = true, false
	m.keys.live(true)
	m.chain.now = m.now
	m.Update(sizeMsg(w, h))
	feed(m, stored)
	switch end {
	case agentMidRun:
		m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventState, State: loop.StateRunning}}})
		m.Update(eventsMsg{events: agentEvents(3, m.now().Add(-40*time.Second))})
	default:
		m.Update(runDoneMsg{})
	}
	return m, stored
}

var agentLoopSizes = [][2]int{{80, 24}, {100, 30}, {120, 40}}

func TestGoldenAgentLoop(t *testing.T) {
	for _, c := range []struct {
		name string
		end  agentLoopEnd
	}{{"running", agentMidRun}, {"failed", agentStuck}, {"done", agentGreen}} {
		for _, size := range agentLoopSizes {
			t.Run(fmt.Sprintf("%s/%dx%d", c.name, size[0], size[1]), func(t *testing.T) {
				m, _ := agentLoopModel(t, c.end, size[0], size[1])
				golden.RequireEqual(t, []byte(m.View()+"\n"))
			})
		}
	}
}

// The help lists only what acts in the view it was opened from, wrapped
// to the screen: a live run's controls and what q does there; a recorded
// run has nothing to pause or approve, and q exits.
func TestGoldenHelp(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) *model
	}{
		{"live", func(t *testing.T) *model {
			m, _ := agentLoopModel(t, agentMidRun, 80, 40)
			press(m, "?")
			return m
		}},
		{"recorded", func(t *testing.T) *model {
			st, stored := fixtureStore(t, agentLoopRun(agentStuck))
			m := testModel(t, st, false, 80, 40)
			m.setConfig(agentLoopConfig(t), nil)
			feed(m, stored)
			m.Update(loadedMsg{})
			press(m, "?")
			return m
		}},
		{"history", func(t *testing.T) *model {
			m, _ := agentLoopModel(t, agentStuck, 80, 24)
			press(m, "v")
			press(m, "?")
			return m
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.setup(t)
			golden.RequireEqual(t, []byte(m.View()+"\n"))
			press(m, "esc")
			if want := map[string]screen{"live": nil, "recorded": nil, "history": m.history}[c.name]; m.modes.screen() != want {
				t.Errorf("esc from the help went to %T, want %T", m.modes.screen(), want)
			}
		})
	}
}
