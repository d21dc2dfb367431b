package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// scriptReported scripts one iteration whose Test step runs `go test`
// under :check false, which exits 1, and whose Agent step's agent.run was
// stopped for idle output: both steps succeed, both calls report failure.
func scriptReported() []ledger.Action {
	s := &scripter{clock: fixtureStart}
	run := s.add(ledger.Action{Type: ledger.RunStarted, FunctionName: "Make the tests pass", Success: true}, 0)
	iter := s.add(ledger.Action{Type: ledger.IterationStarted, ParentActionID: run, FunctionName: "iteration 1", Success: true,
		Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(1)}}, 10)
	plan := s.add(ledger.Action{Type: ledger.PlanStarted, ParentActionID: iter, FunctionName: "iteration-1.rtfs", Success: true}, 1)
	step := func(name string, call ledger.Action, ms int64) {
		st := s.add(ledger.Action{Type: ledger.PlanStepStarted, ParentActionID: plan, FunctionName: name, Success: true}, 1)
		call.Type, call.ParentActionID, call.Success, call.DurationMS = ledger.CapabilityCall, st, true, ms
		s.add(call, ms)
		s.add(ledger.Action{Type: ledger.PlanStepCompleted, ParentActionID: st, FunctionName: name, Success: true, DurationMS: ms}, 1)
	}
	step("Agent", ledger.Action{FunctionName: "agent.run",
		Result: rtfs.MapValue(rtfs.NewMap(kwv("text"), rtfs.String(""), kwv("exit"), rtfs.Int(-1), kwv("stopped"), rtfs.String("idle-timeout")))}, 300000)
	step("Test", ledger.Action{FunctionName: "shell.exec",
		Result:   rtfs.MapValue(rtfs.NewMap(kwv("exit"), rtfs.Int(1), kwv("stdout"), rtfs.String("--- FAIL: TestAdd\nFAIL\n"))),
		Metadata: map[string]rtfs.Value{"exit": rtfs.String("1"), "cmd": rtfs.String("go test ./...")}}, 900)
	step("Build", ledger.Action{FunctionName: "shell.exec", Result: rtfs.MapValue(rtfs.NewMap(kwv("exit"), rtfs.Int(0))),
		Metadata: map[string]rtfs.Value{"exit": rtfs.String("0"), "cmd": rtfs.String("go build ./...")}}, 400)
	s.add(ledger.Action{Type: ledger.PlanCompleted, ParentActionID: plan, FunctionName: "iteration-1.rtfs", Success: true, DurationMS: 301400}, 1)
	s.add(ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iter, FunctionName: "iteration 1", Success: true, DurationMS: 301402,
		Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(1), "status": rtfs.String("ok")}}, 1)
	s.add(ledger.Action{Type: ledger.RunStopped, ParentActionID: run, FunctionName: "enough", ErrorMessage: "max_iterations 1 reached",
		Metadata: map[string]rtfs.Value{"condition": rtfs.String("enough"), "class": rtfs.String("limit"), "reason": rtfs.String("max_iterations 1 reached")}}, 1)
	return s.acts
}

// A call that ran but reported failure is marked "!" with how it failed,
// in the chain pane, the filter and the detail view, while its step stays ✓.
func TestReportedFailureIsShown(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptReported())
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	rows := rowTexts(m)
	for _, want := range []string{"▾ ✓ Agent", "! agent.run  idle-timeout", "▾ ✓ Test", "! shell.exec  exit 1 · go test ./...",
		"▾ ✓ Build", "✓ shell.exec  go build ./..."} {
		found := false
		for _, r := range rows {
			found = found || strings.HasPrefix(r, want)
		}
		if !found {
			t.Errorf("no row starts %q:\n%s", want, strings.Join(rows, "\n"))
		}
	}

	m.tree.setFilter(parseFilter("is:failed"))
	var failed []string
	m.tree.sync()
	for _, idx := range m.tree.visible {
		failed = append(failed, m.tree.at(idx).label)
	}
	if got := strings.Join(failed, ","); got != "agent.run,shell.exec" {
		t.Errorf("is:failed shows %q, want the two calls that reported failure", got)
	}
	m.tree.setFilter(nil)

	m.Update(runDoneMsg{})
	selectSeq(t, m, seqOf(t, stored, ledger.CapabilityCall, "shell.exec", 1))
	press(m, "enter")
	if v := m.View(); !strings.Contains(v, "! ran, reported exit 1") || !strings.Contains(v, "#8 CapabilityCall shell.exec ! exit 1 900ms") {
		t.Errorf("detail of the failing test call:\n%s", v)
	}
}

func TestGoldenReported(t *testing.T) {
	st, stored := fixtureStore(t, scriptReported())
	m := testModel(t, st, true, 80, 24)
	feed(m, stored)
	m.Update(runDoneMsg{})
	golden.RequireEqual(t, []byte(m.View()+"\n"))
}
