package stop

import (
	"fmt"

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
	Spec     *config.Stop
	Class    Class // the spec's class, limit by default
	Reason   string
	Evidence string
}

// BeforeIteration returns the budget among specs that forbids the next
// iteration, or nil: max_iterations once reached (a resumed run may start
// at it), max_cost and max_tokens when the mean of the counted iterations
// so far would take the run past them (tokens rounded up: never overshoot).
func BeforeIteration(specs []config.Stop, s Spent) *Forbidden {
	classOf := func(sp *config.Stop) Class {
		if sp.Class != "" {
			return Class(sp.Class)
		}
		return ClassLimit
	}
	for i := range specs {
		if sp := &specs[i]; sp.Kind == config.KindMaxIterations && s.Iteration >= sp.Max {
			return &Forbidden{Spec: sp, Class: classOf(sp), Reason: fmt.Sprintf("max_iterations %d reached", sp.Max),
				Evidence: fmt.Sprintf("%d iterations completed", s.Iteration)}
		}
	}
	n := s.DoneIters
	if n == 0 {
		return nil
	}
	meanCost, meanTok := s.DoneCost/float64(n), (s.DoneTokens+int64(n)-1)/int64(n)
	for i := range specs {
		sp := &specs[i]
		switch {
		case sp.Kind == config.KindMaxCost && s.Cost+meanCost > sp.USD:
			return &Forbidden{Spec: sp, Class: classOf(sp),
				Reason:   fmt.Sprintf("the next iteration is expected to cost $%.2f (the mean so far), which would take $%.2f past max_cost $%.2f", meanCost, s.Cost, sp.USD),
				Evidence: fmt.Sprintf("%d iterations cost $%.4f", n, s.Cost)}
		case sp.Kind == config.KindMaxTokens && s.Tokens+meanTok > sp.Tokens:
			return &Forbidden{Spec: sp, Class: classOf(sp),
				Reason:   fmt.Sprintf("the next iteration is expected to use %d tokens (the mean so far), which would take %d past max_tokens %d", meanTok, s.Tokens, sp.Tokens),
				Evidence: fmt.Sprintf("%d iterations used %d tokens", n, s.Tokens)}
		}
	}
	return nil
}
