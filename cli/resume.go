package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
)

func newResumeCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "resume [RUN_ID]",
		Short: "Continue a run after a crash or an abort, with the config it was started with",
		Long: `Continue a run after a crash or an abort, with the config it was started with.
RUN_ID is a run id, a unique prefix of one (see 'ralph runs') or latest;
without it, the latest run (named on stderr).`,
		Args: optionalRunID("resume"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSandboxFlag(f.sandbox); err != nil {
				return err
			}
			cfg, runID, err := snapshotConfig(f.store, runRefArg(args, 0), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if cfg.Tasks != nil && cfg.Tasks.Source != "" { // a batch
				return runBatch(cmd, cfg, f, runID)
			}
			return runLoop(cmd, cfg, f, runID)
		},
	}
	cmd.Flags().BoolVar(&f.noTUI, "no-tui", false, "run headless")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "one JSON object per line on stdout")
	cmd.Flags().BoolVar(&f.brief, "brief", false, "headless: print only one line per iteration and the summary")
	cmd.Flags().StringVar(&f.store, "store", "", "store `DIR`")
	addSandboxFlag(cmd.Flags(), &f.sandbox)
	return cmd
}

// snapshotConfig reads the config recorded with the RunStarted (or a
// batch's BatchStarted) of the run ref names, and returns it with the
// run's id.
func snapshotConfig(storeFlag string, ref runRef, errOut io.Writer) (*config.Config, string, error) {
	st, err := existingStore(storeFlag, errOut)
	if err != nil {
		return nil, "", err
	}
	runID, err := resolveRunRef(serve.LocalReader{Store: st}, ref, errOut)
	if err != nil {
		st.Close()
		return nil, "", err
	}
	acts, err := st.ByRun(runID)
	dir := st.Dir()
	st.Close()
	if err != nil {
		return nil, "", exitError(ExitFailure, err)
	}
	for _, a := range acts {
		if a.Type == ledger.RunStarted || a.Type == ledger.BatchStarted {
			cfg, err := config.Parse([]byte(a.Metadata["config"].Str()), "run "+runID+" config snapshot", nil)
			if err != nil {
				return nil, "", exitError(ExitUsage, err)
			}
			cfg.Store.Dir = dir
			return cfg, runID, nil
		}
	}
	return nil, "", exitError(ExitUsage, fmt.Errorf("no run %s in this store; `ralph runs` lists them", runID))
}
