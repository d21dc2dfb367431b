package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/internal/detach"
	"github.com/ralphloop/ralph/ledger"
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
func runInteractive(cmd *cobra.Command, rs *assemble.Run, approve bool) error {
	opts := &rs.Options
	// Log records go to the UI; once it has detached, to stderr, which is
	// then the run's log file.
	afterUI := &detach.SwitchWriter{}
	logs := tui.NewLogHandler(slog.LevelInfo, slog.NewTextHandler(afterUI, nil))
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
	runner, err := rs.NewRunner()
	if err != nil {
		return setupError(err)
	}
	var answer func(int, bool) error // attached UIs answer plans too
	live := tui.Local(runner, opts.Store, approver)
	if approver != nil {
		answer = live.Approve
	}
	srv, err := serveRun(runner, *opts, answer, true, cmd.ErrOrStderr())
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
	// The terminal closing (SIGHUP) detaches: the UI ends, the run goes on.
	uiCtx, hungUp := context.WithCancelCause(ctx)
	defer detach.OnHangup(ctx, func() { hungUp(errHangup) })()
	uiErr := tui.Run(uiCtx, tui.Options{Run: live, Config: opts.Config, Done: done,
		Approver: approver, Logs: logs, FromSeq: from, Input: cmd.InOrStdin(), Output: cmd.OutOrStdout()})
	var panicErr *tui.PanicError
	switch {
	case errors.Is(uiErr, tui.ErrDetached) || (ctx.Err() == nil && errors.Is(context.Cause(uiCtx), errHangup)):
		return goOnDetached(cmd, runner, opts.Store, srv, afterUI, finished, func() (*loop.Outcome, error) { return out, runErr },
			!errors.Is(uiErr, tui.ErrDetached))
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

// errHangup is why a foreground UI ended when its terminal closed.
var errHangup = errors.New("the terminal closed")

// goOnDetached is a foreground run after its UI detached (q then d, or the
// terminal closing): the run goes on in this process, its output — the
// headless printer's lines, log records, the summary — in its log file.
func goOnDetached(cmd *cobra.Command, runner *loop.Runner, store *ledger.Store, srv runServer, logs *detach.SwitchWriter, finished <-chan struct{},
	result func() (*loop.Outcome, error), hungUp bool) error {
	id := runner.RunID()
	logPath := detach.LogPath(absDir(store.Dir()), id)
	defer detach.KeepInterrupt(cmd.Context(), id)()
	if !hungUp {
		fmt.Fprintf(cmd.OutOrStdout(), "detached: run %s goes on in this process (pid %d), its output in %s\n"+
			"`ralph attach %s` reopens the UI; ctrl+c no longer stops it: press ctrl+z then run `bg` (or close this terminal) to get the prompt back\n",
			id, os.Getpid(), logPath, id)
	}
	if cmd.OutOrStdout() == os.Stdout {
		if err := detach.RedirectOutput(logPath); err != nil {
			return exitError(ExitFailure, err)
		}
	}
	srv.SetOutput(false, logPath)
	logs.Set(os.Stderr)
	p := newPrinter(os.Stdout, false)
	followCtx, stopFollowing := context.WithCancel(context.Background())
	defer stopFollowing()
	from := store.Head().Seq + 1
	events, caughtUp := loop.TrackSeq(followCtx, from-1, runner.Events().Subscribe(followCtx, from))
	printed := p.follow(followCtx, events)
	<-finished
	if hungUp {
		// Its terminal is gone: once its run has ended, nothing may keep it.
		armWatchdog("the hangup signal (the run has ended)", os.Stderr)
	}
	out, runErr := result()
	// The printer ends by itself at the run's closing action, but it may
	// have started after that (the terminal closed once the run had ended),
	// or the run may have ended without one: once it has printed the chain
	// up to the head the run left, it stops. A run that failed stops it at
	// once, as the chain may not be readable.
	if runErr == nil {
		select {
		case <-printed:
		case <-caughtUp(store.Head().Seq):
		}
	}
	stopFollowing()
	<-printed
	return runResult(p, out, runErr)
}
