package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// printed is what the headless printer writes for events, as text or --json.
func printed(t *testing.T, asJSON bool, events ...loop.Event) string {
	t.Helper()
	var out bytes.Buffer
	p := newPrinter(&out, asJSON)
	for i := range events {
		p.print(&events[i])
	}
	return out.String()
}

// A retry notice is shown live as "agent ~ retrying after 429 (attempt
// 3/10, next in 8s)", leaving out what the CLI did not say.
func TestPrinterRetryLine(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 0, 0, 0, time.Local)
	ev := func(r agent.Retry) loop.Event {
		return loop.Event{Kind: loop.EventAgent, Time: now, Iteration: 3, Agent: &agent.Event{Kind: agent.EventRetry, Retry: &r}}
	}
	text := printed(t, false, ev(agent.Retry{Status: 429, Attempt: 3, Max: 10, Delay: 8 * time.Second, Message: "Too Many Requests"}),
		ev(agent.Retry{Attempt: 2}))
	for _, want := range []string{"21:00:00 it 3   agent ~ retrying after 429 (attempt 3/10, next in 8s)\n",
		"21:00:00 it 3   agent ~ retrying (attempt 2)\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("printed\n%s\nwant the line %q", text, want)
		}
	}
	var m map[string]any
	line := printed(t, true, ev(agent.Retry{Status: 529, Attempt: 1, Max: 10, Delay: 1500 * time.Millisecond}))
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	r, _ := m["retry"].(map[string]any)
	if m["kind"] != "retry" || r["status"] != float64(529) || r["max_attempts"] != float64(10) || r["delay_ms"] != float64(1500) ||
		r["line"] != "retrying after 529 (attempt 1/10, next in 2s)" {
		t.Errorf("--json retry: %s", line)
	}
}

// A limit wait that ends tomorrow shows the date: "waiting until
// 2026-11-26 09:59:00", never a bare time that reads as today.
func TestPrinterWaitAcrossMidnightShowsTheDate(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 59, 10, 0, time.Local)
	text := printed(t, false,
		loop.Event{Kind: loop.EventWait, Time: now, Iteration: 4, Until: now.Add(12 * time.Hour).Truncate(time.Minute), Text: "agent usage-limit"},
		loop.Event{Kind: loop.EventWait, Time: now, Iteration: 4, Until: now.Add(50 * time.Second), Text: "agent usage-limit"})
	if !strings.Contains(text, "waiting until 2026-11-26 09:59:00: agent usage-limit") {
		t.Errorf("no date on a wait past midnight:\n%s", text)
	}
	if !strings.Contains(text, "waiting until 22:00:00: agent usage-limit") {
		t.Errorf("a wait that ends today shows the time only:\n%s", text)
	}
}

// A tool's progress notice is a short line ("agent … Bash running for
// 30s"), never raw JSON; a bare heartbeat prints nothing.
func TestPrinterProgressLine(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 0, 0, 0, time.Local)
	ev := func(text string) loop.Event {
		return loop.Event{Kind: loop.EventAgent, Time: now, Iteration: 2,
			Agent: &agent.Event{Kind: agent.EventProgress, Tool: "Bash", ToolID: "toolu_1", Text: text}}
	}
	if got, want := printed(t, false, ev("Bash running for 30s"), ev("")), "21:00:00 it 2   agent … Bash running for 30s\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

// The run's first line says how the table prices the agent's model when
// it does not name it; an agent call priced by a model's family says so
// on its line.
func TestPrinterPriceNotes(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 0, 0, 0, time.Local)
	var out bytes.Buffer
	p := newPrinter(&out, false)
	p.priceNote = agent.PriceNote("claude-opus-4-8[1m]")
	p.print(&loop.Event{Kind: loop.EventAction, Time: now, Action: &ledger.Action{Seq: 1, Type: ledger.RunStarted, FunctionName: "Fix it", Success: true}})
	p.print(&loop.Event{Kind: loop.EventAction, Time: now, Iteration: 1, Action: &ledger.Action{Seq: 9, Type: ledger.CapabilityCall,
		FunctionName: "agent.run", Success: true, Metadata: map[string]rtfs.Value{
			"priced_as": rtfs.String("gemini-3.8-flash as gemini-3.5-flash (family)")}}})
	for _, want := range []string{
		"#1 RunStarted Fix it ok (agent tokens: claude-opus-4-8[1m] is priced as claude-opus-4-7 (family))\n",
		"#9 CapabilityCall agent.run ok (priced gemini-3.8-flash as gemini-3.5-flash (family))\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed\n%s\nwant %q", out.String(), want)
		}
	}
}
