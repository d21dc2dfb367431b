package loop

import (
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/usage"
)

// LatestRun names the most recent run (of a store, of a fleet) wherever a
// RUN_ID is taken.
const LatestRun = "latest"

// MatchRun finds what arg names among ids, listed oldest first: the last
// for LatestRun, an id equal to arg, or the one id arg is a prefix of. It
// returns "" when none is, and a usage error (naming the runs, of where
// they are: " of the fleet", or "" for a store) when arg is a prefix of
// more than one.
func MatchRun(ids []string, arg, where string) (string, error) {
	if arg == LatestRun {
		if len(ids) == 0 {
			return "", nil
		}
		return ids[len(ids)-1], nil
	}
	var matches []string
	for _, id := range ids {
		if id == arg {
			return id, nil
		}
		if strings.HasPrefix(id, arg) {
			matches = append(matches, id)
		}
	}
	switch len(matches) {
	case 0:
		return "", nil
	case 1:
		return matches[0], nil
	}
	return "", usage.Flagf("run id prefix %q matches %d runs%s (%s); give more of the id", arg, len(matches), where, strings.Join(matches, ", "))
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
