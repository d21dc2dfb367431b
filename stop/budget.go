package stop

import (
	"fmt"
	"time"

	"github.com/ralphloop/ralph/config"
)

// Spent is what a run has used before its next iteration: the budgets
// the runner checks before starting one, and that a replay checks too.
type Spent struct {
	Iteration  int     // iterations counted so far
	Cost       float64 // every iteration's cost, an uncounted one's too
	Tokens     int64
	DoneIters  int     // counted iterations, whose mean projects the next
	DoneCost   float64 // their cost
	DoneTokens int64   // their tokens
}

// Forbidden is a budget that forbids the next iteration.
type Forbidden struct {
	Cond     *Condition
	Class    Class // the condition's class, limit by default
	Reason   string
	Evidence string
}

// row is c's kind's row: the one it was built from, else (a condition made
// in code) the row of its Kind, else an empty row.
func (c *Condition) row() *Kind {
	if c.kind != nil {
		return c.kind
	}
	if k, ok := Lookup(c.Kind); ok {
		return k
	}
	return &Kind{Name: c.Kind}
}

// Limits is what c bounds: its kind's Limits of its table (zero for a
// kind that bounds nothing).
func (c *Condition) Limits() Limits { return c.limits }

// Runs is the program c runs (a command condition's), or "".
func (c *Condition) Runs() string { return c.runs }

// Budgets are the run's budgets: for each of iterations, spend, tokens and
// time, the smallest that conds bound it by (0: none does).
func Budgets(conds []*Condition) Limits {
	ls := make([]Limits, len(conds))
	for i, c := range conds {
		ls[i] = c.Limits()
	}
	return smallest(ls)
}

// SpecBudgets is Budgets of stop tables not built (SpecLimits): what the
// UI shows before the run's conditions exist.
func SpecBudgets(specs []config.Stop) Limits {
	ls := make([]Limits, len(specs))
	for i := range specs {
		ls[i] = SpecLimits(&specs[i])
	}
	return smallest(ls)
}

// Within is the tighter of l and caps in each field (a config-wide cap,
// [loop] max_iterations or [governance] max_cost_usd, shown as a budget).
func (l Limits) Within(caps Limits) Limits { return smallest([]Limits{l, caps}) }

// smallest is the smallest positive value of each field of ls.
func smallest(ls []Limits) Limits {
	var b Limits
	for _, l := range ls {
		if l.Iterations > 0 && (b.Iterations == 0 || l.Iterations < b.Iterations) {
			b.Iterations = l.Iterations
		}
		if l.CostUSD > 0 && (b.CostUSD == 0 || l.CostUSD < b.CostUSD) {
			b.CostUSD = l.CostUSD
		}
		if l.Tokens > 0 && (b.Tokens == 0 || l.Tokens < b.Tokens) {
			b.Tokens = l.Tokens
		}
		if l.Duration > 0 && (b.Duration == 0 || l.Duration < b.Duration) {
			b.Duration = l.Duration
		}
	}
	return b
}

// Deadline is the soonest time limit of conds, and the condition that sets
// it (nil, 0 when none bounds the run's time).
func Deadline(conds []*Condition) (*Condition, time.Duration) {
	var by *Condition
	for _, c := range conds {
		if d := c.Limits().Duration; d > 0 && (by == nil || d < by.Limits().Duration) {
			by = c
		}
	}
	if by == nil {
		return nil, 0
	}
	return by, by.Limits().Duration
}

// BeforeIteration returns the budget among conds that forbids the next
// iteration, or nil: an iteration limit once reached (a resumed run may
// start at it), a spend or token limit when the mean of the counted
// iterations so far would take the run past it (tokens rounded up: never
// overshoot).
func BeforeIteration(conds []*Condition, s Spent) *Forbidden {
	for _, c := range conds {
		if max := c.Limits().Iterations; max > 0 && s.Iteration >= max {
			return &Forbidden{Cond: c, Class: c.Class, Reason: fmt.Sprintf("max_iterations %d reached", max),
				Evidence: fmt.Sprintf("%d iterations completed", s.Iteration)}
		}
	}
	n := s.DoneIters
	if n == 0 {
		return nil
	}
	meanCost, meanTok := s.DoneCost/float64(n), (s.DoneTokens+int64(n)-1)/int64(n)
	for _, c := range conds {
		l := c.Limits()
		switch {
		case l.CostUSD > 0 && s.Cost+meanCost > l.CostUSD:
			return &Forbidden{Cond: c, Class: c.Class,
				Reason:   fmt.Sprintf("the next iteration is expected to cost $%.2f (the mean so far), which would take $%.2f past max_cost $%.2f", meanCost, s.Cost, l.CostUSD),
				Evidence: fmt.Sprintf("%d iterations cost $%.4f", n, s.Cost)}
		case l.Tokens > 0 && s.Tokens+meanTok > l.Tokens:
			return &Forbidden{Cond: c, Class: c.Class,
				Reason:   fmt.Sprintf("the next iteration is expected to use %d tokens (the mean so far), which would take %d past max_tokens %d", meanTok, s.Tokens, l.Tokens),
				Evidence: fmt.Sprintf("%d iterations used %d tokens", n, s.Tokens)}
		}
	}
	return nil
}
