package assemble

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/notify"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// RunOptions are what a caller adds to a config to build a run of it.
type RunOptions struct {
	// Open opens the run's store, once every check that needs no store
	// has passed.
	Open Opener
	// Dir is the directory Open opens ("" for a store in memory): when
	// this build creates it and a config error then stops the build, it
	// is removed again, so a bad config leaves no empty store behind.
	Dir string
	// RunID is the run's id ("" makes a new one); Resume continues it from
	// its last completed iteration.
	RunID  string
	Resume bool
	// Hidden are more files the run's sandbox never shows (the signing
	// key the caller's store uses, when it names one); the store itself,
	// ralph's key and witness directories are always hidden.
	Hidden []string
	// StoreMoved says the caller moved the default store out of the
	// workdir for the sandbox (StorePlace): RunStarted says where it is.
	StoreMoved bool
	// OnDenied is told each refusal of the run's sandbox (sandbox.New).
	OnDenied func(sandbox.Denial)
	EngineOptions
}

// Run is a run built and ready to start: its engine, over the open store
// (which the caller closes), and the runner's options. A caller sets its
// own hooks on Options (Approve, Logger, OnIterationEnd, SubmittedBy)
// before NewRunner.
type Run struct {
	*Engine
	Options loop.RunnerOptions
	// Sandbox is the run's (nil: off), on Options and so on the run's
	// context (loop.Runner.Run): CloseSandbox closes it once the run has
	// ended.
	Sandbox *sandbox.Sandbox

	shared     bool   // the store is the caller's (EngineOptions.SharedStore)
	fresh      bool   // this build created the store directory
	dir        string // the store directory; "" in memory
	closeSbx   sync.Once
	closeSbxEr error
}

// NewRun builds a run of cfg, the one place `ralph run`, `ralph resume`
// and a fleet worker build one: stop conditions, paths, intent, provider,
// engine and orchestrator over the store, and the plan's admission. A
// store this call created is removed again when a config error stops it.
func NewRun(ctx context.Context, cfg *config.Config, o RunOptions) (*Run, error) {
	chk, err := Check(cfg, CheckOptions{})
	if err != nil {
		return nil, err
	}
	conds := chk.Conditions
	intent, err := Intent(cfg)
	if err != nil {
		return nil, err
	}
	// static and script providers need no engine: they are built (their
	// plan file or script read and checked) before the store is opened, so
	// a bad one leaves no store behind.
	var provider arbiter.Provider
	if cfg.Model.Provider == "static" || cfg.Model.Provider == "script" {
		if provider, err = NewProvider(cfg, nil); err != nil {
			return nil, err
		}
	}
	r := &Run{dir: o.Dir, shared: o.SharedStore}
	o.EngineOptions.Denials, o.OnDenied = denialSink(chk.Sandbox, o.OnDenied)
	if r.Sandbox, err = newSandbox(cfg, chk.Sandbox, o); err != nil {
		return nil, err
	}
	if o.Dir != "" && !o.SharedStore {
		_, statErr := os.Stat(o.Dir)
		r.fresh = errors.Is(statErr, fs.ErrNotExist)
	}
	if r.Engine, err = OpenEngine(cfg, o.Open, o.EngineOptions); err != nil {
		_ = r.CloseSandbox() // the error that stops the build is the one to report
		return nil, err
	}
	r.Options = loop.RunnerOptions{Config: cfg, Store: r.Store, Orchestrator: r.Orchestrator,
		Conditions: conds, Predicates: successPredicates(conds), Intent: intent, RunID: o.RunID, Resume: o.Resume,
		Sandbox: r.Sandbox, StoreMoved: o.StoreMoved}
	if sp, ok := provider.(arbiter.StaticProvider); ok { // read before the store opened; now admit it
		if err := CheckStaticPlan(cfg, r.Engine, sp.Source); err != nil {
			return nil, r.discard(err)
		}
	}
	if provider == nil {
		if provider, err = NewProvider(cfg, r.Engine); err != nil {
			return nil, r.discard(err)
		}
	}
	if ap, ok := provider.(loop.AgentPlanner); ok {
		if err := CheckAgentPlan(ctx, r.Engine, ap); err != nil {
			return nil, r.discard(err)
		}
	}
	r.Options.Provider = provider
	if r.Options.Follow, err = notifyFollower(cfg, r.Store); err != nil {
		return nil, r.discard(configError(err))
	}
	return r, nil
}

