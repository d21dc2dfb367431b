package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/stop"
)

// runActions reads a recorded run (ref names it: see runRef); a run with
// no actions is a usage error.
func runActions(ctx context.Context, storeFlag, natsURL string, ref runRef, errOut io.Writer) ([]ledger.Action, error) {
	st, err := openRunReader(ctx, storeFlag, natsURL, ref.arg, ledger.Options{}, errOut)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	runID, err := resolveRunRef(st, ref, errOut)
	if err != nil {
		return nil, err
	}
	acts, err := st.ByRun(runID)
	if err != nil {
		return nil, exitError(ExitFailure, err)
	}
	if len(acts) == 0 {
		return nil, exitError(ExitUsage, fmt.Errorf("run %s has no recorded actions; `ralph runs` lists the runs", runID))
	}
	return acts, nil
}

func newPredicateCmd() *cobra.Command {
	var storeFlag, natsFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "predicate RUN_ID EXPR|JSON",
		Short: "Evaluate a completion predicate against a recorded run",
		Long: `Evaluate a completion predicate (RTFS with the audit.* builtins, or the JSON
DSL when it starts with '{') against the actions a run recorded. Prints true or
false, the audit queries that decided it with the actions that answered them,
and the action after which the predicate first held. RUN_ID is a run id, a
unique prefix of one, or latest.

Exit status: 0 when it holds, 1 when it does not, 2 for a bad predicate or run.`,
		Example: `  ralph predicate 01J… '(and (audit.succeeded? "shell.exec") (not (audit.failed? "git.push")))'
  ralph predicate 01J… '{"action_metadata_matches": {"function_name": "shell.exec", "key": "exit", "value": "0"}}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf("predicate takes RUN_ID and a predicate, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			pred, err := stop.ParsePredicate(args[1], "<predicate>")
			if err != nil {
				return exitError(ExitUsage, err)
			}
			acts, err := runActions(cmd.Context(), storeFlag, natsFlag, runRefArg(args, 0), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			rep, err := serve.EvalPredicate(cmd.Context(), pred, acts)
			if err != nil {
				return exitError(ExitFailure, err)
			}
			if asJSON {
				b, _ := json.Marshal(rep) // plain strings, bools and ints: cannot fail
				err = writeOut(cmd.OutOrStdout(), string(b)+"\n")
			} else {
				err = writeOut(cmd.OutOrStdout(), rep.Text())
			}
			if err != nil {
				return err
			}
			if !rep.Holds {
				return exitError(ExitFailure, silentError{})
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.Flags().StringVar(&natsFlag, "nats", "", natsFlagUsage)
	addNATSAuthFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func newHistoryCmd() *cobra.Command {
	var storeFlag, natsFlag string
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "history [RUN_ID]",
		Short: "Show a run's stop-condition evaluations",
		Long: `Show every stop-condition evaluation a run recorded (StopConditionsEvaluated
actions), oldest first: for each iteration, each condition's verdict, progress,
reason, and whether it came from the cache or timed out. --verbose adds the
evidence each condition looked at; --json prints one object per evaluation.

RUN_ID is a run id, a unique prefix of one, or latest; without it, the latest
run (named on stderr).`,
		Args: optionalRunID("history"),
		RunE: func(cmd *cobra.Command, args []string) error {
			acts, err := runActions(cmd.Context(), storeFlag, natsFlag, runRefArg(args, 0), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			n := 0
			for i := range acts {
				if acts[i].Type != ledger.StopConditionsEvaluated {
					continue
				}
				ev, err := stop.EvaluationFromAction(&acts[i])
				if err != nil {
					return exitError(ExitFailure, err)
				}
				n++
				if asJSON {
					b, err := json.Marshal(ev)
					if err != nil {
						return exitError(ExitFailure, err)
					}
					w.Write(append(b, '\n'))
					continue
				}
				stop.WriteEvaluation(w, acts[i].Seq, ev, verbose)
			}
			if n == 0 && !asJSON {
				fmt.Fprintf(w, "run %s recorded no stop-condition evaluations\n", acts[0].RunID)
			}
			if err := w.Flush(); err != nil {
				return exitError(ExitFailure, fmt.Errorf("write output: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	addNATSAuthFlags(cmd)
	cmd.Flags().StringVar(&natsFlag, "nats", "", natsFlagUsage)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per evaluation")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also print each condition's evidence")
	return cmd
}
