package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

func TestRunnerWaitsOutALimitAndRunsTheIterationAgain(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.limited {:reset-ms 50}))'
[[stop]]
kind = "max_iterations"
max = 2
`, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Iterations != 2 || out.TriggeredBy != "max_iterations-1" {
		t.Errorf("outcome %+v: the limited iteration must not count", out)
	}
	var got []string
	for _, a := range runTypes(t, fx, out.RunID, ledger.IterationCompleted) {
		got = append(got, rtfs.Print(a.Metadata["iteration"])+":"+a.Metadata["status"].Str())
	}
	if strings.Join(got, " ") != "1:usage-limit 1:ok 2:ok" {
		t.Errorf("iterations %q, want iteration 1 limited, run again, then 2", got)
	}
	waits := runTypes(t, fx, out.RunID, ledger.RateLimitWait)
	if len(waits) != 1 || waits[0].Metadata["kind"].Str() != "usage-limit" || !waits[0].Metadata["reset_known"].AsBool() {
		t.Fatalf("waits %+v", waits)
	}
	// The limited call's spend counts: three calls at $0.01.
	if out.CostUSD < 0.0299 || out.CostUSD > 0.0301 {
		t.Errorf("cost $%v, want $0.03", out.CostUSD)
	}
	// Each tool use is a child of the call that reported it.
	calls := map[string]bool{}
	for _, c := range runTypes(t, fx, out.RunID, ledger.CapabilityCall) {
		calls[c.ActionID] = true
	}
	uses := runTypes(t, fx, out.RunID, ledger.AgentToolUse)
	if len(uses) != 3 {
		t.Errorf("%d tool uses, want 3", len(uses))
	}
	for _, u := range uses {
		if !calls[u.ParentActionID] || u.Seq == 0 {
			t.Errorf("tool use %+v is not under a recorded call", u)
		}
	}
	if _, err := fx.store.Verify(context.Background(), nil); err != nil {
		t.Errorf("verify: %v", err)
	}
}

func TestLimitAfterMaxDurationEndsTheRun(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.limited {:reset-ms 3600000}))'
[[stop]]
name = "hour"
kind = "max_duration"
duration = "30m"
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	// A run that slept toward the reset would be cut by this context (a
	// hang guard) and end aborted, not by max_duration.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "hour" || out.ExitCode != ExitLimit || !strings.Contains(out.Reason, "after max_duration 30m0s ends") {
		t.Errorf("outcome %+v (a run that slept toward the reset after its deadline instead of ending is cut short)", out)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.RateLimitWait)); n != 1 {
		t.Errorf("%d RateLimitWait actions, want the one recorded before deciding", n)
	}
}

func TestLimitedOnResume(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	wait := ledger.Action{Type: ledger.RateLimitWait, FunctionName: "usage-limit", ParentActionID: "iter-1",
		Metadata: map[string]rtfs.Value{"until": rtfs.String(until.Format(time.RFC3339Nano)), "message": rtfs.String("limit")}}
	done := ledger.Action{Type: ledger.IterationCompleted}
	lw := limitedOnResume([]ledger.Action{done, wait})
	if lw == nil || !lw.until.Equal(until) || lw.parent != "iter-1" || lw.limit.Kind != "usage-limit" {
		t.Errorf("a wait the crash interrupted: %+v", lw)
	}
	if lw := limitedOnResume([]ledger.Action{wait, {Type: ledger.IterationStarted}}); lw != nil {
		t.Errorf("a wait that was over (an iteration started after it): %+v", lw)
	}
}

// TestResumeWaitsOutAnInterruptedLimitWait: a process that died while it
// waited for a limit to lift left a RateLimitWait; the resumed run waits out
// the rest of it (the same until, not a new wait) before it runs the
// iteration again.
func TestResumeWaitsOutAnInterruptedLimitWait(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.limited {:reset-ms 3000}))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for a := range fx.store.Subscribe(ctx, 1) {
			if a.Type == ledger.RateLimitWait {
				cancel() // dies during the wait
				return
			}
		}
	}()
	out, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	markInterrupted(t, fx, out.RunID) // as a crash leaves it: still running
	waits := runTypes(t, fx, out.RunID, ledger.RateLimitWait)
	if len(waits) != 1 {
		t.Fatalf("%d waits before the resume", len(waits))
	}
	until, err := time.Parse(time.RFC3339Nano, waits[0].Metadata["until"].Str())
	if err != nil {
		t.Fatal(err)
	}

	r2 := resumer(t, r, fx, out.RunID, nil)
	evCtx, stopEvents := context.WithCancel(context.Background())
	defer stopEvents()
	events := r2.Events().Subscribe(evCtx, fx.store.Head().Seq+1)
	sawWait := make(chan time.Time, 1)
	go func() {
		for e := range events {
			if e.Kind == EventWait {
				sawWait <- e.Until
				return
			}
		}
	}()
	resumedAt := time.Now()
	out2, err := r2.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out2.Iterations != 1 || out2.ExitCode != ExitLimit {
		t.Errorf("resumed outcome %+v: iteration 1 runs again and completes", out2)
	}
	if resumedAt.Before(until) { // (on a machine so slow the limit had lifted, there is nothing to wait for)
		select {
		case got := <-sawWait:
			if !got.Equal(until) {
				t.Errorf("the resumed run waited until %v, want the recorded %v", got, until)
			}
		case <-time.After(10 * time.Second): // a guard against a hang, not a measurement
			t.Error("the resumed run did not wait for the limit the dead process was waiting for")
		}
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.RateLimitWait)); n != 1 {
		t.Errorf("%d RateLimitWait actions after the resume, want the one the dead process recorded", n)
	}
	var got []string
	for _, a := range runTypes(t, fx, out.RunID, ledger.IterationCompleted) {
		got = append(got, rtfs.Print(a.Metadata["iteration"])+":"+a.Metadata["status"].Str())
	}
	if strings.Join(got, " ") != "1:usage-limit 1:ok" {
		t.Errorf("iterations %q", got)
	}
}

// TestLimitPastMaxRateLimitWaitEndsTheRun: a reset 7 h away, past the
// default max_rate_limit_wait of 6 h, ends the run at once as a limit
// (exit 3), naming the reset and the key; no wait is recorded.
func TestLimitPastMaxRateLimitWaitEndsTheRun(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.limited {:reset-ms 25200000}))'
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	start := time.Now()
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "max_rate_limit_wait" || out.ExitCode != ExitLimit || out.Class != "limit" ||
		!strings.Contains(out.Reason, "longer than [agent] max_rate_limit_wait 6h0m0s") || !strings.Contains(out.Reason, "lifts at ") {
		t.Errorf("outcome %+v", out)
	}
	if time.Since(start) > 20*time.Second {
		t.Error("the run waited for a reset past max_rate_limit_wait")
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.RateLimitWait)); n != 0 {
		t.Errorf("%d RateLimitWait actions, want none: the run does not wait", n)
	}
}

// TestMaxRateLimitWaitFromConfig: [agent] max_rate_limit_wait = "1s"
// refuses a 3 s wait.
func TestMaxRateLimitWaitFromConfig(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, `[agent]
cli = "claude"
max_rate_limit_wait = "1s"
[plan]
rtfs = '(step "Agent" (call :test.limited {:reset-ms 3000}))'
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "max_rate_limit_wait" || out.ExitCode != ExitLimit || !strings.Contains(out.Reason, "max_rate_limit_wait 1s") {
		t.Errorf("outcome %+v", out)
	}
}

