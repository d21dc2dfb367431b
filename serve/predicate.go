package serve

import (
	"context"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/stop"
)

// PredicateReport is a completion predicate evaluated against a recorded
// run (`ralph predicate`, GET /v1/runs/{id}/predicate).
type PredicateReport struct {
	Holds     bool            `json:"holds"`
	Source    string          `json:"rtfs"`
	Evidence  []stop.Evidence `json:"evidence"`
	FirstSeq  uint64          `json:"first_held_seq,omitempty"`
	FirstID   string          `json:"first_held_action_id,omitempty"`
	FirstWhat string          `json:"first_held_action,omitempty"`
	Actions   int             `json:"actions"`
}

// EvalPredicate replays acts (one run's, in seq order) into an audit index,
// evaluating after each one to find where pred first held, then explains
// the final answer.
func EvalPredicate(ctx context.Context, pred *stop.Predicate, acts []ledger.Action) (PredicateReport, error) {
	ix := stop.NewIndex()
	b, err := pred.Bind(ix)
	if err != nil {
		return PredicateReport{}, err
	}
	rep := PredicateReport{Source: pred.Source, Actions: len(acts)}
	for i := range acts {
		ix.Observe(&acts[i])
		if rep.FirstSeq != 0 {
			continue
		}
		holds, err := b.Eval(ctx)
		if err != nil {
			return rep, fmt.Errorf("after seq %d: %w", acts[i].Seq, err)
		}
		if holds {
			rep.FirstSeq, rep.FirstID, rep.FirstWhat = acts[i].Seq, acts[i].ActionID, ledger.Summary(&acts[i])
		}
	}
	rep.Holds, rep.Evidence, err = b.Explain(ctx)
	return rep, err
}

// Text is the report as `ralph predicate` prints it: whether the predicate
// holds, each audit query with its answer and the action that gave it,
// the action after which it first held, and how many actions were read.
func (rep PredicateReport) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%t\n", rep.Holds)
	for _, e := range rep.Evidence {
		fmt.Fprintf(&b, "  (%s) → %t", e.Query, e.Holds)
		if e.Seq != 0 {
			fmt.Fprintf(&b, "  seq %d %s", e.Seq, e.ActionID)
		}
		b.WriteByte('\n')
	}
	if rep.FirstSeq != 0 {
		fmt.Fprintf(&b, "first held after %s\n", rep.FirstWhat)
	}
	fmt.Fprintf(&b, "%d actions read\n", rep.Actions)
	return b.String()
}
