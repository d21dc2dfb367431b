package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// latestRun names a store's most recent run wherever a RUN_ID is taken.
const latestRun = "latest"

// runRef is the RUN_ID a command was given: a run id, a unique prefix of
// one, or "latest". A command that reads one run and was given none reads
// the latest, and says so on stderr (given is false).
type runRef struct {
	arg   string
	given bool
}

// runRefArg is the RUN_ID among a command's arguments at i, or none.
func runRefArg(args []string, i int) runRef {
	if i < len(args) && args[i] != "" {
		return runRef{arg: args[i], given: true}
	}
	return runRef{arg: latestRun}
}

// givenRun is a RUN_ID named by a flag (--run): never defaulted.
func givenRun(arg string) runRef { return runRef{arg: arg, given: arg != ""} }

// optionalRunID accepts zero or one RUN_ID for command verb.
func optionalRunID(verb string) func(*cobra.Command, []string) error {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageErrorf("%s takes at most one RUN_ID (a run id, a unique prefix of one, or latest; none means the latest), got %d arguments", verb, len(args))
		}
		return nil
	}
}

// matchRun finds what arg names among ids, listed oldest first: the last
// for "latest", an id equal to arg, or the one id arg is a prefix of. With
// no such id it returns "" and every id arg is a prefix of.
func matchRun(ids []string, arg string) (string, []string) {
	if arg == latestRun {
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
	if len(matches) == 1 {
		return matches[0], nil
	}
	return "", matches
}

// ambiguousRun is the error for a prefix that names more than one run.
func ambiguousRun(arg string, matches []string, where string) error {
	return usageErrorf("run id prefix %q matches %d runs%s (%s); give more of the id", arg, len(matches), where, strings.Join(matches, ", "))
}

// byStart sorts run records oldest first: by start time, then by id (run
// ids are UUIDv7, ordered by time within a second).
func byStart(runs []loop.RunRecord) []loop.RunRecord {
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b loop.RunRecord) int {
		if c := strings.Compare(a.Started, b.Started); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return runs
}

// resolveRun turns a run id, a unique prefix of one, or "latest" into the
// run's id.
func resolveRun(st storeReader, id string) (string, error) {
	return resolveRunRef(st, runRef{arg: id, given: true}, nil)
}

// resolveRunRef is resolveRun for ref; when ref was not given it names the
// run it chose on errOut.
func resolveRunRef(st storeReader, ref runRef, errOut io.Writer) (string, error) {
	if fr, ok := st.(fleetReader); ok { // the fleet resolved it already
		started := ""
		if !fr.run.Started.IsZero() {
			started = fr.run.Started.UTC().Format(time.RFC3339)
		}
		noteLatest(errOut, ref, fr.run.RunID, started)
		return fr.run.RunID, nil
	}
	recs, err := st.ListRuns()
	if err != nil {
		return "", exitError(ExitFailure, err)
	}
	recs = byStart(recs)
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	full, matches := matchRun(ids, ref.arg)
	switch {
	case full != "":
		if i := slices.Index(ids, full); i >= 0 {
			noteLatest(errOut, ref, full, recs[i].Started)
		}
		return full, nil
	case len(matches) > 1:
		return "", ambiguousRun(ref.arg, matches, "")
	case ref.arg == latestRun:
		return "", exitError(ExitUsage, fmt.Errorf("no runs in store %s yet; `ralph run` starts one", st.Dir()))
	}
	// A chain imported without its run records: look for the run's actions.
	err = st.Range(1, func(a ledger.Action) error {
		if a.RunID == ref.arg {
			return errFound
		}
		return nil
	})
	switch {
	case errors.Is(err, errFound):
		return ref.arg, nil
	case err != nil:
		return "", exitError(ExitFailure, err)
	}
	return "", exitError(ExitUsage, fmt.Errorf("no run %s in this store; `ralph runs` lists them", ref.arg))
}

// noteLatest says on errOut which run a command that was given no RUN_ID
// reads.
func noteLatest(errOut io.Writer, ref runRef, id, started string) {
	if ref.given || errOut == nil {
		return
	}
	if started != "" {
		started = ", started " + started
	}
	fmt.Fprintf(errOut, "ralph: no RUN_ID given: reading the latest run, %s%s\n", id, started)
}

// errFound ends a scan of the chain early.
var errFound = errors.New("found")
