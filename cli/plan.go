package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/rtfs"
)

type planFlags struct {
	ir, asJSON bool
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [CONFIG]",
		Short: "Generate one plan through the configured provider and print it; execute nothing",
		Long: `Ask the provider CONFIG (default ./ralph.toml) configures for the first
iteration's plan and print it with its diagnostics: the mode that produced it
(A: RTFS, B: JSON IR compiled to RTFS), repairs, every problem found on the
way, and for Mode B the diff between the model's IR and the plan. Nothing is
executed and nothing is recorded. Model exchanges are reported on stderr as
they complete.

--ir also prints the plan's canonical JSON IR. --json prints one JSON object
per line: one per model exchange, then the plan (with its IR).

Exit status: 0 a plan was produced, 1 the provider failed (network, server),
2 a bad config, a fatal provider error (such as a missing API key), or no
valid plan after every repair, 4 interrupted.`,
		Example: `  ralph plan
  ralph plan examples/quickstart/ralph.toml --ir
  ralph plan --json | jq 'select(.event == "plan") | .ir_diff'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("plan takes at most one CONFIG, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := configArg(args)
			if err != nil {
				return err
			}
			return runPlan(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg, f)
		},
	}
	cmd.Flags().BoolVar(&f.ir, "ir", false, "also print the plan's canonical JSON IR")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "one JSON object per line on stdout")
	return cmd
}

func runPlan(ctx context.Context, out, errOut io.Writer, cfg *config.Config, f planFlags) error {
	if err := cfg.CheckPaths(); err != nil {
		return exitError(ExitUsage, err)
	}
	intent, err := assemble.Intent(cfg)
	if err != nil {
		return exitError(ExitUsage, err)
	}
	eng, err := memoryEngine(cfg)
	if err != nil {
		return err
	}
	defer eng.Store.Close()
	// The plan, its diagnostics and provider errors are printed as they
	// came; a key an agent CLI or server echoed must not reach the terminal.
	out, errOut = arbiter.Redacting(out, eng.Secrets), arbiter.Redacting(errOut, eng.Secrets)
	provider, err := assemble.NewProvider(cfg, eng)
	if err != nil {
		return exitError(ExitUsage, err)
	}
	obs := arbiter.NewPlanObserver(out, errOut, f.asJSON)
	resp, perr := provider.Plan(ctx, arbiter.PlanRequest{Intent: intent, Iteration: 1, Observer: obs})
	if err := obs.Err(); err != nil {
		return exitError(ExitFailure, err)
	}
	if perr == nil && resp.IR == "" { // static and script plans: derive the IR here
		forms, err := rtfs.Read(resp.Source, planSourceName(cfg))
		if err != nil {
			return exitError(ExitUsage, err)
		}
		resp.IR = arbiter.Canonicalize(forms).JSON()
	}
	if f.asJSON {
		err = arbiter.WritePlanJSON(out, resp, perr)
	} else {
		err = arbiter.WritePlanText(out, resp, perr, f.ir)
	}
	if err != nil {
		return exitError(ExitFailure, err)
	}
	if perr != nil {
		perr = arbiter.RedactError(perr, eng.Secrets)
	}
	switch {
	case perr == nil:
		return nil
	case errors.Is(perr, context.Canceled):
		return exitError(ExitCancelled, perr)
	case errors.Is(perr, arbiter.ErrNoPlan), errors.Is(perr, arbiter.ErrFatal), errors.Is(perr, arbiter.ErrScriptExhausted):
		return exitError(ExitUsage, perr)
	}
	return exitError(ExitFailure, perr)
}

// planSourceName names a static or script plan in error positions.
func planSourceName(cfg *config.Config) string {
	switch {
	case cfg.Model.Provider == "script":
		return cfg.Model.Script + " (answer 1)"
	case cfg.Plan.File != "":
		return cfg.Plan.File
	}
	return cfg.File + " [plan].rtfs"
}
