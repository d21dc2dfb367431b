package assemble

import (
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/sandbox"
)

// ExecSandbox is the sandbox of a plan run once (`ralph exec`), the same
// as a loop's (NewRun): nil when cfg's [sandbox] is off, else the sandbox
// to put on the plan's context (sandbox.With) and the engine options
// whose sink records its refusals on the calls. dir is the store's
// directory, which it never shows; hidden are more files it never shows.
// The caller closes the sandbox once the plan has ended.
func ExecSandbox(cfg *config.Config, dir string, hidden []string) (*sandbox.Sandbox, EngineOptions, error) {
	spec, err := SandboxSpec(cfg)
	if err != nil {
		return nil, EngineOptions{}, configError(err)
	}
	var o RunOptions
	o.Dir, o.Hidden = dir, hidden
	o.Denials, o.OnDenied = denialSink(spec, nil)
	s, err := newSandbox(cfg, spec, o)
	return s, o.EngineOptions, err
}
