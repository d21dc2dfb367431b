package loop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// sandboxed gives fx's orchestrator a sink, as a sandboxed run's wiring
// does, and registers test.refused: a call during which the run's proxy
// refuses the host its input names (from another goroutine, as the proxy
// does), and the call itself reports the denied path its input names (if
// any), as agent.run does from a tool's failed result.
func sandboxed(fx *fixture) *sandbox.Sink {
	sink := sandbox.NewSink()
	fx.orch.o.Denials = sink
	fx.testCap(fx.orch.o.Registry, "test.refused", nil, func(ctx context.Context, in rtfs.Value) (rtfs.Value, error) {
		host := in.AsMap().GetKey("host").Str()
		done := make(chan struct{})
		go func() { defer close(done); sink.Deny(sandbox.HostDenial(host, 443)) }()
		<-done
		if p := in.AsMap().GetKey("path"); !p.IsNil() {
			sandbox.RefusalsFrom(ctx).Add(sandbox.PathDenial(sandbox.OpRead, p.Str()))
		}
		return rtfs.String("tried"), nil
	})
	return sink
}

// A sandboxed call's refusals are recorded on it (:sandbox_denied, each
// with its [sandbox] line) and on its iteration's closing action, shown
// live on the call's stream, and three iterations in a row meeting the
// same refusal end the run as failure sandbox_denied (exit 1), before a
// no_progress of three iterations would call it stuck.
func TestSameSandboxRefusalThreeTimesEndsTheRun(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.refused {:host "evil.example" :path "/root/.ssh/id_ed25519"}))'
[[stop]]
name = "stuck"
kind = "no_progress"
iterations = 3
[[stop]]
kind = "max_iterations"
max = 10
`, nil)
	sink := sandboxed(fx)
	sink.Deny(sandbox.HostDenial("loose.example", 80)) // before any call: the first iteration's, loose
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Class != stop.ClassFailure || out.TriggeredBy != "sandbox_denied" || out.ExitCode != ExitFailure || out.Iterations != 3 {
		t.Fatalf("outcome %+v, want a failure by sandbox_denied after 3 iterations, exit 1", out)
	}
	want := `the sandbox refused connect evil.example:443 in 3 consecutive iterations; add hosts = ["evil.example"] to [sandbox] if the agent should be allowed it`
	if out.Reason != want {
		t.Errorf("reason %q, want %q", out.Reason, want)
	}
	call := []sandbox.Denial{sandbox.HostDenial("evil.example", 443), sandbox.PathDenial(sandbox.OpRead, "/root/.ssh/id_ed25519")}
	calls := runTypes(t, fx, out.RunID, ledger.CapabilityCall)
	if len(calls) != 3 {
		t.Fatalf("%d calls recorded, want 3", len(calls))
	}
	for _, c := range calls {
		if got := RefusalsOf(c.Metadata); !slices.Equal(got, call) {
			t.Errorf("call %s records %v, want %v", c.ActionID, got, call)
		}
	}
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if got := RefusalsOf(iters[0].Metadata); !slices.Equal(got, append(slices.Clone(call), sandbox.HostDenial("loose.example", 80))) {
		t.Errorf("iteration 1 records %v; want the call's and the loose one", got)
	}
	if got := RefusalsOf(iters[2].Metadata); !slices.Equal(got, call) {
		t.Errorf("iteration 3 records %v, want the call's", got)
	}
	ended := runTypes(t, fx, out.RunID, ledger.RunFailed)
	if len(ended) != 1 || ended[0].FunctionName != "sandbox_denied" {
		t.Errorf("closing actions %+v, want one RunFailed by sandbox_denied", ended)
	}
	var shown []sandbox.Denial
	for _, e := range collect(t, events) {
		if e.Kind == EventAgent && e.Agent.Kind == agent.EventSandboxDenied {
			shown = append(shown, *e.Agent.Refusal)
			if e.CallID == "" {
				t.Errorf("a refusal was shown with no call")
			}
		}
	}
	if len(shown) != 6 || !slices.Equal(shown[:2], call) {
		t.Errorf("shown live: %v; want each call's two refusals", shown)
	}
}

// Refusals that change from one iteration to the next are no streak: the
// run goes on to its own stop conditions; one that repeats among them is.
func TestChangingRefusalsAreNoStreak(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		plan, by string
		iters    int
	}{
		{`(call :test.refused {:host (str "h" (:iteration ctx) ".example")})`, "max_iterations", 4},
		{`(call :test.refused {:host (str "h" (:iteration ctx) ".example") :path "/srv/other"})`, "sandbox_denied", 3},
	} {
		r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" `+c.plan+`)'
[[stop]]
kind = "max_iterations"
max = 4
`, nil)
		sandboxed(fx)
		out, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.TriggeredBy, c.by) || out.Iterations != c.iters {
			t.Fatalf("%s: outcome %+v, want %s after %d iterations", c.plan, out, c.by, c.iters)
		}
		for i, it := range runTypes(t, fx, out.RunID, ledger.IterationCompleted) {
			if got := RefusalsOf(it.Metadata); len(got) == 0 || got[0] != sandbox.HostDenial(fmt.Sprintf("h%d.example", i+1), 443) {
				t.Errorf("%s: iteration %d records %v", c.plan, i+1, got)
			}
		}
	}
}

func TestUnsandboxedRunRecordsNoRefusals(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
kind = "max_iterations"
max = 3
`, nil)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.TriggeredBy, "max_iterations") {
		t.Fatalf("outcome %+v", out)
	}
	for _, a := range runTypes(t, fx, out.RunID, ledger.CapabilityCall) {
		if _, ok := a.Metadata[MetaSandboxDenied]; ok {
			t.Errorf("an unsandboxed call records refusals: %v", a.Metadata)
		}
	}
}

func TestRefusalStreak(t *testing.T) {
	a, b := sandbox.HostDenial("a", 1), sandbox.HostDenial("b", 1)
	var s refusalStreak
	for i, it := range [][]sandbox.Denial{{a}, {a, b}, {b}, {a}, {a, b}, {b, a}} {
		s = s.next(it)
		_, held := s.held(it)
		if held != (i == 5) {
			t.Fatalf("after iteration %d (%v): held %v", i+1, s, held)
		}
	}
	if d, _ := s.held([]sandbox.Denial{b, a}); d != a {
		t.Fatalf("held %v, want a, met in three iterations in a row", d)
	}
}

// A resumed run counts the streak from its recorded iterations: two met
// the refusal before the process died, so the first resumed one ends it.
func TestResumeCountsTheRefusalStreak(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `[plan]
rtfs = '(step "Agent" (call :test.refused {:host "evil.example"}))'
[[stop]]
name = "two"
kind = "max_iterations"
max = 2
`, nil)
	sandboxed(fx)
	out, err := r.Run(context.Background())
	if err != nil || out.Iterations != 2 {
		t.Fatalf("first run: %+v %v", out, err)
	}
	markInterrupted(t, fx, out.RunID)
	cfg := *r.o.Config
	cfg.Stop = []config.Stop{{Name: "five", Kind: "max_iterations", Max: 5}}
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := resumer(t, r, fx, out.RunID, func(o *RunnerOptions) { o.Config, o.Conditions = &cfg, conds }).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out2.TriggeredBy != "sandbox_denied" || out2.Iterations != 3 {
		t.Fatalf("resumed: %+v, want sandbox_denied at iteration 3", out2)
	}
}
