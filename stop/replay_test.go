package stop

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// chainBuilder scripts a run's actions in seq order.
type chainBuilder struct {
	acts []ledger.Action
	t0   time.Time
}

func (c *chainBuilder) add(a ledger.Action) {
	a.Seq, a.RunID = uint64(len(c.acts)+1), "run"
	a.Timestamp = c.t0.Add(time.Duration(len(c.acts)) * time.Second)
	if a.Metadata == nil {
		a.Metadata = map[string]rtfs.Value{}
	}
	c.acts = append(c.acts, a)
}

func (c *chainBuilder) iterStart(n int) {
	c.add(ledger.Action{Type: ledger.IterationStarted, Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(n))}})
}

func (c *chainBuilder) call(fn string) {
	c.add(ledger.Action{Type: ledger.CapabilityCall, FunctionName: fn, Success: true, Result: rtfs.String(fn + " ran")})
}

func (c *chainBuilder) iterEnd(n int, status string, cost float64) {
	c.add(ledger.Action{Type: ledger.IterationCompleted, Success: status == "ok", Cost: cost,
		Result:   rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("tokens"), rtfs.Int(10))),
		Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(n)), "status": rtfs.String(status)}})
}

func (c *chainBuilder) evaluated(n int, testsMet bool) {
	ev := Evaluation{Iteration: n, At: c.t0.Add(time.Duration(len(c.acts)) * time.Second),
		Results: []Result{{Name: "tests", Kind: "command", Class: ClassSuccess, Priority: 60, Met: testsMet, Detail: "exit 1", Reason: "recorded"}}}
	if testsMet {
		ev.ShouldStop, ev.Class, ev.TriggeredBy = true, ClassSuccess, "tests"
	}
	c.add(*evaluationAction("run", ev))
}

// A replay counts what the runner counted: an attempt a crash interrupted
// is not in the audit index, a usage-limited attempt costs but does not
// count; an unchanged command takes its recorded verdict and a new one is
// unknown; success beats a limit met in the same iteration.
func TestReplayFromTheChain(t *testing.T) {
	t.Parallel()
	c := &chainBuilder{t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	c.add(ledger.Action{Type: ledger.RunStarted, Success: true})
	c.iterStart(1)
	c.call("work")
	c.iterEnd(1, "ok", 0.1)
	c.evaluated(1, false)
	c.iterStart(2)
	c.call("done") // the process died here
	c.iterStart(2)
	c.call("work")
	c.iterEnd(2, string(ledger.StatusUsageLimit), 0.5)
	c.iterStart(2)
	c.call("work")
	c.iterEnd(2, "failed", 0.1)
	c.evaluated(2, true)
	c.add(ledger.Action{Type: ledger.RunCompleted, Metadata: map[string]rtfs.Value{"condition": rtfs.String("tests"),
		"class": rtfs.String("success"), "iterations": rtfs.Int(2)}})

	tests := config.Stop{Name: "tests", Kind: "command", Cmd: []string{"false"}}
	specs := []config.Stop{
		tests,
		{Name: "other", Kind: "command", Cmd: []string{"true"}},
		{Name: "done", Kind: "predicate", RTFS: `(audit.succeeded? "done")`},
		{Name: "budget", Kind: "max_cost", USD: 0.6},
		{Name: "failing", Kind: "consecutive_failures", Count: 5},
	}
	conds, err := FromConfig(specs, "new.toml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(context.Background(), c.acts, ReplayOptions{Specs: specs, Conditions: conds, Workdir: "/w",
		RecordedSpecs: []config.Stop{tests}, RecordedWorkdir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Iteration != 2 || res.Decision.TriggeredBy != "tests" || res.Decision.Class != ClassSuccess {
		t.Fatalf("decision %+v after iteration %d, want success by tests after 2", res.Decision, res.Iteration)
	}
	if res.Recorded.TriggeredBy != "tests" || res.RecordedIterations != 2 || len(res.Steps) != 2 {
		t.Fatalf("recorded %+v over %d iterations, %d steps", res.Recorded, res.RecordedIterations, len(res.Steps))
	}
	met := func(step int, name string) Result {
		for _, r := range res.Steps[step].Evaluation.Results {
			if r.Name == name {
				return r
			}
		}
		t.Fatalf("iteration %d has no result %s", step+1, name)
		return Result{}
	}
	if r := met(1, "done"); r.Met {
		t.Error("the predicate holds on a call of an interrupted attempt, which the resumed run never counted")
	}
	if r := met(1, "budget"); !r.Met || r.Detail != "$0.70/$0.60" {
		t.Errorf("budget after iteration 2: %+v, want met at $0.70 (the usage-limited attempt costs too)", r)
	}
	if r := met(1, "failing"); r.Detail != "1/5 failures" {
		t.Errorf("consecutive failures after iteration 2: %s, want 1/5", r.Detail)
	}
	if r := met(0, "tests"); r.Met || r.Reason != "recorded" {
		t.Errorf("the unchanged command at iteration 1: %+v, want its recorded verdict", r)
	}
	for i, s := range res.Steps {
		if !slices.Equal(s.Unknown, []string{"other"}) {
			t.Errorf("iteration %d: unknown %v, want [other]", i+1, s.Unknown)
		}
	}

	// The same command in another workdir is unknown too; so it never
	// stops, and the budget forbids nothing before iteration 2 ends.
	res, err = Replay(context.Background(), c.acts, ReplayOptions{Specs: specs, Conditions: conds, Workdir: "/elsewhere",
		RecordedSpecs: []config.Stop{tests}, RecordedWorkdir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Decision.TriggeredBy != "budget" || res.Decision.Class != ClassLimit || !slices.Contains(res.Steps[0].Unknown, "tests") {
		t.Fatalf("in another workdir: %+v, want a limit by budget with tests unknown", res.Decision)
	}
}
