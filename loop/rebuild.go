package loop

import (
	"github.com/ralphloop/ralph/ledger"
)

// LastCommit is the workspace commit (metadata :commit, set by
// RunnerOptions.OnIterationEnd) of the last counted IterationCompleted in a
// run's actions: where a resumed run's workspace continues from. It is ""
// when no counted iteration has completed, or the last one recorded no
// commit; an iteration stopped at a usage limit is not counted.
func LastCommit(acts []ledger.Action) string {
	for i := len(acts) - 1; i >= 0; i-- {
		a := &acts[i]
		if a.Type != ledger.IterationCompleted || a.Metadata["status"].Str() == StatusUsageLimit {
			continue
		}
		return a.Metadata["commit"].Str()
	}
	return ""
}
