package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"

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
	bw := bufio.NewWriter(w)
	if asJSON {
		for _, r := range runs {
			b, err := json.Marshal(r)
			if err != nil {
				return exitError(ExitFailure, err)
			}
			bw.Write(append(b, '\n'))
		}
		return flushOut(bw)
	}
	tw := tabwriter.NewWriter(bw, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATE\tWORKER\tITER\tCOST\tSTOPPED BY\tREASON")
	for _, r := range runs {
		worker, reason := r.Worker, r.Reason
		if worker == "" {
			worker = "-"
		}
		if r.Error != "" && reason == "" {
			reason = r.Error
		}
		if r.ChainSkipped > 0 {
			reason = strings.TrimSpace(fmt.Sprintf("%s (%s on its chain subject skipped: %s)", reason, messages(r.ChainSkipped), strings.TrimSuffix(r.ChainNote, "; skipped")))
		}
		if r.State == fleet.StateRunning && r.Worker != "" && !live[r.Worker] {
			reason = "its worker stopped heartbeating; another worker takes the run over once the job's ack wait passes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t$%.4f\t%s\t%s\n", r.RunID, r.State, worker, r.Iteration, r.CostUSD, r.Condition, oneLineText(reason))
	}
	tw.Flush() // into bw, whose Flush reports a write error
	return flushOut(bw)
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
	var b strings.Builder
	fmt.Fprintf(&b, "verified the chain of run %s in the fleet at %s: %d actions, %d checkpoints, Merkle root %s\n",
		run.RunID, url, rep.Actions, rep.Checkpoints, rep.Root)
	keys, trust := "key "+rep.Key, " (named by the chain; pass --key to pin it)"
	if len(rep.Keys) > 1 {
		keys, trust = "keys "+strings.Join(rep.Keys, ", "), " (one per worker that ran it, named by the chain; pass --key for each to pin them)"
	}
	if rep.Pinned {
		trust = " (pinned with --key)"
	}
	b.WriteString("trusted " + keys + trust + "\n")
	if !info.Ended {
		fmt.Fprintf(&b, "the run has not ended (%s): verified up to its last signed checkpoint\n", run.State)
	}
	if info.Dropped > 0 {
		fmt.Fprintf(&b, "%d actions no checkpoint covered (a worker stopped mid-commit) are not part of the chain\n", info.Dropped)
	}
	if info.Skipped > 0 {
		fmt.Fprintf(&b, "skipped %s on the run's chain subject, not part of its chain:\n", messages(info.Skipped))
		for _, note := range info.SkipNotes {
			fmt.Fprintf(&b, "  %s\n", strings.TrimSuffix(note, "; skipped"))
		}
		if more := info.Skipped - uint64(len(info.SkipNotes)); more > 0 {
			fmt.Fprintf(&b, "  and %d more\n", more)
		}
	}
	if err := writeOut(cmd.OutOrStdout(), b.String()); err != nil {
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
		return fleetNotRunning(run, url)
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

// fleetNotRunning explains an attach to a run no worker runs now.
func fleetNotRunning(run fleet.RunState, url string) error {
	switch {
	case fleet.Final(run.State):
		return exitError(ExitUsage, fmt.Errorf("run %s has ended (%s); `ralph view --nats %s %s` shows it", run.RunID, run.State, url, run.RunID))
	case run.State == fleet.StateQueued || run.State == fleet.StateHandedBack:
		return exitError(ExitUsage, fmt.Errorf("run %s is %s: no worker runs it yet; start one with `ralph worker --nats %s`, then attach again", run.RunID, run.State, url))
	}
	return exitError(ExitUsage, fmt.Errorf("no worker answers for run %s (its last worker, %s, may have stopped; another takes the run over once its ack wait passes); `ralph runs --nats %s` shows where it is", run.RunID, run.Worker, url))
}

// messages is "1 message" or "N messages".
func messages(n uint64) string {
	if n == 1 {
		return "1 message"
	}
	return strconv.FormatUint(n, 10) + " messages"
}
