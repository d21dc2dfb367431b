package assemble

import (
	"fmt"
	"os"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// NewProvider builds the plan provider [model].provider names, over the
// engine's capability registry and governance kernel. Model-backed
// providers (openai, command) run the arbiter pipeline over the engine's
// model. Static and script providers need no engine (eng may be nil): a
// static plan is then read but not yet admitted.
func NewProvider(cfg *config.Config, eng *Engine) (arbiter.Provider, error) {
	switch cfg.Model.Provider {
	case "static":
		src := cfg.Plan.RTFS
		if cfg.Plan.File != "" {
			b, err := os.ReadFile(cfg.Plan.File)
			if err != nil {
				return nil, configError(fmt.Errorf("%s: [plan].file: %w", cfg.File, err))
			}
			src = string(b)
		}
		if err := CheckStaticPlan(cfg, eng, src); err != nil {
			return nil, err
		}
		return arbiter.StaticProvider{Source: src}, nil
	case "script":
		p, err := arbiter.NewScriptProvider(cfg.Model.Script)
		if err != nil {
			return nil, configError(err)
		}
		return p, nil
	case "openai", "command":
		return arbiter.NewPipeline(eng.Model, arbiter.PipelineOptions{
			Registry: eng.Registry, Governance: eng.Governance, MaxRepairs: cfg.Model.MaxRepairs, Secrets: eng.Secrets,
		}), nil
	case "agent":
		p := loop.AgentPlanner{PromptFile: cfg.AgentPromptFile(), Prompt: cfg.Intent.Goal, MaxIterations: stop.SpecBudgets(cfg.Stop).Iterations}
		if eng != nil {
			p.Secrets = eng.Secrets
		}
		return p, nil
	}
	return nil, configError(fmt.Errorf("model.provider %q is not one of openai, static, script, command, agent", cfg.Model.Provider))
}

// CheckStaticPlan reads the static plan src and, given an engine, admits
// it: the same plan runs every iteration, so one that cannot be read, or
// that governance refuses, would fail every one of them.
func CheckStaticPlan(cfg *config.Config, eng *Engine, src string) error {
	name := cfg.File + " [plan].rtfs"
	if cfg.Plan.File != "" {
		name = cfg.Plan.File
	}
	forms, err := rtfs.Read(src, name)
	if err != nil {
		return configError(fmt.Errorf("the static plan cannot be read: %w", err))
	}
	if eng != nil {
		if d := eng.Governance.Admit(name, forms); !d.Allowed {
			return configError(fmt.Errorf("governance refuses the static plan, so every iteration would fail: %w; fix [plan] or [governance]", d.Err()))
		}
	}
	return nil
}
