package notify

import (
	"fmt"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// Event names, as [[notify]] on lists them.
const (
	RunEnded          = "run_ended"
	ApprovalNeeded    = "approval_needed"
	RateLimitWait     = "rate_limit_wait"
	RateLimitOver     = "rate_limit_over"
	NoProgressWarning = "no_progress_warning"
	Budget            = "budget"
)

// Event is one notification: the webhook's JSON body and the command
// sink's standard input (docs/notify.md documents every field).
type Event struct {
	Event     string     `json:"event"`
	Text      string     `json:"text"` // one line for a person; Slack shows it
	RunID     string     `json:"run_id"`
	Time      time.Time  `json:"time"`
	Iteration int        `json:"iteration,omitempty"`
	State     string     `json:"state,omitempty"`     // run_ended: done | failed | stopped | aborted
	Class     string     `json:"class,omitempty"`     // run_ended: success | failure | limit | abort
	Condition string     `json:"condition,omitempty"` // run_ended: the stop condition; no_progress_warning, budget: the condition
	Reason    string     `json:"reason,omitempty"`
	Until     *time.Time `json:"until,omitempty"`    // rate_limit_wait: when the wait ends
	Percent   int        `json:"percent,omitempty"`  // budget: 50, 80 or 100
	CostUSD   float64    `json:"cost_usd,omitempty"` // run_ended: what the run spent
	Detail    string     `json:"detail,omitempty"`   // budget: "$2.60/$5.00"; no_progress_warning: "no progress 2/3"
	Dropped   int        `json:"dropped,omitempty"`  // notifications this sink dropped (queue full) since its last one
}

// translator turns a run's event stream into notifications. It keeps what
// it needs to notice a change: a wait in progress, the budget thresholds
// already crossed, a no_progress streak already warned of.
type translator struct {
	waiting     *time.Time // a rate-limit wait was notified and has not ended
	budgetShown int        // the highest budget percent notified
	warned      bool       // the current no_progress streak was warned of
}

var budgetSteps = [...]int{100, 80, 50}

// next returns the notifications e gives rise to (usually none).
func (t *translator) next(e *loop.Event) []Event {
	base := Event{RunID: e.RunID, Time: e.Time, Iteration: e.Iteration}
	if base.Time.IsZero() {
		base.Time = time.Now()
	}
	var out []Event
	switch e.Kind {
	case loop.EventAction:
		a := e.Action
		if t.waiting != nil && (loop.IsRunEnd(a.Type) || !a.Timestamp.Before(*t.waiting)) && a.Type != ledger.RateLimitWait {
			out = append(out, t.over(base))
		}
		switch {
		case loop.IsRunEnd(a.Type):
			out = append(out, runEnded(base, a))
		case a.Type == ledger.RateLimitWait:
			if until, err := time.Parse(time.RFC3339Nano, a.Metadata["until"].Str()); err == nil && t.waiting == nil {
				n := base
				n.Event, n.Until, n.Reason = RateLimitWait, &until, a.Metadata["message"].Str()
				n.Iteration = int(a.Metadata["iteration"].AsInt())
				n.Text = fmt.Sprintf("ralph: run %s waits for the agent's %s until %s, then runs iteration %d again", n.RunID, a.FunctionName, until.Local().Format("15:04 MST"), n.Iteration)
				t.waiting = &until
				out = append(out, n)
			}
		}
	case loop.EventWait:
		if t.waiting == nil && !e.Until.IsZero() {
			until := e.Until
			n := base
			n.Event, n.Until, n.Reason = RateLimitWait, &until, e.Text
			n.Text = fmt.Sprintf("ralph: run %s waits until %s: %s", n.RunID, until.Local().Format("15:04:05 MST"), e.Text)
			t.waiting = &until
			out = append(out, n)
		}
	case loop.EventApprove:
		n := base
		n.Event = ApprovalNeeded
		n.Text = fmt.Sprintf("ralph: run %s waits for your approval of iteration %d's plan (ralph attach %s)", n.RunID, e.Iteration, n.RunID)
		out = append(out, n)
	case loop.EventConditions:
		if ev := e.Evaluation; ev != nil {
			out = append(out, t.conditions(base, ev)...)
		}
	}
	return out
}

func (t *translator) over(base Event) Event {
	n := base
	n.Event, n.Until = RateLimitOver, t.waiting
	n.Text = fmt.Sprintf("ralph: run %s goes on: the wait is over", n.RunID)
	t.waiting = nil
	return n
}

// conditions notices a no_progress streak one iteration from stopping the
// run, and the budget crossing 50, 80 and 100% of a max_cost.
func (t *translator) conditions(base Event, ev *stop.Evaluation) []Event {
	var out []Event
	for _, r := range ev.Results {
		k, _ := stop.Lookup(r.Kind)
		switch {
		case k == nil:
		case k.Streak:
			var k, n int
			if _, err := fmt.Sscanf(r.Detail, "no progress %d/%d", &k, &n); err != nil {
				continue
			}
			if k == 0 || r.Met {
				t.warned = false
			}
			if !r.Met && n > 1 && k >= n-1 && !t.warned {
				t.warned = true
				w := base
				w.Event, w.Condition, w.Detail, w.Iteration = NoProgressWarning, r.Name, r.Detail, ev.Iteration
				w.Text = fmt.Sprintf("ralph: run %s made no progress for %d of %d iterations; one more and %s stops it", w.RunID, k, n, r.Name)
				out = append(out, w)
			}
		case k.Spend:
			pct := int(r.Progress*100 + 1e-9)
			for _, step := range budgetSteps {
				if pct >= step && step > t.budgetShown {
					t.budgetShown = step
					b := base
					b.Event, b.Condition, b.Percent, b.Detail, b.Iteration = Budget, r.Name, step, r.Detail, ev.Iteration
					b.Text = fmt.Sprintf("ralph: run %s has spent %d%% of its budget (%s)", b.RunID, step, r.Detail)
					out = append(out, b)
					break
				}
			}
		}
	}
	return out
}

func runEnded(base Event, a *ledger.Action) Event {
	n := base
	n.Event = RunEnded
	n.Class = a.Metadata["class"].Str()
	n.Condition = a.Metadata["condition"].Str()
	n.Reason = a.Metadata["reason"].Str()
	n.Iteration = int(a.Metadata["iterations"].AsInt())
	n.CostUSD = a.Cost
	n.State = map[ledger.ActionType]string{ledger.RunCompleted: loop.StateDone, ledger.RunFailed: loop.StateFailed,
		ledger.RunStopped: loop.StateStopped, ledger.RunAborted: loop.StateAborted}[a.Type]
	n.Text = fmt.Sprintf("ralph: run %s %s after %d iteration(s) ($%.4f): %s by %s — %s", n.RunID, n.State, n.Iteration, n.CostUSD, n.Class, n.Condition, n.Reason)
	return n
}
