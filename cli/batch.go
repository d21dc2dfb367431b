package cli

import (
	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/tasks/batch"
)

// runBatch runs the backlog of cfg's [tasks] or --tasks (DESIGN §23), or,
// when resume names one, continues that batch: headless, one line per
// task event and a summary (tasks/batch does the work and the printing).
func runBatch(cmd *cobra.Command, cfg *config.Config, f runFlags, resume string) error {
	if resume == "" {
		applyRunFlags(cfg, runSetupOptions{Provider: f.provider, Model: f.model, MaxIterations: f.maxIterations, Sandbox: f.sandbox})
	}
	dir, moved, err := assemble.StorePlace(cfg, storeDir(f.store, cfg), f.store != "")
	if err != nil {
		return setupError(err)
	}
	st, err := openStore(ledger.Options{Dir: dir, SyncWrites: *cfg.Store.SyncWrites}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	p := batch.NewPrinter(cmd.OutOrStdout(), f.asJSON)
	b, err := batch.Prepare(cmd.Context(), batch.Setup{Config: cfg, Source: f.tasks, Parallel: f.parallel, Target: f.target,
		CloseIssues: f.closeIssues, Store: st, StoreDir: dir, Hidden: []string{ralphKeyFile()}, StoreMoved: moved, Resume: resume, OnEvent: p.Event, Remote: f.remote})
	if err != nil {
		return closeRunStore(st, resume, batchError(err), cmd.ErrOrStderr())
	}
	stopServing := serve.Hold(st, b.ID(), assemble.Sandboxed(cfg), cmd.ErrOrStderr()) // readers reach the store while the batch runs
	run := b.Run
	if resume != "" {
		run = b.Resume
	}
	s, err := run(cmd.Context())
	if err == nil {
		p.Summary(s)
		if s.ExitCode != 0 {
			err = exitError(s.ExitCode, silentError{})
		}
	}
	stopServing()
	return closeRunStore(st, b.ID(), batchError(err), cmd.ErrOrStderr())
}

// batchError is a batch's error as the command's: a refusal is exit 2.
func batchError(err error) error {
	if batch.IsRefused(err) {
		return exitError(ExitUsage, err)
	}
	return err
}
