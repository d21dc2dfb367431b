package web

import (
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/mcpserver"
)

// A run page reads only what it shows: the run's RunStarted and its last
// iterations (shownIterations of them), found by reading the store back
// from its head in growing windows. A run of 100,000 actions then costs
// its last few thousand, not all of them.

// tailReader is a store that can be read from a seq, knows its head, and
// finds an action by its id.
type tailReader interface {
	Head() ledger.Head
	Range(fromSeq uint64, fn func(ledger.Action) error) error
	Get(actionID string) (ledger.Action, error)
}

// firstWindow is how many of the store's last actions a run page reads
// first.
const firstWindow = 4096

// runActions is what the run page shows of run: every action, or (when
// folded is more than 0) its RunStarted followed by the actions of its
// last iterations, folded being how many iterations are left out between.
func runActions(run *mcpserver.Run, firstWindow uint64) (acts []ledger.Action, folded int, err error) {
	tr, ok := run.Reader.(tailReader)
	if !ok {
		acts, err = run.ByRun(run.ID)
		return acts, 0, err
	}
	head := tr.Head().Seq
	for window := firstWindow; ; window *= 4 {
		from := uint64(1)
		if head > window {
			from = head - window
		}
		tail, starts, whole, err := readFrom(tr, run.ID, from)
		switch {
		case err != nil:
			return nil, 0, err
		case whole || from == 1:
			return tail, 0, nil
		case len(starts) > shownIterations:
			cut := tail[starts[len(starts)-shownIterations]:]
			first := int(cut[0].Metadata["iteration"].AsInt())
			// An iteration's parent is the run's RunStarted.
			if started, err := tr.Get(cut[0].ParentActionID); err == nil && started.Type == ledger.RunStarted {
				cut = append([]ledger.Action{started}, cut...)
			}
			return cut, first - 1, nil
		}
	}
}

// readFrom reads run id's actions from seq from to the head, and where
// each of its iterations starts among them; whole says they include its
// RunStarted, so all of them.
func readFrom(tr tailReader, id string, from uint64) (acts []ledger.Action, starts []int, whole bool, err error) {
	err = tr.Range(from, func(a ledger.Action) error {
		if a.RunID != id {
			return nil
		}
		switch a.Type {
		case ledger.IterationStarted:
			starts = append(starts, len(acts))
		case ledger.RunStarted:
			whole = true
		}
		acts = append(acts, a)
		return nil
	})
	return acts, starts, whole, err
}
