package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/detach"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/tasks/batch"
)

type runFlags struct {
	noTUI, asJSON, approve, verbose bool
	brief                           bool // headless: only each iteration's brief line
	maxIterations                   int
	provider, model, store          string
	sandbox                         string // --sandbox MODE: overrides [sandbox] mode
	// detach starts the run in the background (run --detach); runID and
	// logToStore are how that background process is told its run id and
	// to write its output to the run's log file (hidden flags).
	detach, logToStore bool
	runID              string
	// tasks, parallel, target and closeIssues run a backlog (run --tasks).
	tasks, target string
	parallel      int
	closeIssues   bool
	remote        batch.Remote // submit --tasks: the tasks run on the fleet
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [CONFIG]",
		Short: "Run a Ralph loop until a stop condition fires",
		Long: `Run the loop described by CONFIG (default ./ralph.toml): each iteration asks the
provider for a plan, admits it through governance, executes it, records every
event on the causal chain, then evaluates the stop conditions.

When stdout is a terminal the live UI shows the run (p pause, s skip, a abort,
v history, ? help, q quit). Otherwise, or with --no-tui, the run is headless:
one line per event (and after each evaluation, the iteration in one line:
it 3/20 done 1m12s +$0.14 ($0.42, 4% of budget) · tests: FAIL TestAdd …),
then a summary, which for a run that ends without success says what still
fails; --brief prints only those iteration lines and the summary;
--json prints one JSON object per line.

Exit status: 0 a success-class stop, 1 a failure-class stop, 2 a bad config,
plan or provider setup, 3 a limit-class stop, 4 aborted by the user (first
Ctrl-C or q; compensations run). A second Ctrl-C ends the process at once (130).

With --tasks SOURCE (or [tasks] source) it runs a backlog, each task a run of the
loop in its own checkout, merged onto the target only when the success conditions
hold on the merged tree (docs/tasks.md): headless, a line per task event; exit 0
every task merged, 1 one failed or conflicted, 2 refused, 3 a limit stopped one.`,
		Example: `  ralph run
  ralph run examples/quickstart/ralph.toml --max-iterations 5
  ralph run --json | jq .action_type
  ralph run --tasks prd.json --parallel 2`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("run takes at most one CONFIG, got %d arguments", len(args))
			}
			if f.maxIterations < 0 {
				return usageErrorf("--max-iterations must be positive, got %d", f.maxIterations)
			}
			return checkSandboxFlag(f.sandbox)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := configArg(args)
			if err != nil {
				return err
			}
			if f.tasks != "" || (cfg.Tasks != nil && cfg.Tasks.Source != "") {
				if f.detach || f.approve {
					return usageErrorf("a backlog (--tasks, [tasks] source) runs in the foreground, without --detach or --approve")
				}
				return runBatch(cmd, cfg, f, "")
			}
			if f.detach {
				return startDetached(cmd, cfg, args, f)
			}
			limitRunMemory()
			return runLoop(cmd, cfg, f, "")
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.detach, "detach", false, "start in the background (its own session), print the run id and how to attach; output goes to <store>/logs/RUN_ID.log")
	fl.StringVar(&f.runID, "run-id", "", "the new run's `ID` (a UUID)")
	fl.BoolVar(&f.logToStore, "log-to-store", false, "write output to <store>/logs/RUN_ID.log once the store is open")
	_ = fl.MarkHidden("run-id")
	_ = fl.MarkHidden("log-to-store")
	fl.BoolVar(&f.noTUI, "no-tui", false, "run headless even when stdout is a terminal")
	fl.BoolVar(&f.asJSON, "json", false, "one JSON object per line on stdout")
	fl.BoolVar(&f.approve, "approve", false, "show each plan and ask y/n before running it (keys in the UI, stdin headless)")
	fl.BoolVar(&f.verbose, "verbose", false, "print every stop condition's result after each iteration")
	fl.BoolVar(&f.brief, "brief", false, "headless: print only one line per iteration (it 3/20 done 1m12s +$0.14 … · tests: FAIL TestAdd …) and the summary")
	fl.IntVar(&f.maxIterations, "max-iterations", 0, "stop (limit class) after `N` iterations")
	fl.StringVar(&f.provider, "provider", "", "override [model].provider")
	fl.StringVar(&f.model, "model", "", "override [model].model")
	fl.StringVar(&f.store, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	addSandboxFlag(fl, &f.sandbox)
	fl.StringVar(&f.tasks, "tasks", "", "run the backlog `SOURCE` (prd:FILE, checklist:FILE, github:OWNER/REPO?label=L, beads), each task a run of the loop in its own checkout")
	fl.IntVar(&f.parallel, "parallel", 0, "with --tasks: run up to `N` tasks at once (default [tasks] parallel, else 1)")
	fl.StringVar(&f.target, "target", "", "with --tasks: the `BRANCH` merged tasks land on (default [tasks] target, the prd's branchName, else ralph/<batch>/merged)")
	fl.BoolVar(&f.closeIssues, "close-issues", false, "with --tasks github:…: close each issue whose task merged")
	return cmd
}

