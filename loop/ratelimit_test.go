package loop

import (
	"context"
	"strings"
	"testing"
	"time"

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
	start := time.Now()
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.TriggeredBy != "hour" || out.ExitCode != ExitLimit || !strings.Contains(out.Reason, "after max_duration 30m0s ends") {
		t.Errorf("outcome %+v", out)
	}
	if time.Since(start) > 20*time.Second {
		t.Error("the run slept toward a reset after its deadline instead of ending")
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
