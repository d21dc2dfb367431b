package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/stop"
	"github.com/ralphloop/ralph/tui"
)

func newViewCmd() *cobra.Command {
	var storeFlag, natsFlag, outputFlag, replayFlag string
	cmd := &cobra.Command{
		Use:   "view [RUN_ID] [--nats URL] [--output CALL]",
		Short: "Open a recorded run in the UI, read-only",
		Long: `Open a recorded run in the terminal UI, read-only: the causal chain as a tree,
the stop conditions as they were last evaluated, the last plan, and how the run
ended. v shows every stop-condition evaluation, enter every field of an action
with its hashes and verification, / filters, ? lists the keys.

RUN_ID is a run id, a unique prefix of one (see 'ralph runs') or latest;
a batch's (ralph run --tasks) opens the batch view: a row per task, enter
opens its run. Without it, the latest run (named on stderr). The UI needs a
terminal; for text, use 'ralph chain show --run RUN_ID --tree' or
'ralph history RUN_ID'.

--output CALL prints, whole, the output an agent call printed, from the file
it was written to (<store>/logs/RUN_ID/STEP_ID.out), and checks it against the
size and SHA-256 on the call's record. CALL is last (the run's last agent
call), a seq from the chain, or an action id or a unique prefix of one. It
needs no terminal.`,
		Example: `  ralph view 01a200c1
  ralph view 01a200c1-3fec-75aa-84b9-80d71cdc30cc --store examples/quickstart/.ralph
  ralph view 01a200c1 --output last | less`,
		Args: optionalRunID("view"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runView(cmd, args, storeFlag, natsFlag, outputFlag, replayFlag)
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.Flags().StringVar(&natsFlag, "nats", "", natsFlagUsage)
	addNATSAuthFlags(cmd)
	cmd.Flags().StringVar(&replayFlag, "replay", "", "show, in the history view (v), where the [[stop]] conditions of `FILE` would have stopped the run, beside the recorded verdicts (ralph replay)")
	cmd.Flags().StringVar(&outputFlag, "output", "", "print the whole output of agent call `CALL` (last, a seq or an action id) and check it against its record")
	return cmd
}

// runView is ralph view: the UI over a recorded run, or with --output the
// whole output of one of its agent calls.
func runView(cmd *cobra.Command, args []string, storeFlag, natsFlag, outputFlag, replayFlag string) error {
	out := cmd.OutOrStdout()
	ref := runRefArg(args, 0)
	if outputFlag != "" {
		return viewOutput(cmd, storeFlag, natsFlag, ref, outputFlag)
	}
	if !isTTY(out) {
		return usageErrorf("ralph view draws a full-screen UI and needs a terminal; for text use `ralph chain show --run %s --tree` or `ralph history %s`", ref.arg, ref.arg)
	}
	var replay *stop.ReplayResult
	if replayFlag != "" {
		if natsFlag != "" {
			return usageErrorf("--replay replays against a run in a store; a fleet run's checkpoints are not here (pass --store, or drop --replay)")
		}
		var err error
		if replay, err = replayRun(cmd, storeFlag, ref, replayFlag, false, 1); err != nil {
			return err
		}
	}
	st, err := viewStore(cmd.Context(), storeFlag, natsFlag, ref.arg, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer st.Close()
	// A viewer holds compact rows, not actions, but decoding a long
	// run makes garbage faster than the default pacer returns it:
	// a soft limit keeps the heap near what is live.
	debug.SetMemoryLimit(viewMemoryLimit)
	runID, err := resolveRunRef(st, ref, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	o := tui.Options{Input: cmd.InOrStdin(), Output: out, Replay: replay, ReplayName: filepath.Base(replayFlag)}
	if in := st.Served(); in != nil && (in.RunID == runID || in.Batch == runID) {
		o.GoesOn = fmt.Sprintf("process %d", in.PID)
	}
	err = tui.View(cmd.Context(), st, runID, o)
	if err != nil && cmd.Context().Err() == nil {
		return exitError(ExitFailure, err)
	}
	return nil
}

// viewOutput is ralph view RUN --output CALL.
func viewOutput(cmd *cobra.Command, storeFlag, natsFlag string, ref runRef, sel string) error {
	if natsFlag != "" {
		return usageErrorf("--output reads the store on this machine: a fleet run's output files stay with the worker that ran it; run ralph view --output there")
	}
	st, err := viewStore(cmd.Context(), storeFlag, "", ref.arg, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer st.Close()
	runID, err := resolveRunRef(st, ref, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	a, err := serve.CallWithOutput(st, runID, sel)
	if err != nil {
		return commandError(err)
	}
	return commandError(serve.CopyCallOutput(cmd.OutOrStdout(), st.Dir(), a))
}

// viewMemoryLimit is the Go heap ralph view aims to stay under; the GC
// works harder near it, it is not a hard cap.
const viewMemoryLimit = 96 << 20

// viewStore opens the store a view reads, which must exist: through its
// socket while a running ralph holds it, else directly, tuned for a
// reader: the smallest memtable and block cache (nothing is written; the
// chain is read once, in order), and no value-log GC.
func viewStore(ctx context.Context, flag, natsURL, runID string, errOut io.Writer) (serve.Reader, error) {
	return openRunReader(ctx, flag, natsURL, runID, ledger.Options{MemTableSize: 8 << 20, BlockCacheSize: 1 << 20, GCInterval: -1, NoCompactions: true}, errOut)
}
