package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
)

// How the fleet's runs and a run's verified chain read as text (ralph runs
// --nats, ralph chain verify --nats, ralph attach --nats).

// WriteRuns prints every run of the fleet, as ralph runs --nats does: its
// state, worker, iteration, cost and why it stopped (a table, or with
// asJSON one RunState per line); live holds the workers that heartbeat.
func WriteRuns(w io.Writer, runs []RunState, live map[string]bool, asJSON bool) error {
	bw := bufio.NewWriter(w)
	if asJSON {
		for _, r := range runs {
			b, err := json.Marshal(r)
			if err != nil {
				return err
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
		if r.State == StateRunning && r.Worker != "" && !live[r.Worker] {
			reason = "its worker stopped heartbeating; another worker takes the run over once the job's ack wait passes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t$%.4f\t%s\t%s\n", r.RunID, r.State, worker, r.Iteration, r.CostUSD, r.Condition, oneLineText(reason))
	}
	tw.Flush() // into bw, whose Flush reports a write error
	return flushOut(bw)
}

// flushOut flushes bw; a failure says it was the output's.
func flushOut(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// VerifiedText says what verifying the chain of run in the fleet at url
// proved (rep, info): its actions, checkpoints, root and trusted keys, and
// what is not part of it.
func VerifiedText(run RunState, url string, rep ledger.BundleReport, info ChainInfo) string {
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
	return b.String()
}

// NotRunning explains an attach to a run no worker runs now.
func NotRunning(run RunState, url string) error {
	switch {
	case Final(run.State):
		return usage.Wrap(fmt.Errorf("run %s has ended (%s); `ralph view --nats %s %s` shows it", run.RunID, run.State, url, run.RunID))
	case run.State == StateQueued || run.State == StateHandedBack:
		return usage.Wrap(fmt.Errorf("run %s is %s: no worker runs it yet; start one with `ralph worker --nats %s`, then attach again", run.RunID, run.State, url))
	}
	return usage.Wrap(fmt.Errorf("no worker answers for run %s (its last worker, %s, may have stopped; another takes the run over once its ack wait passes); `ralph runs --nats %s` shows where it is", run.RunID, run.Worker, url))
}

// messages is "1 message" or "N messages".
func messages(n uint64) string {
	if n == 1 {
		return "1 message"
	}
	return strconv.FormatUint(n, 10) + " messages"
}

// oneLineText is s on one line, its runs of white space made one space.
func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }
