package builtin

import (
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/rtfs"
)

// Reasoning tokens join :tokens and count toward max_tokens
// (completion_tokens); the model and the retries are on the record.
func TestAgentResultReasoningAndRetries(t *testing.T) {
	res := agent.Result{CLI: "codex", Model: "gpt-5-codex", CostUSD: 0.5, CostSource: "table",
		Tokens: agent.Usage{Input: 100, Output: 20, CacheRead: 1000, Reasoning: 300},
		Retries: []agent.Retry{
			{Status: 429, Attempt: 1, Max: 5, Delay: 2 * time.Second, Message: "Reconnecting... 1/5 (429 Too Many Requests)"},
			{Status: 503, Attempt: 2, Max: 5},
		},
		Limit: &agent.Limit{Kind: agent.LimitUsage, Reset: time.Unix(1762952400, 0), Exact: true}}
	r := agentResult(res)
	toks := r.Value.AsMap().GetKey("tokens").AsMap()
	if toks.GetKey("reasoning").AsInt() != 300 || toks.GetKey("output").AsInt() != 20 {
		t.Errorf(":tokens %s", rtfs.Print(rtfs.MapValue(toks)))
	}
	m := r.Metadata
	if m["reasoning_tokens"] != "300" || m["completion_tokens"] != "320" || m["prompt_tokens"] != "1100" {
		t.Errorf("tokens metadata %v", m)
	}
	if m["model"] != "gpt-5-codex" || m["cost_source"] != "table" || m["retries"] != "2" || m["limit_reset_exact"] != "true" {
		t.Errorf("metadata %v", m)
	}
	want := "retrying after 429 (attempt 1/5, next in 2s): Reconnecting... 1/5 (429 Too Many Requests)\nretrying after 503 (attempt 2/5)"
	if m["retry_log"] != want {
		t.Errorf("retry_log %q, want %q", m["retry_log"], want)
	}
	// The output type admits :reasoning.
	if err := agentRow().spec.Output.Check(r.Value); err != nil {
		t.Errorf("output type: %v", err)
	}
}

// A call that retried a hundred times lists the first ones, a count, and
// the last.
func TestRetryLogIsBounded(t *testing.T) {
	rs := make([]agent.Retry, 100)
	for i := range rs {
		rs[i] = agent.Retry{Status: 529, Attempt: i + 1, Max: 100}
	}
	log := retryLog(rs)
	lines := strings.Split(log, "\n")
	if len(lines) != maxRetryLog+1 || lines[maxRetryLog-1] != "… 80 more" || !strings.Contains(lines[maxRetryLog], "attempt 100/100") {
		t.Errorf("%d lines:\n%s", len(lines), log)
	}
}
