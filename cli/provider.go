package cli

import (
	"fmt"
	"os"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// newProvider builds the plan provider [model].provider names, over the
// engine's capability registry and governance kernel. Model-backed
// providers (openai, command) run the arbiter pipeline over the engine's
// model.
func newProvider(cfg *config.Config, eng *engine) (arbiter.Provider, error) {
	switch cfg.Model.Provider {
	case "static":
		src := cfg.Plan.RTFS
		if cfg.Plan.File != "" {
			b, err := os.ReadFile(cfg.Plan.File)
			if err != nil {
				return nil, fmt.Errorf("%s: [plan].file: %w", cfg.File, err)
			}
			src = string(b)
		}
		if err := checkStaticPlan(cfg, eng, src); err != nil {
			return nil, err
		}
		return arbiter.StaticProvider{Source: src}, nil
	case "script":
		return arbiter.NewScriptProvider(cfg.Model.Script)
	case "openai", "command":
		return arbiter.NewPipeline(eng.model, arbiter.PipelineOptions{
			Registry: eng.reg, Governance: eng.gov, MaxRepairs: cfg.Model.MaxRepairs, Secrets: eng.secrets,
		}), nil
	case "agent":
		p := loop.AgentPlanner{PromptFile: cfg.AgentPromptFile(), Prompt: cfg.Intent.Goal, MaxIterations: cfg.MaxIterations()}
		if eng != nil {
			p.Secrets = eng.secrets
		}
		return p, nil
	}
	return nil, fmt.Errorf("model.provider %q is not one of openai, static, script, command, agent", cfg.Model.Provider)
}

// checkStaticPlan reads the static plan src and, given an engine, admits
// it: the same plan runs every iteration, so one that cannot be read, or
// that governance refuses, would fail every one of them.
func checkStaticPlan(cfg *config.Config, eng *engine, src string) error {
	name := cfg.File + " [plan].rtfs"
	if cfg.Plan.File != "" {
		name = cfg.Plan.File
	}
	forms, err := rtfs.Read(src, name)
	if err != nil {
		return fmt.Errorf("the static plan cannot be read: %w", err)
	}
	if eng != nil {
		if d := eng.gov.Admit(name, forms); !d.Allowed {
			return fmt.Errorf("governance refuses the static plan, so every iteration would fail: %w; fix [plan] or [governance]", d.Err())
		}
	}
	return nil
}

// newModel builds the model behind a model-backed provider, or returns nil
// for static and script. The openai provider reads its key from the
// environment variable model.api_key_env names; a missing key is an error
// naming that variable, raised before any run starts.
func newModel(cfg *config.Config, workdir string) (arbiter.Model, error) {
	m := cfg.Model
	switch m.Provider {
	case "openai":
		return arbiter.NewOpenAI(m, cfg.APIKey(nil), arbiter.OpenAIOptions{})
	case "command":
		return arbiter.NewCommand(m.Command, arbiter.CommandOptions{Timeout: m.Timeout.Duration, Workdir: workdir, Price: m.Price})
	}
	return nil, nil
}
