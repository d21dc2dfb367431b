// Package tui is ralph's terminal UI: a Bubble Tea program that shows a
// loop live — what it is doing (the causal chain as a tree), why (the plan
// and its generation diagnostics), how close each stop condition is to
// firing, and what went wrong — and the same views read-only for a
// recorded run (ralph view).
//
// Wiring a live run (ralph run and ralph resume):
//
//	logs := tui.NewLogHandler(slog.LevelInfo, nil)
//	approver := tui.NewApprover()                 // approve mode only
//	run, _ := assemble.NewRun(ctx, cfg, assemble.RunOptions{…}) // the one place a run is built
//	run.Options.Logger = slog.New(logs)
//	run.Options.Approve = approver.Approve        // approve mode only
//	runner, _ := run.NewRunner()
//	store := run.Store
//	from := store.Head().Seq + 1                  // 0 for a resumed run
//	var out *loop.Outcome
//	done := tui.Start(func() (err error) { out, err = runner.Run(ctx); return err })
//	err := tui.Run(ctx, tui.Options{Run: tui.Local(runner, store, approver), Config: cfg,
//		Done: done, Approver: approver, Logs: logs, FromSeq: from})
//	// err == nil: the run ended and the user pressed q; out is set.
//	// errors.Is(err, tui.ErrForceQuit): q twice; exit 130 without waiting.
//	// errors.Is(err, tui.ErrDetached): q then d; the run goes on.
//	// *tui.PanicError: a goroutine panicked; the terminal is restored.
//
// A recorded run: tui.View(ctx, store, runID, tui.Options{}). A run another
// process owns (ralph attach): tui.Run with a Run from serve.Client and
// Attached set. A batch run's id (DESIGN §23) given to View opens the batch
// view: a row per task, enter opens a task's run; with Options.GoesOn the
// batch is followed as it records (the store's Subscribe, or the socket's
// event stream of the process that holds it).
//
// Invariants:
//   - One root model (model) owns routing, focus and layout; panes are
//     plain structs drawn with Render(width, height).
//   - Modal input is a stack of modes (modes.go): a key goes to the top
//     mode (a full-screen view, a question, the filter's input, a plan
//     awaiting y/n), down the stack while no mode takes it, and to the
//     panes when none does. What is open is what is on the stack.
//   - Update does no I/O: store reads (detail, history, verification) and
//     calls into the runner (pause, abort, skip, approve) are tea.Cmds.
//   - Events reach the program through one forwarder goroutine calling
//     Program.Send, in batches of what is ready; nothing calls Send from
//     inside Update.
//   - A batch is held as a few fields per task and run (batch.go), taken
//     from the batch's actions and its task runs' as they arrive; its end,
//     which is not an action, from its record. A task's run opened from it
//     is a model of its own, read from the store when opened.
//   - The chain is held as compact rows (no decoded actions): memory grows
//     by ~60 bytes per shown action; a frame draws only the rows in view,
//     each kept by the one row-cache rule (rowCache: a finished row is
//     drawn once per width, an unfinished one again when its version
//     changes), so its cost does not grow with the chain.
//   - The terminal title says the highest seq drawn and whether anything
//     is pending (title.go): idle at seq N means every event up to N is
//     applied and its frame written; a title is set once it held 50 ms.
//   - Text is measured and cut with x/ansi, in cells, never in bytes.
//   - NO_COLOR (or a non-terminal output) selects the ASCII profile: every
//     meaning is carried by a marker or a word as well as by colour.
//   - The terminal is restored however the UI ends: a panic in Update or a
//     command is recovered by Bubble Tea, one in the UI's goroutines (or in
//     the function Start runs) kills the program and is returned as a
//     *PanicError.
package tui
