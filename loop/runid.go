package loop

import (
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/usage"
)

// LatestRun names the most recent run (of a store, of a fleet) wherever a
// RUN_ID is taken.
const LatestRun = "latest"

// MatchRun finds the run arg names among runs, listed oldest first, whose
// ids id gives: the last for LatestRun, one whose id is arg, or the one
// whose id arg is a prefix of. It returns its index, or -1 when there is
// none; a prefix of more than one id is a usage error naming them, of
// where they are (" of the fleet", or "" for a store).
func MatchRun[R any](runs []R, id func(R) string, arg, where string) (int, error) {
	if arg == LatestRun {
		return len(runs) - 1, nil
	}
	var matches []int
	for i, r := range runs {
		if id(r) == arg {
			return i, nil
		}
		if strings.HasPrefix(id(r), arg) {
			matches = append(matches, i)
		}
	}
	switch len(matches) {
	case 0:
		return -1, nil
	case 1:
		return matches[0], nil
	}
	ids := make([]string, len(matches))
	for j, i := range matches {
		ids[j] = id(runs[i])
	}
	return -1, usage.Flagf("run id prefix %q matches %d runs%s (%s); give more of the id", arg, len(matches), where, strings.Join(ids, ", "))
}

// ByStart sorts run records oldest first: by start time, then by id (run
// ids are UUIDv7, ordered by time within a second).
func ByStart(runs []RunRecord) []RunRecord {
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b RunRecord) int {
		if c := strings.Compare(a.Started, b.Started); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return runs
}
