package cli

import (
	"fmt"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/stop"
)

// iterationTally is what the headless printer keeps to write each
// iteration's brief line (stop.Brief) after its evaluation: the run's
// spend, the spend when the iteration started, and how the iteration ended.
type iterationTally struct {
	maxIterations int
	budget        float64
	total, atIter float64
	status        string
	dur           time.Duration
}

// newIterationTally takes the budgets the brief line measures against
// from the run's conditions (the smallest iteration and spend limits),
// within the config's caps ([loop] max_iterations, [governance]
// max_cost_usd).
func newIterationTally(conds []*stop.Condition, cfg *config.Config) *iterationTally {
	b := stop.Budgets(conds)
	if cfg != nil {
		b = b.Within(stop.Limits{Iterations: cfg.Loop.MaxIterations, CostUSD: cfg.Governance.MaxCostUSD})
	}
	return &iterationTally{maxIterations: b.Iterations, budget: b.CostUSD}
}

// take counts a; after an evaluation it returns the iteration's brief
// line, else "".
func (t *iterationTally) take(a *ledger.Action) string {
	switch a.Type {
	case ledger.IterationStarted:
		t.atIter, t.status, t.dur = t.total, "", 0
	case ledger.CapabilityCall, ledger.PlanGenerated: // a model's or an agent's spend, as the UI counts it
		t.total += a.Cost
	case ledger.IterationCompleted:
		t.status, t.dur = a.Metadata["status"].Str(), time.Duration(a.DurationMS)*time.Millisecond
	case ledger.StopConditionsEvaluated:
		ev, err := stop.EvaluationFromAction(a)
		if err != nil {
			return fmt.Sprintf("it %d: the evaluation cannot be read: %v", a.Metadata["iteration"].AsInt(), err)
		}
		return stop.Brief{Iteration: ev.Iteration, MaxIterations: t.maxIterations, Status: t.status, Duration: t.dur,
			Cost: t.total - t.atIter, Total: t.total, Budget: t.budget, Eval: &ev}.String()
	}
	return ""
}
