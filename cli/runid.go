package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
)

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
	return runRef{arg: loop.LatestRun}
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

// resolveRun turns a run id, a unique prefix of one, or "latest" into the
// run's id.
func resolveRun(st serve.Reader, id string) (string, error) {
	return resolveRunRef(st, runRef{arg: id, given: true}, nil)
}

// resolveRunRef is resolveRun for ref; when ref was not given it names the
// run it chose on errOut.
func resolveRunRef(st serve.Reader, ref runRef, errOut io.Writer) (string, error) {
	id, started, err := serve.ResolveRun(st, ref.arg)
	if err != nil {
		return "", commandError(err)
	}
	noteLatest(errOut, ref, id, started)
	return id, nil
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
