package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/tui"
)

// Reading a fleet (--nats URL). A reading command reads the fleet only when
// --nats is given: RALPH_NATS is for submit and worker, so an exported
// variable never changes what `ralph runs` shows of a local store.
//
// A run's chain is rebuilt from the fleet's stream (verified on the way)
// into an in-memory store, which the command then reads through the same
// serve.Reader as a local store: its output is the same bytes.

// natsFlagUsage is the --nats flag's help on every reading command.
const natsFlagUsage = "read the fleet at NATS `URL` (comma-separated for a cluster) instead of a local store"

// openFleetReader is fleet.OpenReader as the command under ctx signs in.
func openFleetReader(ctx context.Context, url, name string) (*fleet.Reader, error) {
	f, err := fleet.OpenReader(ctx, url, name, signInFrom(ctx))
	return f, commandError(err)
}

// openRunReader is openReader for a command that reads one run: from the
// fleet at natsURL when it is set (runID, or a unique prefix of it, names
// the run), else from the local store storeFlag names.
func openRunReader(ctx context.Context, storeFlag, natsURL, runID string, opts ledger.Options, errOut io.Writer) (serve.Reader, error) {
	if natsURL == "" {
		return openReader(ctx, storeFlag, opts, errOut)
	}
	if storeFlag != "" {
		return nil, usageErrorf("--store and --nats name two places to read; pass one")
	}
	if runID == "" {
		return nil, usageErrorf("with --nats, name the run to read with --run ID; `ralph runs --nats %s` lists them", natsURL)
	}
	f, err := openFleetReader(ctx, natsURL, "ralph reader")
	if err != nil {
		return nil, err
	}
	r, err := f.Rebuild(ctx, runID, nil)
	if err != nil {
		f.Close()
		return nil, commandError(err)
	}
	return r, nil
}

// fleetRuns is `ralph runs --nats URL`: every run of the fleet with its
// state, worker, iteration, cost and why it stopped.
func fleetRuns(ctx context.Context, w io.Writer, url string, asJSON bool) error {
	f, err := openFleetReader(ctx, url, "ralph runs")
	if err != nil {
		return err
	}
	defer f.Close()
	runs, err := f.States(ctx)
	if err != nil {
		return commandError(err)
	}
	live, err := f.LiveWorkers(ctx)
	if err != nil {
		return commandError(err)
	}
	return commandError(fleet.WriteRuns(w, runs, live, asJSON))
}

func flushOut(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return exitError(ExitFailure, fmt.Errorf("write output: %w", err))
	}
	return nil
}

// fleetChainRun connects to the fleet at url for `ralph chain VERB --nats
// URL --run ID` and finds the run id names (a run id or a unique prefix).
func fleetChainRun(cmd *cobra.Command, url, id, verb string) (*fleet.Reader, fleet.RunState, error) {
	if id == "" {
		return nil, fleet.RunState{}, usageErrorf("with --nats, name the run whose chain to %s with --run ID; `ralph runs --nats %s` lists them", verb, url)
	}
	f, err := openFleetReader(cmd.Context(), url, "ralph chain "+verb)
	if err != nil {
		return nil, fleet.RunState{}, err
	}
	run, err := f.Resolve(cmd.Context(), id)
	if err != nil {
		f.Close()
		return nil, fleet.RunState{}, commandError(err)
	}
	return f, run, nil
}

// verifyFleetChain is `ralph chain verify --nats URL --run ID`: the run's
// chain as the fleet's stream holds it, verified as a bundle is (every
// hash, link, signature and Merkle root; every segment's key pinned when
// --key is given).
func verifyFleetChain(cmd *cobra.Command, url, id string, pinned []string) error {
	f, run, err := fleetChainRun(cmd, url, id, "verify")
	if err != nil {
		return err
	}
	defer f.Close()
	rep, info, err := f.VerifyChain(cmd.Context(), run.RunID, pinned)
	if err != nil {
		return exitError(ExitFailure, err)
	}
	if err := writeOut(cmd.OutOrStdout(), fleet.VerifiedText(run, url, rep, info)); err != nil {
		return err
	}
	if info.Uncertified > 0 {
		return exitError(ExitFailure, fmt.Errorf("the chain of run %s was written to by a key the fleet did not certify (%d segment(s), left out above): %s", run.RunID, info.Uncertified, info.UncertifiedNote))
	}
	return nil
}

// exportFleetBundle is `ralph chain export --nats URL --run ID --bundle`:
// the run's chain as the stream holds it, as a bundle (`ralph chain verify
// --bundle FILE` checks it with no store).
func exportFleetBundle(cmd *cobra.Command, url, id string) error {
	f, run, err := fleetChainRun(cmd, url, id, "export")
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<16)
	if _, err := f.ReadChain(cmd.Context(), run.RunID, w); err != nil {
		return exitError(ExitFailure, err)
	}
	return flushOut(w)
}

// attachFleet is `ralph attach --nats URL RUN_ID`: the live UI of a run on
// whichever worker runs it, through a tunnel over NATS to that run's serve
// socket; the same UI, keys and controls as a local attach.
func attachFleet(cmd *cobra.Command, url string, ref runRef) error {
	ctx := cmd.Context()
	f, err := openFleetReader(ctx, url, "ralph attach")
	if err != nil {
		return err
	}
	defer f.Close()
	run, err := f.Resolve(ctx, ref.arg)
	if err != nil {
		return commandError(err)
	}
	noteLatest(cmd.ErrOrStderr(), ref, run.RunID, "")
	signer, err := fleetSigner(ctx)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("run %s in the fleet at %s", run.RunID, url)
	c, err := serve.DialConn(ctx, name, func(ctx context.Context) (net.Conn, error) {
		return fleet.DialRun(ctx, f.NC, signer, run.RunID)
	})
	var refused *fleet.RefusedError
	switch {
	case errors.Is(err, fleet.ErrNoWorker):
		return commandError(fleet.NotRunning(run, url))
	case errors.As(err, &refused):
		return exitError(ExitUsage, fmt.Errorf("attach to %s: %w", name, err))
	case err != nil:
		return exitError(ExitFailure, fmt.Errorf("attach to %s: %w", name, err))
	}
	defer c.Close()
	err = tui.Run(ctx, tui.Options{Run: c.Live(), Attached: true, Input: cmd.InOrStdin(), Output: cmd.OutOrStdout()})
	return attachEnded(cmd, err, fmt.Sprintf("detached from run %s; it goes on on worker %s (`ralph attach --nats %s %s` reopens it)\n",
		run.RunID, run.Worker, url, run.RunID))
}
