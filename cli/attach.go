package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/tui"
)

func newAttachCmd() *cobra.Command {
	var storeFlag, natsFlag string
	cmd := &cobra.Command{
		Use:   "attach [RUN_ID] [--nats URL]",
		Short: "Open the live UI on a loop running in another process; q detaches, a aborts",
		Long: `Open the live UI on a loop another ralph process runs (ralph run --detach, or a
run started in another terminal): the same panes and keys as ralph run, fed
through the store's socket. q (or ctrl+c) detaches and leaves the run going;
a aborts it after asking; p pauses, s skips the current iteration. Any number
of UIs can attach to one run at once.

RUN_ID is a run id, a unique prefix of one (see 'ralph runs') or latest;
without it, the run going on in the store (named on stderr).`,
		Example: `  ralph run --detach && ralph attach 01a200c1`,
		Args:    optionalRunID("attach"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := runRefArg(args, 0)
			out := cmd.OutOrStdout()
			if !isTTY(out) {
				return usageErrorf("ralph attach draws the live UI and needs a terminal; for text use `ralph runs` or `ralph chain show --run %s`", ref.arg)
			}
			if natsFlag != "" {
				if storeFlag != "" {
					return usageErrorf("--store and --nats name two places to read; pass one")
				}
				return attachFleet(cmd, natsFlag, ref)
			}
			dir, err := existingStoreDir(storeFlag)
			if err != nil {
				return err
			}
			c, err := serve.Dial(cmd.Context(), dir)
			switch {
			case errors.Is(err, serve.ErrNotServed):
				st, err := openReaderAt(cmd.Context(), dir, ledger.Options{}, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer st.Close()
				return notRunning(st, ref, "", cmd.ErrOrStderr())
			case err != nil:
				return exitError(ExitFailure, err)
			}
			defer c.Close()
			in := c.Info()
			id, err := attachTarget(c.Reader(dir), ref, in.RunID, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if id != in.RunID {
				return notRunning(c.Reader(dir), runRef{arg: id, given: true}, in.RunID, nil) // c: closed by the defer above
			}
			defer attachNotify(cmd.Context(), c, in.RunID)()
			err = tui.Run(cmd.Context(), tui.Options{Run: c.Live(), Attached: true, StoreDir: dir, Input: cmd.InOrStdin(), Output: out})
			return attachEnded(cmd, err, fmt.Sprintf("detached from run %s; it goes on in process %d (`ralph attach %s` reopens it)\n", in.RunID, in.PID, in.RunID))
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.Flags().StringVar(&natsFlag, "nats", "", "attach to a run of the fleet at NATS `URL`, on whichever worker runs it")
	addNATSAuthFlags(cmd)
	return cmd
}

// attachTarget is the run an attach names: the run ref names, or, when
// none was given, the one the store's process drives (live), if any.
func attachTarget(st serve.Reader, ref runRef, live string, errOut io.Writer) (string, error) {
	if !ref.given && live != "" {
		fmt.Fprintf(errOut, "ralph: no RUN_ID given: attaching to the run going on in %s, %s\n", st.Dir(), live)
		return live, nil
	}
	return resolveRunRef(st, ref, errOut)
}

// notRunning explains an attach to a run no process runs: one that ended
// (and how to see it), one whose process died (and how to continue it), or
// none at all, as st (the caller closes it) records it. live is the run
// the store's process drives, if any.
func notRunning(st serve.Reader, ref runRef, live string, errOut io.Writer) error {
	runID, err := resolveRunRef(st, ref, errOut)
	if err != nil {
		return err
	}
	runs, err := st.ListRuns()
	if err != nil {
		return exitError(ExitFailure, err)
	}
	also := ""
	if live != "" {
		also = fmt.Sprintf(" (the run going on in this store is %s: `ralph attach %s`)", live, live)
	}
	for _, r := range runs {
		if r.ID != runID {
			continue
		}
		if r.State == loop.StateRunning || r.State == loop.StatePaused || r.State == serve.StateInterrupted { // interrupted: as GET /v1/runs says it
			return exitError(ExitUsage, fmt.Errorf("run %s is not running: its process ended without closing it; `ralph resume %s` continues it, `ralph view %s` shows it%s", runID, runID, runID, also))
		}
		return exitError(ExitUsage, fmt.Errorf("run %s has ended (%s); `ralph view %s` shows it%s", runID, r.State, runID, also))
	}
	return exitError(ExitUsage, fmt.Errorf("run %s is not running; `ralph view %s` shows what it recorded%s", runID, runID, also))
}

// attachEnded reports how an attached UI ended; detached is what to say
// when the user detached.
func attachEnded(cmd *cobra.Command, err error, detached string) error {
	var panicErr *tui.PanicError
	switch {
	case errors.Is(err, tui.ErrDetached):
		return writeOut(cmd.OutOrStdout(), detached)
	case errors.As(err, &panicErr):
		return exitError(ExitFailure, fmt.Errorf("internal error in the UI: %v; please report it", panicErr.Value))
	case err != nil && cmd.Context().Err() != nil:
		return nil // a signal ended this UI; the run goes on
	case err != nil:
		return exitError(ExitFailure, err)
	}
	return nil
}
