package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// ExitNotStopped is ralph replay's exit status when the configuration
// would not have stopped within the recorded iterations.
const ExitNotStopped = 5

func newReplayCmd() *cobra.Command {
	var storeFlag, cfgFile string
	var rerun, asJSON bool
	var jobs int
	cmd := &cobra.Command{
		Use:   "replay RUN_ID --config FILE",
		Short: "Ask where another stop configuration would have stopped a recorded run",
		Long: `Evaluate the [[stop]] conditions of FILE against a recorded run, iteration by
iteration, through the same evaluator the runner uses, fed from the chain, and
print where they would have stopped and why, beside where the run really
stopped.

Budgets, predicates, on_error, output_pattern, consecutive_failures and
no_progress (on each iteration's checkpoint, else the recorded fingerprint)
are exact. command, file_exists and file_contains take the recorded verdict
when the condition and its workdir are the run's; otherwise --rerun checks
them against each iteration's checkpoint in a temporary git worktree (never
your work tree), --jobs at a time, and without --rerun they are unknown.

Exit status: what the configuration would have exited with (0 success,
1 failure, 3 limit), 5 when it would not have stopped within the recorded
iterations, 2 for bad input.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("replay takes one RUN_ID, got %d argument(s)", len(args))
			}
			if cfgFile == "" {
				return usageErrorf("replay needs --config FILE, the ralph.toml whose [[stop]] conditions to replay")
			}
			if jobs < 1 {
				return usageErrorf("--jobs must be 1 or more, got %d", jobs)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := replayRun(cmd, storeFlag, runRefArg(args, 0), cfgFile, rerun, jobs)
			if err != nil {
				return err
			}
			code := replayExit(res)
			w := bufio.NewWriter(cmd.OutOrStdout())
			if asJSON {
				b, err := json.Marshal(struct {
					*stop.ReplayResult
					Summary  string `json:"summary"`
					ExitCode int    `json:"exit_code"`
				}{res, stop.ReplaySummary(res), code})
				if err != nil {
					return exitError(ExitFailure, err)
				}
				w.Write(append(b, '\n'))
			} else {
				stop.WriteReplay(w, res)
			}
			if err := w.Flush(); err != nil {
				return exitError(ExitFailure, fmt.Errorf("write output: %w", err))
			}
			if code != 0 {
				return exitError(code, silentError{})
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.Flags().StringVar(&cfgFile, "config", "", "the ralph.toml `FILE` whose [[stop]] conditions to replay")
	cmd.Flags().BoolVar(&rerun, "rerun", false, "check changed command and file conditions against each iteration's checkpoint")
	cmd.Flags().IntVar(&jobs, "jobs", runtime.NumCPU(), "iterations rerun at once")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object: every iteration's verdicts and the decision")
	return cmd
}

// replayRun replays the [[stop]] conditions of cfgFile against the run
// ref names (ralph replay, ralph view --replay).
func replayRun(cmd *cobra.Command, storeFlag string, ref runRef, cfgFile string, rerun bool, jobs int) (*stop.ReplayResult, error) {
	// Only [[stop]] and [loop] matter here: a file of stop tables will do.
	cfg, err := config.LoadForExec(cfgFile, nil)
	if err != nil {
		return nil, exitError(ExitUsage, err)
	}
	ctx := cmd.Context()
	acts, err := runActions(ctx, storeFlag, "", ref, cmd.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	res, err := assemble.Replay(ctx, cfg, acts, ref.arg, assemble.ReplayOptions{Rerun: rerun, Jobs: jobs})
	if err != nil {
		return nil, commandError(setupError(err))
	}
	return res, nil
}

func replayExit(res *stop.ReplayResult) int {
	if !res.Stopped {
		return ExitNotStopped
	}
	switch res.Decision.Class {
	case stop.ClassSuccess:
		return ExitOK
	case stop.ClassFailure:
		return ExitFailure
	case stop.ClassAbort:
		return ExitCancelled
	}
	return loop.ExitLimit
}
