package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/tui"
)

// ExitForced is the status of a second Ctrl-C (or q) that did not wait for
// the aborted run to end (DESIGN §3).
const ExitForced = 130

// isTTY reports whether stream (a command's stdin or stdout) is a terminal.
func isTTY(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// runInteractive runs the loop under the live UI. Log records go to the
// UI's log view (l) instead of the terminal it draws on; when the user
// quits after the run ended, its summary is printed below the restored
// screen.
func runInteractive(cmd *cobra.Command, opts loop.RunnerOptions, approve bool) error {
	logs := tui.NewLogHandler(slog.LevelInfo, nil)
	opts.Logger = slog.New(logs)
	prev := slog.Default()
	slog.SetDefault(opts.Logger) // the store's and evaluator's logs too
	defer slog.SetDefault(prev)
	var approver *tui.Approver
	if approve {
		approver = tui.NewApprover()
		opts.Approve = approver.Approve
	}
	from := opts.Store.Head().Seq + 1
	if opts.Resume {
		from = 0 // a resumed run shows its history
	}
	runner, err := loop.NewRunner(opts)
	if err != nil {
		return exitError(ExitUsage, err)
	}
	var answer func(int, bool) error // attached UIs answer plans too
	live := tui.Local(runner, opts.Store, approver)
	if approver != nil {
		answer = live.Approve
	}
	srv, err := serveRun(runner, opts, answer, true, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := cmd.Context()
	var out *loop.Outcome
	var runErr error
	finished := make(chan struct{})
	done := tui.Start(func() error {
		defer close(finished)
		out, runErr = runner.Run(ctx)
		return runErr
	})
	uiErr := tui.Run(ctx, tui.Options{Run: live, Config: opts.Config, Done: done,
		Approver: approver, Logs: logs, FromSeq: from, Input: cmd.InOrStdin(), Output: cmd.OutOrStdout()})
	var panicErr *tui.PanicError
	switch {
	case errors.Is(uiErr, tui.ErrForceQuit):
		return exitError(ExitForced, errors.New("quit before the aborted run ended; `ralph resume "+runner.RunID()+"` continues it"))
	case errors.As(uiErr, &panicErr):
		return exitError(ExitFailure, fmt.Errorf("internal error in the UI: %v; please report it", panicErr.Value))
	case uiErr != nil && ctx.Err() != nil:
		// A signal ended the UI. The runner has the same context and is
		// aborting (compensations, then RunAborted): wait for it and report
		// the outcome, as a headless run does.
	case uiErr != nil:
		return exitError(ExitFailure, uiErr)
	}
	<-finished // the UI returns once the run has ended (or ctx ended it)
	return runResult(newPrinter(cmd.OutOrStdout(), false), out, runErr)
}
