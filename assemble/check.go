package assemble

import (
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/notify"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// Check is the one config check (DESIGN §21): NewRun (ralph run, resume
// and a fleet worker's jobs), ralph submit and ralph replay call it, so a
// config is refused the same way, with the same file:line sentence,
// wherever it is used. It checks each [[notify]] table against its sink's
// row (notify.Check, which fills in the sinks' defaults), builds the stop
// conditions (each [[stop]] table checked by its kind's row,
// stop.FromConfig), checks the intent's params and [sandbox]'s mode and
// network (SandboxSpec),
// and checks every path the config names (config.PathKeys, listed once)
// through o.Paths. What needs the store or the engine (the plan's
// admission, an agent budget that cannot fire) is checked after it, by
// NewRun and by CheckJob (ralph submit).
func Check(cfg *config.Config, o CheckOptions) (*Checked, error) {
	if err := notify.Check(cfg.Notify, cfg.FileName()); err != nil {
		return nil, configError(err)
	}
	conds, err := stop.FromConfig(cfg.Stop, cfg.File)
	if err != nil {
		// The sentence names the file as the user named it; the
		// conditions keep its full path for the errors of a run.
		if ce, ok := err.(*config.Error); ok && ce.File == cfg.File {
			ce.File = cfg.FileName()
		}
		return nil, configError(err)
	}
	if _, err := IntentParams(cfg); err != nil {
		return nil, err
	}
	spec, err := SandboxSpec(cfg)
	if err != nil {
		return nil, configError(err)
	}
	paths := o.Paths
	if paths == nil {
		paths = func([]config.PathKey) error { return cfg.CheckPaths() }
	}
	if err := paths(cfg.PathKeys()); err != nil {
		return nil, configError(err)
	}
	return &Checked{Conditions: conds, Sandbox: spec}, nil
}

// CheckOptions tune Check.
type CheckOptions struct {
	// Paths checks the config's paths; nil checks them on this machine
	// (config.CheckPaths). ralph submit checks them in the run's
	// workspace, and ralph replay, which reads only [[stop]], skips them
	// (NoPaths).
	Paths func(keys []config.PathKey) error
}

// NoPaths is a CheckOptions.Paths that checks nothing.
func NoPaths([]config.PathKey) error { return nil }

// Checked is what Check built of a config.
type Checked struct {
	Conditions []*stop.Condition
	Sandbox    sandbox.Spec // [sandbox] (after --sandbox); mode off without one
}
