package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/detach"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

func newWorkerCmd() *cobra.Command {
	var natsFlag, dir, id, policy, sandboxMode string
	var slots int
	var ackWait time.Duration
	var verbose bool
	cmd := &cobra.Command{
		Use:   "worker [--nats URL] [--slots N] [--dir D]",
		Short: "Run queued loops from a fleet, up to --slots at once",
		Long: `Take jobs that 'ralph submit' queued and run them, up to --slots at once. Each
run gets its own directory under --dir: a fresh clone of its workspace on
branch ralph/RUN_ID (one commit pushed per iteration) and its own store,
whose chain is replicated to the fleet as it is written; the directory is
removed once the run has ended or gone back to the queue, as everything in it
is then in the fleet. A run that another worker lost (it died) continues here
from its last completed iteration.

The first Ctrl-C or SIGTERM pauses every run after its current call, hands
it back to the queue for another worker and exits 0; a second one ends the
process at once (its runs continue elsewhere after the ack wait).

--policy names this worker's own ceiling, a TOML file with a [governance]
table (allow, deny, shell_allow, agent_allow, max_cost_usd, max_iterations,
max_steps, workspaces, hosts, env_allow): every job's governance, program,
endpoint and worker variable is held to it, and a job that needs more is
refused before anything of it runs, failed with the reason in its state.
Without --policy a worker runs no shell.exec, no program and no agent.

--sandbox MODE confines every job's processes (auto, landlock, bwrap or
off, over the job's [sandbox] mode); a policy's governance.sandbox requires a
mode: a job asking for off, or for no sandbox, is refused.

--nats defaults to RALPH_NATS, then nats://127.0.0.1:4222 ('ralph fleet serve').
Exit status: 0 stopped by a signal, 2 bad flags, a bad --policy file or no NATS server answers,
1 the connection to NATS was lost.`,
		Example: `  ralph worker
  ralph worker --nats nats://10.0.0.5:4222 --slots 4 --dir /var/lib/ralph/worker
  ralph worker --policy /etc/ralph/worker.toml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("worker takes no arguments; it runs what `ralph submit` queued")
			}
			if slots < 1 {
				return usageErrorf("--slots must be at least 1, got %d", slots)
			}
			if ackWait < 3*time.Second {
				return usageErrorf("--ack-wait must be at least 3s (heartbeats go every third of it), got %s", ackWait)
			}
			return checkSandboxFlag(sandboxMode)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			pol, err := loadWorkerPolicy(policy)
			if err != nil {
				return err
			}
			return runWorker(cmd, natsURL(natsFlag), workerOptions{dir: dir, id: id, slots: slots, ackWait: ackWait, verbose: verbose, policy: pol,
				sandbox: sandboxMode})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&natsFlag, "nats", "", "NATS `URL` of the fleet, comma-separated for a cluster (default RALPH_NATS, then nats://127.0.0.1:4222)")
	addNATSAuthFlags(cmd)
	fl.IntVar(&slots, "slots", 1, "run up to `N` loops at once")
	fl.StringVar(&dir, "dir", ".ralph-worker", "`DIR` for the runs' workspaces and stores")
	fl.DurationVar(&ackWait, "ack-wait", fleet.DefaultConfig().AckWait, "how long this worker may go silent before its runs go to another worker")
	fl.StringVar(&id, "id", "", "this worker's `ID` in the fleet (default HOST-PID)")
	fl.BoolVar(&verbose, "verbose", false, "also write debug log records (stderr)")
	fl.StringVar(&policy, "policy", "", "this worker's policy `FILE`, a [governance] ceiling for every job (default: no shell.exec, no program, no agent)")
	addSandboxFlag(fl, &sandboxMode)
	return cmd
}

// loadWorkerPolicy reads and checks --policy (nil: the default policy);
// a bad file is a usage error.
func loadWorkerPolicy(file string) (*config.WorkerPolicy, error) {
	if file == "" {
		return nil, nil
	}
	p, err := config.LoadPolicy(file)
	if err == nil {
		err = fleet.CheckPolicy(p)
	}
	if err != nil {
		return nil, exitError(ExitUsage, err)
	}
	return p, nil
}

type workerOptions struct {
	dir, id string
	slots   int
	ackWait time.Duration
	verbose bool
	policy  *config.WorkerPolicy // nil: the default policy
	sandbox string               // --sandbox: every job's [sandbox] mode
}

func runWorker(cmd *cobra.Command, url string, o workerOptions) error {
	ctx := cmd.Context()
	detach.OwnEnd(ctx) // its hand-back grace, not the watchdog's 5 s
	defer forceStopOnSecondSignal()()
	nc, h, err := openFleet(ctx, url, "ralph worker")
	if err != nil {
		return err
	}
	defer nc.Close()
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return exitError(ExitUsage, fmt.Errorf("--dir %s: %w", o.dir, err))
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	if o.id == "" {
		host, _ := os.Hostname() // no host name: the pid alone names the worker
		o.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	msg := fmt.Sprintf("worker %s takes runs from %s, %d at a time, in %s, under %s; Ctrl-C hands them back and stops\n", o.id, url, o.slots, dir, o.policy.Name())
	if err := writeOut(cmd.OutOrStdout(), msg); err != nil {
		return err
	}
	signer, err := fleetSigner(ctx)
	if err != nil {
		return err
	}
	err = fleet.RunWorker(ctx, fleet.WorkerOptions{NC: nc, Signer: signer, Handles: h, ID: o.id, Slots: o.slots, Dir: dir, AckWait: o.ackWait,
		Start: startFleetRun(cmd.ErrOrStderr(), o.sandbox), Policy: o.policy, Logger: log})
	if err != nil {
		return exitError(ExitFailure, fmt.Errorf("worker %s stopped: %w; start it again once NATS at %s answers", o.id, err, url))
	}
	return nil
}

// forceStopOnSecondSignal makes the second Ctrl-C or SIGTERM (the first
// cancels ctx: the runs are handed back) kill every process the worker's
// runs have running — shell.exec commands, agent calls, command stop
// conditions, whatever they started in new sessions — and then end the
// process at once, with the status a death by that signal has. It returns
// the function that undoes it.
func forceStopOnSecondSignal() (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 0; ; {
			select {
			case s := <-sigs:
				if n++; n == 2 {
					procgroup.KillAll()
					os.Exit(128 + int(s.(syscall.Signal)))
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// startFleetRun builds the run a fleet job describes with the wiring of
// `ralph run` (setupRun, assemble.NewRun): the job's config is read as the file
// spec.Job.ConfigPath in its workspace, so the paths it names are files
// there, and the run's store is spec.StoreDir, signed with this machine's
// key like any store. sandboxMode (--sandbox), when set, is every job's
// [sandbox] mode, before the policy holds the job to its own.
func startFleetRun(errOut io.Writer, sandboxMode string) func(ctx context.Context, spec fleet.RunSpec) (fleet.RunHandle, error) {
	return func(ctx context.Context, spec fleet.RunSpec) (fleet.RunHandle, error) {
		rel := spec.Job.ConfigPath
		if rel == "" {
			rel = fleet.DefaultConfigPath
		}
		cfg, err := config.Parse([]byte(spec.Job.Config), filepath.Join(spec.Workdir, rel), nil)
		if err != nil {
			return nil, &fleet.BadJobError{Err: err}
		}
		if sandboxMode != "" {
			cfg.SetSandboxMode(sandboxMode)
		}
		if err := fleet.ApplyPolicy(spec.Policy, cfg, spec.Job.Workspace); err != nil {
			return nil, &fleet.BadJobError{Err: err}
		}
		batch, err := spec.ApplyTask(cfg)
		if err != nil {
			return nil, err
		}
		if cfg.Agent != nil {
			if _, err := assemble.AgentCLI(cfg); err != nil {
				return nil, &fleet.MissingAgentError{CLI: cfg.Agent.CLI, Err: err}
			}
		}
		cfg.Store.Dir = spec.StoreDir
		rs, err := setupRun(ctx, cfg, runSetupOptions{Store: spec.StoreDir, RunID: spec.Job.RunID, Resume: spec.Resume, ErrOut: errOut})
		if err != nil {
			return nil, jobError(err)
		}
		rs.Options.OnIterationEnd, rs.Options.Logger, rs.Options.SubmittedBy, rs.Options.Batch = spec.OnIterationEnd, spec.Logger, spec.Job.SubmittedBy, batch
		runner, err := rs.NewRunner()
		if err != nil {
			rs.Discard()
			return nil, jobError(setupError(err))
		}
		return &fleetRun{Runner: runner, st: rs.Store, rs: rs}, nil
	}
}

// jobError marks a usage error (a bad config or plan) as the job's own.
func jobError(err error) error {
	var ce *cliError
	if errors.As(err, &ce) && ce.code == ExitUsage {
		return &fleet.BadJobError{Err: err}
	}
	return err
}

// fleetRun is a run a worker drives: the runner and the store it owns.
type fleetRun struct {
	*loop.Runner
	st *ledger.Store
	rs *assemble.Run // its sandbox closes with it
}

func (r *fleetRun) Store() *ledger.Store { return r.st }
func (r *fleetRun) Close() error         { return errors.Join(r.st.Close(), r.rs.CloseSandbox()) }
