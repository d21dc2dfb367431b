package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
)

func newRunsCmd() *cobra.Command {
	var storeFlag, natsFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs [--json] [--nats URL]",
		Short: "List runs with state, iterations, cost and why they stopped",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if natsFlag != "" {
				if storeFlag != "" {
					return usageErrorf("--store and --nats name two places to read; pass one")
				}
				return fleetRuns(cmd.Context(), cmd.OutOrStdout(), natsFlag, asJSON)
			}
			return listRuns(cmd, storeFlag, asJSON)
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR`")
	cmd.Flags().StringVar(&natsFlag, "nats", "", natsFlagUsage)
	addNATSAuthFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	return cmd
}

// listRuns prints the runs of the store flag names, and those of its runs
// the store lost (serve/lost.go): a store that is gone lists only those, and
// exits 1.
func listRuns(cmd *cobra.Command, flag string, asJSON bool) error {
	dir, err := commandStoreDir(flag)
	if err != nil {
		return err
	}
	if storeIsNew(dir) {
		lost := serve.LostRunsOf(absDir(dir))
		if len(lost) == 0 {
			return exitError(ExitUsage, fmt.Errorf("no store at %s; run a plan first or pass --store DIR", dir))
		}
		if err := serve.WriteRuns(cmd.OutOrStdout(), serve.LostRecords(lost), nil, asJSON); err != nil {
			return commandError(err)
		}
		return exitError(ExitFailure, silentError{})
	}
	st, err := openReaderAt(cmd.Context(), dir, ledger.Options{}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := st.ListRuns()
	if err != nil {
		return exitError(ExitFailure, err)
	}
	return commandError(serve.WriteRuns(cmd.OutOrStdout(), serve.WithLost(runs, serve.LostRunsOf(absDir(dir))), st.Served(), asJSON))
}