// NewRunner makes the runner of r.Options; an error is the config's.
func (r *Run) NewRunner() (*loop.Runner, error) {
	runner, err := loop.NewRunner(r.Options)
	if err != nil {
		return nil, configError(err)
	}
	return runner, nil
}

// Discard closes the run's store, first removing it when this build
// created it and nothing is recorded on it: for a run that a config error
// stops before it starts. A shared store (EngineOptions.SharedStore) is
// left open: only the run's sandbox is closed.
func (r *Run) Discard() {
	_ = r.CloseSandbox() // nothing ran in it; the build's own error is the one to report
	if r.shared {
		return // the caller's, open for its other runs
	}
	if r.fresh && r.Store.Head().Seq == 0 && r.Store.Close() == nil {
		// Best effort: what is left is an empty store, which the next run reuses.
		_ = os.RemoveAll(r.dir)
	}
	// Closed already when it was removed (Close is idempotent); a close
	// error would add nothing to the error that stops the run.
	_ = r.Store.Close()
}

// CloseSandbox closes the run's sandbox (its proxy, what it made for the
// run), once: the caller calls it when the run has ended; Discard does.
func (r *Run) CloseSandbox() error {
	r.closeSbx.Do(func() { r.closeSbxEr = r.Sandbox.Close() })
	return r.closeSbxEr
}

// denialSink is the sink that puts a sandbox's refusals on the calls in
// flight (nil when the sandbox is off), and the onDenied that feeds it
// and then also, if set, the caller's.
func denialSink(spec sandbox.Spec, also func(sandbox.Denial)) (*sandbox.Sink, func(sandbox.Denial)) {
	if spec.Mode == sandbox.Off {
		return nil, also
	}
	sink := sandbox.NewSink()
	return sink, func(d sandbox.Denial) {
		sink.Deny(d)
		if also != nil {
			also(d)
		}
	}
}

// newSandbox resolves the run's [sandbox] on this machine (sandbox.New)
// with its bounds (SandboxBounds): nil when it is off. A mode the machine
// cannot give is the config's error, in New's words.
func newSandbox(cfg *config.Config, spec sandbox.Spec, o RunOptions) (*sandbox.Sandbox, error) {
	if spec.Mode == sandbox.Off {
		return nil, nil
	}
	b, err := SandboxBounds(cfg, o.Dir, o.Hidden)
	if err != nil {
		return nil, configError(err)
	}
	s, err := sandbox.New(spec, b, o.OnDenied)
	if err != nil {
		return nil, configError(err)
	}
	return s, nil
}

// discard is Discard for a build that err stops, returning err.
func (r *Run) discard(err error) error {
	r.Discard()
	return err
}

// successPredicates are the predicates of the success-class conditions:
// the runner watches them after every action. Failure- and limit-class
// predicates are decided by the evaluator, once per iteration.
func successPredicates(conds []*stop.Condition) []loop.CompletionPredicate {
	var preds []loop.CompletionPredicate
	for _, c := range conds {
		if p := c.Predicate(); p != nil && c.Class == stop.ClassSuccess {
			preds = append(preds, loop.CompletionPredicate{Name: c.Name, Pred: p})
		}
	}
	return preds
}

// notifyFollower is the run's [[notify]] sinks as a loop.RunnerOptions
// Follow, or nil when the config has none. A sink's failure is logged
// (slog's default logger, which the live UI shows) and recorded on st as a
// NotifyFailed action.
func notifyFollower(cfg *config.Config, st *ledger.Store) (func(context.Context, <-chan loop.Event) <-chan struct{}, error) {
	if len(cfg.Notify) == 0 {
		return nil, nil
	}
	n, err := notify.New(notify.Options{Sinks: cfg.Notify, File: cfg.File, Workdir: cfg.Loop.Workdir,
		Record: func(ctx context.Context, a *ledger.Action) error {
			_, err := st.Append(ctx, a)
			return err
		}})
	if err != nil {
		return nil, err
	}
	return n.Follow, nil
}
