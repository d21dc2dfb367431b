package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

const agentCallID = "0193a1b2-0000-7000-8000-agentcall001"

// agentEvents is what a coding agent streams in one call: text in chunks
// that split lines, a tool use and its result, usage and cost.
func agentEvents(it int, at time.Time) []loop.Event {
	evs := []*agent.Event{
		{Kind: agent.EventSession, SessionID: "sess-1"},
		{Kind: agent.EventText, Text: "I'll run the tests first to see what fa"},
		{Kind: agent.EventText, Text: "ils.\n"},
		{Kind: agent.EventToolUse, Tool: "Bash", ToolID: "t1", Input: "go test ./..."},
		{Kind: agent.EventToolResult, ToolID: "t1", Text: "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4", IsError: true},
		{Kind: agent.EventUsage, Usage: agent.Usage{Input: 900, Output: 120}},
		{Kind: agent.EventText, Text: "The test expects Add(2, 2) == 4; fixing add.go.\x1b[2J\x07"},
		{Kind: agent.EventToolUse, Tool: "Edit", ToolID: "t2", Input: "add.go"},
		{Kind: agent.EventToolResult, ToolID: "t2", Text: "ok"},
	}
	out := make([]loop.Event, len(evs))
	for i, e := range evs {
		out[i] = loop.Event{Kind: loop.EventAgent, Iteration: it, Agent: e, CallID: agentCallID, Time: at}
	}
	return out
}

// agentCall is the CapabilityCall the runner records when the call ends.
func agentCallAction(parent string, at time.Time) ledger.Action {
	return ledger.Action{Seq: 9999, ActionID: agentCallID, Type: ledger.CapabilityCall, ParentActionID: parent, RunID: fixtureRun,
		FunctionName: "agent.run", Success: true, Cost: 0.4, DurationMS: 83_000, Timestamp: at,
		Metadata: map[string]rtfs.Value{"exit": rtfs.String("0"), "prompt_tokens": rtfs.String("1000"),
			"completion_tokens": rtfs.String("200"), "cost_usd": rtfs.String("0.4")}}
}

// agentModel is a live model in iteration 1's Greet step while an agent
// call streams.
func agentModel(t *testing.T, w, h int) (*model, []ledger.Action) {
	t.Helper()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, w, h)
	greet := seqOf(t, stored, ledger.PlanStepStarted, "Greet", 1)
	feed(m, stored[:greet])
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventState, State: loop.StateRunning}}})
	m.Update(eventsMsg{events: agentEvents(1, m.now().Add(-83*time.Second))})
	return m, stored
}

// The running agent call's streamed text and tool uses show live, with
// how long it has run; when its call is recorded the pane says how it
// ended and the header counts its spend and tokens.
func TestAgentOutputPane(t *testing.T) {
	t.Parallel()
	m, stored := agentModel(t, 120, 40)
	v := m.View()
	for _, want := range []string{"┌─ Agent ─", "⟳ 1m23s · 1.0k tok · 2 tool",
		"I'll run the tests first to see what fails.", "⚙ Bash  go test ./...", "↳ ✗ --- FAIL: TestAdd (0.00s) …",
		"The test expects Add(2, 2) == 4; fixing add.go.", "⚙ Edit  add.go", "↳ ok"} {
		if !strings.Contains(v, want) {
			t.Errorf("pane lacks %q:\n%s", want, v)
		}
	}
	if h := strings.SplitN(v, "\n", 2)[0]; !strings.Contains(h, "1.0k tok") {
		t.Errorf("header does not count the running call's tokens: %q", h)
	}
	// A tool use is recorded as it ends, before its call: it shows under
	// the running step.
	greetStep := seqOf(t, stored, ledger.PlanStepStarted, "Greet", 1)
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventAction, Action: &ledger.Action{Seq: 9998, ActionID: "tool-1",
		Type: ledger.AgentToolUse, ParentActionID: agentCallID, RunID: fixtureRun, FunctionName: "Bash", Success: true,
		Arguments: []rtfs.Value{rtfs.String("go test ./...")}, DurationMS: 2000}}}})
	tool := findRow(t, m, "tool Bash")
	if p := m.tree.at(tool).parent; p < 0 || m.tree.at(p).seq != greetStep {
		t.Errorf("the tool use hangs under row %d, not the running step", p)
	}
	if !strings.Contains(m.View(), "tool Bash  go test ./...") {
		t.Errorf("the tool use row does not show its input:\n%s", m.View())
	}
	v = m.View()
	if strings.Contains(v, "\x1b[2J") || strings.Contains(v, "\x07") {
		t.Error("the agent's escape sequences reach the terminal")
	}
	greet := seqOf(t, stored, ledger.PlanStepStarted, "Greet", 1)
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventAction, Action: ptr(agentCallAction(stored[greet-1].ActionID, m.now()))}}})
	v = m.View()
	for _, want := range []string{"✓ exit 0 · 1m23s · $0.40 · 1.2k tok"} {
		if !strings.Contains(v, want) {
			t.Errorf("after the call ended, the screen lacks %q:\n%s", want, v)
		}
	}
	if h := strings.SplitN(v, "\n", 2)[0]; !strings.Contains(h, "$0.40") || !strings.Contains(h, "1.2k tok") {
		t.Errorf("header does not count the agent's spend: %q", h)
	}
	// o shows the plan instead, and o again the output.
	press(m, "o")
	if v := m.View(); strings.Contains(v, "┌─ Agent ─") || !strings.Contains(v, "Plan") {
		t.Errorf("o does not show the plan:\n%s", v)
	}
	press(m, "o")
	if !strings.Contains(m.View(), "┌─ Agent ─") {
		t.Error("o again does not show the output")
	}
}

func ptr[T any](v T) *T { return &v }

// One call keeps its last maxOutputLines lines and says how many it cut;
// a new call starts over.
func TestAgentOutputIsBounded(t *testing.T) {
	t.Parallel()
	p := newOutputPane(newStyles(&strings.Builder{}, 0), time.Now)
	for i := range 2500 {
		p.add("call-1", 1, time.Now(), &agent.Event{Kind: agent.EventText, Text: fmt.Sprintf("line %d\n", i)})
	}
	if n := len(p.call.lines); n > maxOutputLines || p.call.first+n != 2500 {
		t.Fatalf("%d lines kept from %d: want at most %d, ending at line 2499", n, p.call.first, maxOutputLines)
	}
	v := p.Render(60, 10)
	if !strings.Contains(v, "line 2499") || strings.Contains(v, "line 2490\n") {
		t.Errorf("the pane does not end at the newest line:\n%s", v)
	}
	p.scrollBy(-1 << 20) // to the oldest line kept
	if v := p.Render(60, 10); !strings.Contains(v, "earlier lines not kept") {
		t.Errorf("the oldest kept line does not say lines were cut:\n%s", v)
	}
	p.add("call-2", 2, time.Now(), &agent.Event{Kind: agent.EventText, Text: "second call"})
	if len(p.call.lines) != 1 || p.call.iteration != 2 || p.offset != 0 {
		t.Errorf("a new call did not start over: %d lines, iteration %d", len(p.call.lines), p.call.iteration)
	}
}

func TestGoldenAgentOutput(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			m, _ := agentModel(t, size[0], size[1])
			golden.RequireEqual(t, []byte(m.View()+"\n"))
		})
	}
}
