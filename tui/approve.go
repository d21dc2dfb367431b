package tui

import (
	"context"
	"errors"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
)

// Approver connects approve mode to the UI: its Approve method is the
// RunnerOptions.Approve function, and the UI (given the same Approver in
// Options) answers it with y or n. The runner publishes EventApprove just
// before it calls Approve, which is when the UI shows the plan and asks.
type Approver struct {
	answers   chan approval
	requests  chan approval // the plan waiting now; the UI learns of it here even if the bus event was missed
	closed    chan struct{}
	closeOnce sync.Once
}

type approval struct {
	iteration int
	ok        bool
	plan      string
}

// NewApprover returns an Approver for one run.
func NewApprover() *Approver {
	return &Approver{answers: make(chan approval, 1), requests: make(chan approval, 1), closed: make(chan struct{})}
}

// ErrUIClosed is Approve's error when the UI has gone: nobody can answer,
// so the runner ends the run.
var ErrUIClosed = errors.New("the UI closed before the plan was approved")

// Approve waits for the user's y or n for iteration's plan. When ctx ends
// (an abort) it declines without an error, as the headless prompt does.
func (a *Approver) Approve(ctx context.Context, iteration int, plan string) (bool, error) {
	select { // the runner asks one plan at a time: a stale request is replaced
	case <-a.requests:
	default:
	}
	a.requests <- approval{iteration: iteration, plan: plan}
	for {
		select {
		case ans := <-a.answers:
			if ans.iteration == iteration {
				return ans.ok, nil
			}
			// an answer to an earlier prompt that arrived late: ignore it
		case <-ctx.Done():
			return false, nil
		case <-a.closed:
			return false, ErrUIClosed
		}
	}
}

// answer delivers y/n; it never blocks (a second answer replaces nothing:
// the first one stands).
func (a *Approver) answer(iteration int, ok bool) {
	select {
	case a.answers <- approval{iteration: iteration, ok: ok}:
	default:
	}
}

func (a *Approver) close() { a.closeOnce.Do(func() { close(a.closed) }) }

// approveMsg says a plan waits for y/n.
type approveMsg approval

// waitApproval waits for the runner's next request for approval.
func waitApproval(a *Approver) tea.Cmd {
	if a == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case req := <-a.requests:
			return approveMsg(req)
		case <-a.closed:
			return nil
		}
	}
}
