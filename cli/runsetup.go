package cli

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// runSetupOptions are what a command adds to a config to make a run of it.
type runSetupOptions struct {
	Store           string // --store; "" follows RALPH_STORE, then store.dir
	Provider, Model string // --provider, --model overrides ("" keeps the config's)
	MaxIterations   int    // --max-iterations (0: none added)
	RunID           string // the run's id; "" makes a new one
	Resume          bool   // continue RunID from its last completed iteration
	ErrOut          io.Writer
}

// runSetup is a run wired and ready to start: the runner's options over an
// open store (Opts.Store, which the caller closes).
type runSetup struct {
	Opts  loop.RunnerOptions
	fresh bool   // this setup created the store directory
	dir   string // the store directory
}

// setupRun wires a run of cfg, the one place `ralph run`, `ralph resume`
// and a fleet worker build one: config overrides, stop conditions, paths,
// intent, provider, engine and orchestrator over the store, and the plan's
// admission. Every error is the command's (a usage error names the
// config's file:line); a store this call created is removed again when a
// usage error stops it, so a bad config leaves nothing behind.
func setupRun(ctx context.Context, cfg *config.Config, o runSetupOptions) (*runSetup, error) {
	if o.Provider != "" {
		cfg.Model.Provider = o.Provider
	}
	if o.Model != "" {
		cfg.Model.Model = o.Model
	}
	if o.MaxIterations > 0 { // part of the config, so the run's snapshot (and resume) keeps it
		cfg.Stop = append(cfg.Stop, config.Stop{Name: "--max-iterations", Kind: config.KindMaxIterations, Max: o.MaxIterations})
	}
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		return nil, exitError(ExitUsage, err)
	}
	var preds []loop.CompletionPredicate
	for _, c := range conds {
		// Failure- and limit-class predicates are decided by the evaluator;
		// success-class ones are also watched after every action.
		if p := c.Predicate(); p != nil && c.Class == stop.ClassSuccess {
			preds = append(preds, loop.CompletionPredicate{Name: c.Name, Pred: p})
		}
	}
	if err := cfg.CheckPaths(); err != nil {
		return nil, exitError(ExitUsage, err)
	}
	intent, err := intentOf(cfg)
	if err != nil {
		return nil, exitError(ExitUsage, err)
	}
	// static and script providers need no engine: they are built (their
	// plan file or script read and checked) before the store is opened, so
	// a bad one leaves no store behind.
	var provider arbiter.Provider
	if cfg.Model.Provider == "static" || cfg.Model.Provider == "script" {
		if provider, err = newProvider(cfg, nil); err != nil {
			return nil, exitError(ExitUsage, err)
		}
	}
	rs := &runSetup{dir: storeDir(o.Store, cfg)}
	_, statErr := os.Stat(rs.dir)
	rs.fresh = errors.Is(statErr, fs.ErrNotExist)
	eng, err := openEngine(cfg, o.Store, o.ErrOut)
	if err != nil {
		return nil, err
	}
	rs.Opts = loop.RunnerOptions{Config: cfg, Store: eng.store, Orchestrator: eng.orch,
		Conditions: conds, Predicates: preds, Intent: intent, RunID: o.RunID, Resume: o.Resume}
	if sp, ok := provider.(arbiter.StaticProvider); ok { // read before the store opened; now admit it
		if err := checkStaticPlan(cfg, eng, sp.Source); err != nil {
			return nil, rs.discardClosed(exitError(ExitUsage, err))
		}
	}
	if provider == nil {
		if provider, err = newProvider(cfg, eng); err != nil {
			return nil, rs.discardClosed(exitError(ExitUsage, err))
		}
	}
	if ap, ok := provider.(loop.AgentPlanner); ok {
		if err := checkAgentPlan(ctx, eng, ap); err != nil {
			return nil, rs.discardClosed(exitError(ExitUsage, err))
		}
	}
	rs.Opts.Provider = provider
	if rs.Opts.Follow, err = notifyFollower(cfg, eng.store); err != nil {
		return nil, rs.discardClosed(exitError(ExitUsage, err))
	}
	return rs, nil
}

// discard returns err, first removing the store when this setup created
// it and err is a usage error (see discardFresh).
func (rs *runSetup) discard(err error) error {
	return discardFresh(rs.fresh, rs.dir, rs.Opts.Store, err)
}

// discardClosed is discard for a setup that fails before it is returned:
// the store is closed whether or not it is removed.
func (rs *runSetup) discardClosed(err error) error {
	err = rs.discard(err)
	// Closed already when discard removed it (Close is idempotent); a close
	// error would add nothing to err, the reason the command stops.
	_ = rs.Opts.Store.Close()
	return err
}
