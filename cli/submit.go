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
	"github.com/ralphloop/ralph/tasks/fleetrun"
)

func newSubmitCmd() *cobra.Command {
	var natsFlag, workspace string
	var f runFlags
	cmd := &cobra.Command{
		Use:   "submit CONFIG [--nats URL] [--workspace GIT_URL[@REF]] [--tasks SOURCE [--target B] [--parallel N]]",
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

--tasks SOURCE runs a backlog as 'ralph run --tasks' does, each task's run a
job that starts from the task's work sent to --workspace (default: this
repository, by path); this process merges green tasks onto --target through
its merge queue and exits with the batch's status (docs/tasks.md).

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
			if f.tasks != "" {
				return runSubmitTasks(cmd, args[0], workspace, natsURL(natsFlag), f)
			}
			return runSubmit(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], workspace, natsURL(natsFlag))
		},
	}
	cmd.Flags().StringVar(&natsFlag, "nats", "", "NATS `URL` of the fleet, comma-separated for a cluster (default RALPH_NATS, then "+defaultNATS+")")
	addNATSAuthFlags(cmd)
	cmd.Flags().StringVar(&workspace, "workspace", "", "the run's git repository `GIT_URL[@REF]`: each run gets a fresh clone on branch ralph/RUN_ID (default: an empty directory)")
	cmd.Flags().StringVar(&f.tasks, "tasks", "", "run the backlog `SOURCE` (prd:FILE, checklist:FILE, github:OWNER/REPO?label=L, beads) on the fleet, each task's run a job")
	cmd.Flags().StringVar(&f.target, "target", "", "with --tasks: the `BRANCH` merged tasks land on")
	cmd.Flags().IntVar(&f.parallel, "parallel", 0, "with --tasks: the task runs queued at once (`N`)")
	return cmd
}

// loadSubmitted is the config at cfgPath and its text, which carries no
// credential (config errors name file:line:col, as ralph run's do).
func loadSubmitted(cfgPath string) (*config.Config, []byte, error) {
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		return nil, nil, exitError(ExitUsage, err)
	}
	data, err := os.ReadFile(cfgPath)
	if err == nil {
		err = cfg.RefuseCredential(string(data))
	}
	if err != nil {
		return nil, nil, exitError(ExitUsage, err)
	}
	return cfg, data, nil
}

// runSubmitTasks runs the backlog of --tasks as `ralph run --tasks` does,
// each run of a task a fleet job (tasks/fleetrun).
func runSubmitTasks(cmd *cobra.Command, cfgPath, workspace, natsAt string, f runFlags) error {
	cfg, data, err := loadSubmitted(cfgPath)
	if err != nil {
		return err
	}
	nc, h, err := openFleet(cmd.Context(), natsAt, "ralph submit")
	if err != nil {
		return err
	}
	defer nc.Close()
	signer, err := fleetSigner(cmd.Context())
	if err != nil {
		return err
	}
	o, err := fleetrun.ForConfig(fleetrun.Options{NC: nc, Signer: signer, Runs: h.Runs, Workspace: workspace}, cfg, string(data))
	if err != nil {
		return exitError(ExitUsage, err)
	}
	f.remote = fleetrun.New(o)
	return runBatch(cmd, cfg, f, "")
}

func runSubmit(ctx context.Context, out, errOut io.Writer, cfgPath, workspace, natsAt string) error {
	cfg, data, err := loadSubmitted(cfgPath)
	if err != nil {
		return err
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
	creds := signInFrom(ctx).CredsFile()
	if creds == os.Getenv("RALPH_NATS_CREDS") {
		creds = "" // the commands find it in the environment too
	}
	fmt.Fprintln(errOut, job.QueuedNote(natsAt, creds)) // best effort: the run id, what matters, is on stdout already
	return nil
}

// inMemoryStore is the store of an engine that records nothing.
func inMemoryStore() (*ledger.Store, error) {
	st, err := assemble.InMemory()
	if err != nil {
		return nil, exitError(ExitFailure, err)
	}
	return st, nil
}