// runLoop wires the runner for cfg and drives it, in the UI when stdout is
// a terminal, headless otherwise. resumeID, when set, continues that run.
func runLoop(cmd *cobra.Command, cfg *config.Config, f runFlags, resumeID string) (err error) {
	if f.brief && f.asJSON {
		return usageErrorf("--brief and --json both choose what is printed; use one of them")
	}
	interactive := !f.noTUI && !f.asJSON && !f.brief && isTTY(cmd.OutOrStdout())
	if f.approve && !interactive && !isTTY(cmd.InOrStdin()) {
		return usageErrorf("--approve asks y/n on standard input, which is not a terminal; run without --approve or from a terminal")
	}
	runID := resumeID
	if resumeID == "" {
		runID = f.runID // set by run --detach
	}
	if runID == "" {
		runID = loop.NewID()
	}
	rs, err := setupRun(cmd.Context(), cfg, runSetupOptions{Store: f.store, Provider: f.provider, Model: f.model,
		MaxIterations: f.maxIterations, RunID: runID, Resume: resumeID != "", Sandbox: f.sandbox, ErrOut: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	st := rs.Store
	defer func() { err = closeRunStore(st, runID, err, cmd.ErrOrStderr()); closeSandbox(rs, cmd.ErrOrStderr()) }()
	if interactive {
		return runInteractive(cmd, rs, f.approve)
	}
	if f.approve {
		rs.Options.Approve = loop.LineApprover(cmd.InOrStdin(), cmd.ErrOrStderr())
	}
	runner, err := rs.NewRunner()
	if err != nil {
		rs.Discard()
		return setupError(err)
	}
	opts := rs.Options
	srv, err := serveRun(runner, opts, nil, false, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := cmd.Context()
	logPath := detach.LogPath(absDir(st.Dir()), runner.RunID())
	switch {
	case f.logToStore: // the background process of run --detach
		if err := detach.RedirectOutput(logPath); err != nil {
			return exitError(ExitFailure, err)
		}
		srv.SetOutput(false, logPath)
	case cmd.OutOrStdout() == os.Stdout:
		// The terminal closing detaches the run: it goes on, writing to
		// its log file.
		defer detach.OnHangup(ctx, func() {
			if detach.RedirectOutput(logPath) == nil {
				srv.SetOutput(false, logPath)
			}
		})()
	}
	p := newRunPrinter(cmd.OutOrStdout(), f, opts)
	followCtx, stopFollowing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollowing()
	printed := p.follow(followCtx, runner.Events().Subscribe(followCtx, st.Head().Seq+1))
	out, err := runner.Run(ctx)
	if err != nil {
		stopFollowing() // no closing action will come
	}
	<-printed
	return runResult(p, out, err)
}

// serveRun serves the run's store on its socket, so every other ralph
// command reaches it while it runs; approve, when set, answers plan
// approvals from attached UIs. A store directory open to other users is
// refused (exit 2, with the fix); a socket that cannot be made otherwise
// leaves the run unserved, with a warning.
func serveRun(runner *loop.Runner, opts loop.RunnerOptions, approve func(int, bool) error, localUI bool, errOut io.Writer) (runServer, error) {
	srv, err := serve.Start(serve.Options{Store: opts.Store, Runner: runner, Approve: approve, LocalUI: localUI, Logger: opts.Logger,
		RefuseRunPeers: opts.Sandbox != nil})
	var pe *serve.PermissionError
	switch {
	case errors.As(err, &pe):
		return nil, exitError(ExitUsage, err)
	case err != nil:
		fmt.Fprintf(errOut, "ralph: other commands cannot reach this run while it goes on: %v\n", err)
		return noServer{}, nil
	}
	return srv, nil
}

// runServer is the server of a run's store (*serve.Server), or noServer.
type runServer interface {
	SetOutput(localUI bool, logFile string)
	Close() error
}

// noServer is the server of a run that could not be served.
type noServer struct{}

func (noServer) SetOutput(bool, string) {}
func (noServer) Close() error           { return nil }

// closeRunStore closes a run's store once the run has returned runErr, and
// returns what the command ends with: runErr, or, when the run ended but
// its store was then found lost, that (exit 1). A run whose store was lost
// leaves its record outside the store (serve/lost.go).
func closeRunStore(st *ledger.Store, runID string, runErr error, errOut io.Writer) error {
	cerr := st.Close()
	var lost *ledger.LostError
	switch {
	case errors.As(runErr, &lost):
		return serve.NoteLostRun(runID, runErr, errOut)
	case errors.As(cerr, &lost) && (runErr == nil || isSilentSuccess(runErr)):
		return exitError(ExitFailure, serve.NoteLostRun(runID, cerr, errOut))
	}
	return runErr // a close past its bound is Run's to report (reportStuck)
}

// isSilentSuccess reports whether err only carries a run's exit status
// (its summary is printed), so a store that then fails to close says so.
func isSilentSuccess(err error) bool { return errors.As(err, &silentError{}) }

// runResult reports how runner.Run returned: the error the run could not go
// on with, or the summary of the run that ended and its exit status.
func runResult(p *printer, out *loop.Outcome, err error) error {
	switch {
	case errors.Is(err, loop.ErrCannotResume):
		return exitError(ExitUsage, err)
	case err != nil:
		return exitError(ExitFailure, err)
	}
	if err := p.summary(out); err != nil {
		return err
	}
	if out.ExitCode != 0 {
		return exitError(out.ExitCode, silentError{})
	}
	return nil
}
