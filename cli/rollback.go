package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
)

func newRollbackCmd() *cobra.Command {
	var storeFlag, to string
	var force bool
	cmd := &cobra.Command{
		Use:   "rollback RUN_ID --to ITERATION",
		Short: "Put a run's work tree back as it was after an iteration",
		Long: `Put the work tree of an ended run back as it was after iteration ITERATION
(0: before the run), from its checkpoint. Files the iteration did not have are
removed, ignored files are left alone, and HEAD, the branch, the index and the
stash are not touched.

It refuses when the work tree has changes that no checkpoint of the run holds,
naming them, unless --force. Either way it first commits the present state on
refs/ralph/RUN_ID/rollback/K, so the rollback can be undone, and records a
WorkspaceRestored action on the run's chain.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("rollback takes one RUN_ID, got %d argument(s)", len(args))
			}
			if to == "" {
				return usageErrorf("rollback needs --to ITERATION (0 is the state before the run)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseIteration(to)
			if err != nil {
				return err
			}
			dir, err := existingStoreDir(storeFlag)
			if err != nil {
				return err
			}
			st, err := openStore(ledger.Options{Dir: dir}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			runID, err := resolveRunRef(serve.LocalReader{Store: st}, runRefArg(args, 0), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			r, err := loop.Rollback(cmd.Context(), st, runID, n, force, cmd.ErrOrStderr())
			if err != nil {
				return commandError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored the work tree of run %s to iteration %d (%s); the state before is on %s (seq %d)\n",
				runID, n, short(r.Target), r.Saved, r.Seq)
			return nil
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.Flags().StringVar(&to, "to", "", "the `ITERATION` whose checkpoint to restore (0: before the run)")
	cmd.Flags().BoolVar(&force, "force", false, "restore even over changes no checkpoint holds (they are saved first)")
	return cmd
}

// parseIteration reads an ITERATION argument.
func parseIteration(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, usageErrorf("ITERATION must be a whole number, 0 or more; got %q", s)
	}
	return n, nil
}