// TestOverloadedBacksOffShortly: an overloaded API with no reset is a
// transient: the loop waits 15 s (not the account limit's minute and
// more), records the wait, and runs the iteration again.
func TestOverloadedBacksOffShortly(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.limited {:reset-ms 0 :kind "overloaded"}))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for a := range fx.store.Subscribe(ctx, 1) {
			if a.Type == ledger.RateLimitWait {
				cancel() // the wait itself is what is under test
				return
			}
		}
	}()
	out, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waits := runTypes(t, fx, out.RunID, ledger.RateLimitWait)
	if len(waits) != 1 {
		t.Fatalf("%d waits", len(waits))
	}
	w := waits[0]
	if w.Metadata["kind"].Str() != "overloaded" || w.Metadata["reset_known"].AsBool() {
		t.Errorf("wait %+v", w.Metadata)
	}
	if d := time.Duration(w.DurationMS) * time.Millisecond; d < 14*time.Second || d > 16*time.Second {
		t.Errorf("overload backoff %v, want 15s", d)
	}
}

func TestLimitUntil(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	reset := now.Add(42 * time.Minute)
	cases := []struct {
		l     capability.Limit
		waits int
		want  time.Duration
	}{
		{capability.Limit{Kind: "usage-limit", Reset: reset}, 1, 42 * time.Minute},
		{capability.Limit{Kind: "usage-limit"}, 1, time.Minute},
		{capability.Limit{Kind: "rate-limit"}, 3, 4 * time.Minute},
		{capability.Limit{Kind: "usage-limit"}, 9, 30 * time.Minute},
		{capability.Limit{Kind: "overloaded"}, 1, 15 * time.Second},
		{capability.Limit{Kind: "overloaded"}, 2, 30 * time.Second},
		{capability.Limit{Kind: "overloaded"}, 9, 5 * time.Minute},
		{capability.Limit{Kind: "overloaded", Reset: now.Add(3 * time.Second)}, 4, 3 * time.Second},
		{capability.Limit{Kind: "usage-limit", Reset: now.Add(-time.Second)}, 1, -time.Second},     // just lifted: at once
		{capability.Limit{Kind: "usage-limit", Reset: now.Add(-10 * time.Minute)}, 1, time.Minute}, // long past: a backoff, not at once
	}
	for _, c := range cases {
		if got := limitUntil(c.l, now, c.waits).Sub(now); got != c.want {
			t.Errorf("limitUntil(%+v, wait %d) = %v, want %v", c.l, c.waits, got, c.want)
		}
	}
}

// TestWaitUntilText: a wait that ends today shows the time; one that
// crosses midnight shows the date too.
func TestWaitUntilText(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 30, 0, 0, time.Local)
	if got := WaitUntilText(now.Add(29*time.Minute), now); got != "21:59:00" {
		t.Errorf("today: %q", got)
	}
	if got := WaitUntilText(now.Add(3*time.Hour), now); got != "2026-11-26 00:30:00" {
		t.Errorf("tomorrow: %q", got)
	}
}

// A retry notice streamed to the console and the UI quotes the CLI's
// error line: the run's secrets are replaced in it as in the text.
func TestStreamedRetryIsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "sk-retry-secret-123"
	r, _ := newRunner(t, `[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	r.o.Orchestrator.o.Secrets = []string{secret}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.bus.Subscribe(ctx, 0)
	r.streamAgent(1)(CallStream{CallID: "c", Event: &agent.Event{Kind: agent.EventRetry,
		Retry: &agent.Retry{Status: 429, Message: "429 for key " + secret}}})
	for e := range events {
		if e.Kind != EventAgent {
			continue
		}
		if m := e.Agent.Retry.Message; strings.Contains(m, secret) || !strings.Contains(m, "[REDACTED]") {
			t.Errorf("streamed retry message %q", m)
		}
		return
	}
}
