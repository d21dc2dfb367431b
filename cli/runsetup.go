package cli

import (
	"context"
	"errors"
	"io"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/stop"
)

// runSetupOptions are what a command adds to a config to make a run of it.
type runSetupOptions struct {
	Store           string // --store; "" follows RALPH_STORE, then store.dir
	Provider, Model string // --provider, --model overrides ("" keeps the config's)
	MaxIterations   int    // --max-iterations (0: none added)
	RunID           string // the run's id; "" makes a new one
	Resume          bool   // continue RunID from its last completed iteration
	Sandbox         string // --sandbox (checked): overrides [sandbox] mode
	ErrOut          io.Writer
}

// setupRun applies a command's flags to cfg and builds the run of it
// (assemble.NewRun) over the store the flags name, for `ralph run`,
// `ralph resume` and a fleet worker. Every error is the command's (a
// usage error names the config's file:line); a store this call created is
// removed again when a usage error stops it, so a bad config leaves
// nothing behind.
func setupRun(ctx context.Context, cfg *config.Config, o runSetupOptions) (*assemble.Run, error) {
	applyRunFlags(cfg, o)
	dir, moved, err := assemble.StorePlace(cfg, storeDir(o.Store, cfg), o.Store != "")
	if err != nil {
		return nil, setupError(err)
	}
	rs, err := assemble.NewRun(ctx, cfg, assemble.RunOptions{Open: storeOpener(cfg, dir, o.ErrOut),
		Dir: dir, RunID: o.RunID, Resume: o.Resume, Hidden: []string{ralphKeyFile()}, StoreMoved: moved})
	if err != nil {
		return nil, setupError(err)
	}
	return rs, nil
}

// applyRunFlags puts a command's flags into cfg, so the run's snapshot
// (and its resume) keeps them.
func applyRunFlags(cfg *config.Config, o runSetupOptions) {
	if o.Provider != "" {
		cfg.Model.Provider = o.Provider
	}
	if o.Model != "" {
		cfg.Model.Model = o.Model
	}
	if o.Sandbox != "" {
		cfg.SetSandboxMode(o.Sandbox)
	}
	if o.MaxIterations > 0 {
		cfg.Stop = append(cfg.Stop, config.Stop{Name: "--max-iterations", Kind: stop.KindMaxIterations, Max: o.MaxIterations})
	}
}

// storeOpener opens the store at dir (where --store, RALPH_STORE or
// store.dir put it, assemble.StorePlace), once assemble has checked what
// needs no store.
func storeOpener(cfg *config.Config, dir string, errOut io.Writer) assemble.Opener {
	return func() (*ledger.Store, error) {
		return openStore(ledger.Options{Dir: dir, SyncWrites: *cfg.Store.SyncWrites}, errOut)
	}
}

// setupError is an error of assemble as the command's: the config's fault
// is a usage error (exit 2); any other error (a store that did not open,
// already the command's) is returned as it came.
func setupError(err error) error {
	var ce *assemble.ConfigError
	if errors.As(err, &ce) {
		return exitError(ExitUsage, ce.Err)
	}
	return err
}
