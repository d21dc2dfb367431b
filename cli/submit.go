package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

func newSubmitCmd() *cobra.Command {
	var natsFlag, workspace string
	cmd := &cobra.Command{
		Use:   "submit CONFIG [--nats URL] [--workspace GIT_URL[@REF]]",
		Short: "Queue a run on the fleet; print its run id",
		Long: `Check CONFIG as 'ralph run' would (its syntax, stop conditions, and a static or
agent plan admitted by governance), check that the files it names are in the
workspace, then queue the run for the fleet's workers and print its run id
alone on standard output (id=$(ralph submit ...) works).

--workspace GIT_URL[@REF] is the git repository the run works in: each run gets
a fresh clone on its own branch ralph/RUN_ID, from REF (a branch, tag or
commit; default the remote's HEAD), and every iteration is committed and
pushed there. The config's paths are read relative to where CONFIG sits in
its repository. Submit checks REF's files with a shallow fetch into a
temporary directory, and queues the commit it checked. Without --workspace
the run starts in an empty directory, so a config that names a file is
refused.

What only a worker's machine can check (the API key, the agent CLI on its
PATH, model.command) is checked by the worker that takes the run.

Nothing is queued when a check fails. Exit status: 0 queued, 2 a bad config,
plan or workspace, or no NATS server at the URL (--nats, else RALPH_NATS,
else nats://127.0.0.1:4222), 1 the fleet failed to queue it.`,
		Example: `  ralph submit ralph.toml --workspace git@github.com:me/project.git@main
  id=$(ralph submit ralph.toml --nats nats://10.0.0.5:4222 --workspace https://git.example.com/p.git)`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("submit takes one CONFIG (a ralph.toml), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], workspace, natsURL(natsFlag))
		},
	}
	cmd.Flags().StringVar(&natsFlag, "nats", "", "NATS `URL` of the fleet, comma-separated for a cluster (default RALPH_NATS, then "+defaultNATS+")")
	addNATSAuthFlags(cmd)
	cmd.Flags().StringVar(&workspace, "workspace", "", "the run's git repository `GIT_URL[@REF]`: each run gets a fresh clone on branch ralph/RUN_ID (default: an empty directory)")
	return cmd
}

func runSubmit(ctx context.Context, out, errOut io.Writer, cfgPath, workspace, natsAt string) error {
	cfg, err := config.Load(cfgPath, nil) // config errors name file:line:col, as ralph run's do
	if err != nil {
		return exitError(ExitUsage, err)
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return exitError(ExitUsage, fmt.Errorf("read config %s: %w", cfgPath, err))
	}
	if err := cfg.RefuseCredential(string(data)); err != nil {
		return exitError(ExitUsage, err)
	}
	job := fleet.Job{RunID: loop.NewID(), Config: string(data), ConfigPath: fleet.DefaultConfigPath}
	if cfg.Agent != nil {
		job.Agent = cfg.Agent.CLI
	}
	var tree assemble.JobTree = fleet.EmptyWorkspace{}
	if workspace != "" {
		u, ref, err := fleet.SplitWorkspace(workspace)
		if err != nil {
			return exitError(ExitUsage, err)
		}
		job.Workspace = u
		if job.ConfigPath, err = fleet.ConfigInRepo(cfgPath); err != nil {
			return exitError(ExitUsage, err)
		}
		clone, err := fleet.FetchWorkspace(ctx, u, ref)
		if err != nil {
			return commandError(err)
		}
		defer clone.Remove()
		job.Ref, tree = clone.SHA, clone
	}
	if err := assemble.CheckJob(ctx, cfg, job.ConfigPath, tree, inMemoryStore); err != nil {
		return setupError(err)
	}
	// The fleet must have its streams (a worker makes them); the job goes
	// to the keeper, signed.
	nc, _, err := openFleet(ctx, natsAt, "ralph submit")
	if err != nil {
		return err
	}
	defer nc.Close()
	signer, err := fleetSigner(ctx)
	if err != nil {
		return err
	}
	if err := fleet.Submit(ctx, nc, signer, job); err != nil {
		var refused *fleet.RefusedError
		if errors.As(err, &refused) {
			return exitError(ExitUsage, fmt.Errorf("the fleet at %s refused run %s: %w", natsAt, job.RunID, err))
		}
		return exitError(ExitFailure, fmt.Errorf("queue run %s on the fleet at %s: %w; `ralph runs --nats %s` shows whether it was queued before you submit again", job.RunID, natsAt, err, natsAt))
	}
	if err := writeOut(out, job.RunID+"\n"); err != nil {
		return err
	}
	where := "an empty directory"
	if job.Workspace != "" {
		where = fmt.Sprintf("%s at %s, on branch ralph/%s", job.Workspace, shortSHA(job.Ref), job.RunID)
	}
	// Best effort: the run id, what matters, is already on stdout.
	signIn := ""
	if c := signInFrom(ctx).CredsFile(); c != "" && os.Getenv("RALPH_NATS_CREDS") != c {
		signIn = " --creds " + c // the submitter's credentials read states and chains too
	}
	fmt.Fprintf(errOut, "queued run %s on %s (works in %s); `ralph runs --nats %s%s` lists it, `ralph attach --nats %s%s %s` follows it once a worker takes it\n",
		job.RunID, natsAt, where, natsAt, signIn, natsAt, signIn, job.RunID)
	return nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "its HEAD"
	}
	return s
}

// inMemoryStore is the store of an engine that records nothing.
func inMemoryStore() (*ledger.Store, error) {
	st, err := assemble.InMemory()
	if err != nil {
		return nil, exitError(ExitFailure, err)
	}
	return st, nil
}
