package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/loop"
)

// A rate-limit wait that ends after midnight shows its date in the status
// line; a retry notice of the agent CLI shows in the output pane.
func TestWaitDateAndRetryNotice(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	now := time.Date(2026, 11, 25, 21, 59, 10, 0, time.Local)
	m.now = func() time.Time { return now }
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventWait, Until: time.Date(2026, 11, 26, 9, 59, 0, 0, time.Local), Text: "agent usage-limit"}}})
	if s := statusLine(m); !strings.Contains(s, "(at 2026-11-26 09:59:00)") {
		t.Errorf("status during a wait past midnight: %q", s)
	}
	m.output.add("call-1", 1, now, &agent.Event{Kind: agent.EventRetry, Retry: &agent.Retry{Status: 429, Attempt: 3, Max: 10, Delay: 8 * time.Second}})
	if l := m.output.call.lines; len(l) == 0 || l[len(l)-1].kind != outRetry || l[len(l)-1].text != "retrying after 429 (attempt 3/10, next in 8s)" {
		t.Errorf("output lines %+v, want the retry notice", l)
	}
}

// The output pane counts tokens and cost as the accumulator does: a
// call's totals replace what was counted, increments add up, and
// reasoning tokens count.
func TestOutputPaneUsageTotals(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	now := m.now()
	for _, e := range []agent.Event{
		{Kind: agent.EventUsage, Usage: agent.Usage{Input: 100, Output: 1}},
		{Kind: agent.EventUsage, Usage: agent.Usage{Input: 100, Output: 1}},
		{Kind: agent.EventUsage, Total: true, Usage: agent.Usage{Input: 300, Output: 50, Reasoning: 150}},
		{Kind: agent.EventCost, CostUSD: 0.25},
		{Kind: agent.EventCost, CostUSD: 0.25},
	} {
		m.output.add("call-1", 1, now, &e)
	}
	c := m.output.call
	if c.usage != (agent.Usage{Input: 300, Output: 50, Reasoning: 150}) || c.cost != 0.5 {
		t.Errorf("usage %+v cost %v", c.usage, c.cost)
	}
}
