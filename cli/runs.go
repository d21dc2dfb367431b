package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
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
		if err := writeRuns(cmd.OutOrStdout(), serve.LostRecords(lost), nil, asJSON); err != nil {
			return err
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
	return writeRuns(cmd.OutOrStdout(), serve.WithLost(runs, serve.LostRunsOf(absDir(dir))), st.Served(), asJSON)
}

// writeRuns prints the runs (serve.RunRows: the same fields as GET
// /v1/runs). live is the process serving the store (nil when this process
// opened it).
func writeRuns(w io.Writer, runs []loop.RunRecord, live *serve.Info, asJSON bool) error {
	now := time.Now()
	rows := serve.RunRows(runs, live, now)
	anyLive := false
	for _, r := range rows {
		anyLive = anyLive || r.Attached != nil
	}
	if asJSON {
		for _, r := range rows {
			b, _ := json.Marshal(r) // plain strings, numbers and bools cannot fail to marshal
			if err := writeOut(w, string(b)+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := "RUN\tSTATE\tSTARTED\tDURATION\tITER\tCOST\tSTOPPED BY\tREASON"
	if anyLive {
		head += "\tPID\tUI\tLOG"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t$%.4f\t%s\t%s", r.ID, r.State, startedColumn(r.Started, now), durationColumn(r), r.Iterations, r.CostUSD, r.Condition, r.Reason)
		if r.Attached != nil {
			ui := "none"
			if *r.Attached {
				ui = "attached"
			}
			log := r.LogFile
			if log == "" {
				log = "-"
			}
			fmt.Fprintf(tw, "\t%d\t%s\t%s", r.PID, ui, log)
		} else if anyLive {
			fmt.Fprint(tw, "\t\t\t")
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
