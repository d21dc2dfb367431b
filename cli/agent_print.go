package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/loop"
)

// printAgent prints one streamed agent event headless: the agent's text
// line by line and each tool it uses, under the time and iteration like
// every other line. Usage, cost and session events are left to the call's
// record; the final text repeats what was streamed.
func (p *printer) printAgent(e *loop.Event, at string) {
	a := e.Agent
	prefix := fmt.Sprintf("%s it %-3d agent ", at, e.Iteration)
	switch a.Kind {
	case agent.EventText, agent.EventRaw:
		for _, line := range strings.Split(strings.TrimRight(a.Text, "\n"), "\n") {
			fmt.Fprintf(p.w, "%s| %s\n", prefix, line)
		}
	case agent.EventToolUse:
		fmt.Fprintf(p.w, "%s> %s %s\n", prefix, a.Tool, a.Input)
	case agent.EventRetry:
		if a.Retry != nil {
			fmt.Fprintf(p.w, "%s~ %s\n", prefix, agent.RetryLine(*a.Retry))
		}
	case agent.EventProgress:
		if a.Text != "" { // a bare heartbeat says nothing
			fmt.Fprintf(p.w, "%s… %s\n", prefix, oneLineText(a.Text))
		}
	case agent.EventToolResult:
		if a.IsError {
			fmt.Fprintf(p.w, "%s! %s\n", prefix, oneLineText(a.Text))
		}
	case agent.EventError:
		fmt.Fprintf(p.w, "%s! error: %s\n", prefix, oneLineText(a.Text))
	case agent.EventDenied:
		if d := a.Denial; d != nil {
			fmt.Fprintf(p.w, "%s! permission denied: %s\n", prefix, oneLineText(strings.TrimSpace(d.Tool+" "+d.Target)))
		}
	case agent.EventSandboxDenied:
		if d := a.Refusal; d != nil {
			fmt.Fprintf(p.w, "%s! %s\n", prefix, oneLineText(agent.RefusalLine(*d)))
		}
	}
}

// agentJSON is a streamed agent event as one --json line.
func agentJSON(e *loop.Event) map[string]any {
	a := e.Agent
	m := map[string]any{"event": e.Kind.String(), "time": e.Time.UTC().Format(time.RFC3339Nano),
		"run_id": e.RunID, "iteration": e.Iteration, "call_id": e.CallID, "kind": a.Kind.String()}
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set("text", a.Text, a.Text != "")
	set("tool", a.Tool, a.Tool != "")
	set("tool_id", a.ToolID, a.ToolID != "")
	set("input", a.Input, a.Input != "")
	set("is_error", a.IsError, a.IsError)
	set("cost_usd", a.CostUSD, a.Kind == agent.EventCost)
	set("session_id", a.SessionID, a.SessionID != "")
	if d := a.Denial; d != nil {
		m["denial"] = map[string]any{"tool": d.Tool, "target": d.Target, "message": d.Message}
	}
	if d := a.Refusal; d != nil {
		m["sandbox_denied"] = map[string]any{"what": d.What, "allow": d.Allow}
	}
	if a.Kind == agent.EventUsage {
		m["usage"] = map[string]int64{"input": a.Usage.Input, "output": a.Usage.Output,
			"cache_read": a.Usage.CacheRead, "cache_write": a.Usage.CacheWrite}
	}
	if l := a.Limit; l != nil {
		lm := map[string]any{"kind": l.Kind, "message": l.Message}
		if !l.Reset.IsZero() {
			lm["reset"] = l.Reset.UTC().Format(time.RFC3339)
			lm["reset_exact"] = l.Exact
		}
		m["limit"] = lm
	}
	if u, ok := m["usage"].(map[string]int64); ok {
		u["reasoning"] = a.Usage.Reasoning
	}
	if r := a.Retry; r != nil {
		rm := map[string]any{"line": agent.RetryLine(*r)}
		set := func(k string, v any, ok bool) {
			if ok {
				rm[k] = v
			}
		}
		set("status", r.Status, r.Status != 0)
		set("attempt", r.Attempt, r.Attempt != 0)
		set("max_attempts", r.Max, r.Max != 0)
		set("delay_ms", r.Delay.Milliseconds(), r.Delay > 0)
		set("message", r.Message, r.Message != "")
		m["retry"] = rm
	}
	return m
}

// marshalLine is m as one JSON line; the maps printed here hold only
// strings, numbers and booleans, which cannot fail to marshal.
func marshalLine(m map[string]any) []byte {
	b, _ := json.Marshal(m)
	return append(b, '\n')
}

// oneLineText is s on one line, its runs of white space made one space.
func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }
