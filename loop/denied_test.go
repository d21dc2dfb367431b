package loop

import (
	"context"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/stop"
)

// An agent refused a tool for want of permission stops the run after that
// iteration, as a failure naming the tool and the fix; it is neither
// progress nor "stuck", and no later iteration runs.
func TestPermissionDeniedStopsAfterTheIteration(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.denied {}))'
[[stop]]
name = "stuck"
kind = "no_progress"
iterations = 1
[[stop]]
kind = "max_iterations"
max = 5
`, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Class != stop.ClassFailure || out.TriggeredBy != "permission_denied" || out.ExitCode != 1 || out.Iterations != 1 {
		t.Fatalf("outcome %+v, want a failure by permission_denied after 1 iteration, exit 1", out)
	}
	want := "permission denied: the agent was refused Edit calc.go; add --edit-flag to [agent] args"
	if out.Reason != want {
		t.Errorf("reason %q, want %q", out.Reason, want)
	}
	if n := fx.count("test.denied"); n != 1 {
		t.Errorf("the agent ran %d times, want once", n)
	}
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if len(iters) != 1 || iters[0].Metadata["status"].Str() != "failed" || iters[0].Success {
		t.Errorf("iterations %+v, want one failed", iters)
	}
	if evals := runTypes(t, fx, out.RunID, ledger.StopConditionsEvaluated); len(evals) != 0 {
		t.Errorf("the stop conditions were evaluated %d times; a refused iteration decides nothing", len(evals))
	}
	ended := runTypes(t, fx, out.RunID, ledger.RunFailed)
	if len(ended) != 1 || ended[0].FunctionName != "permission_denied" || !strings.HasPrefix(ended[0].Metadata["reason"].Str(), "permission denied: ") {
		t.Errorf("closing actions %+v, want one RunFailed by permission_denied", ended)
	}
}
