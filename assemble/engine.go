package assemble

import (
	"os"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/sandbox"
)

// Engine is the wiring every plan-running command shares, over one store.
type Engine struct {
	Store        *ledger.Store
	Registry     *capability.Registry
	Governance   *governance.Kernel
	Orchestrator *loop.Orchestrator

	Model    arbiter.Model // behind provider openai or command; nil for static, script and agent
	Secrets  []string      // values redacted wherever text is recorded (the API key)
	AgentCLI string        // the resolved [agent].cli; "" without [agent]
}

// EngineOptions are what a caller adds to the engine a config describes.
type EngineOptions struct {
	// Capabilities, when set, registers more capabilities beside the
	// built-ins before governance is made: a test's stand-ins.
	Capabilities func(*capability.Registry) error
	// Denials gathers what the run's sandbox refused for the calls in
	// flight (nil: no sandbox); the orchestrator records them on the call.
	Denials *sandbox.Sink
	// SharedStore says the store Open returns is the caller's, open for
	// other runs too (a batch's child runs share the batch's one store):
	// a build that fails leaves it open and in place.
	SharedStore bool
}

// Opener opens the store an engine is wired over.
type Opener func() (*ledger.Store, error)

// InMemory opens a store that lives in memory, for engines that record
// nothing that must last (ralph plan, tests).
func InMemory() (*ledger.Store, error) {
	return ledger.Open(ledger.Options{InMemory: true})
}

// OpenEngine builds the model and resolves the agent CLI, checks the agent
// loop's budget, then opens the store and wires the engine over it; Close
// the engine's Store when done. Everything that can fail without a store
// fails first: a provider that cannot start (an agent command that is
// missing, no API key) must not leave a new store behind.
func OpenEngine(cfg *config.Config, open Opener, o EngineOptions) (*Engine, error) {
	model, err := newModel(cfg)
	if err != nil {
		return nil, err
	}
	cli, err := AgentCLI(cfg)
	if err != nil {
		return nil, err
	}
	if err := CheckAgentBudget(cfg, cli); err != nil {
		return nil, err
	}
	st, err := open()
	if err != nil {
		return nil, err
	}
	eng, err := NewEngine(cfg, st, model, cli, o)
	if err != nil {
		if !o.SharedStore {
			st.Close()
		}
		return nil, err
	}
	return eng, nil
}

// PlanEngine wires the engine of cfg over st for commands that read or
// make plans but run none (plan, ir): they work without the agent CLI
// installed, its name staying as configured.
func PlanEngine(cfg *config.Config, st *ledger.Store) (*Engine, error) {
	model, err := newModel(cfg)
	if err != nil {
		return nil, err
	}
	cli, err := AgentCLI(cfg)
	if err != nil && cfg.Agent != nil {
		cli = cfg.Agent.CLI
	}
	return NewEngine(cfg, st, model, cli, EngineOptions{})
}

// NewEngine wires the capabilities, governance and orchestrator of cfg
// over st; model is the model behind [model] (nil: none, and no llm.ask),
// cli the resolved [agent].cli ("" without [agent]).
func NewEngine(cfg *config.Config, st *ledger.Store, model arbiter.Model, cli string, o EngineOptions) (*Engine, error) {
	reg := capability.NewRegistry()
	err := builtin.Register(reg, builtin.Options{Workdir: Workdir(cfg), ShellAllow: cfg.Governance.ShellAllow,
		SecretEnv: []string{cfg.Model.APIKeyEnv}, KV: st.KV(), Agent: agentOptions(cfg, cli)})
	if err != nil {
		return nil, configError(err)
	}
	if model != nil { // plans may ask the run's model through llm.ask
		if err := arbiter.RegisterLLMAsk(reg, model); err != nil {
			return nil, configError(err)
		}
	}
	if o.Capabilities != nil {
		if err := o.Capabilities(reg); err != nil {
			return nil, err
		}
	}
	gov := governance.New(Constitution(cfg, cli), reg, nil)
	secrets := config.URLSecrets(cfg.Model.BaseURL) // ?api-key=… in base_url
	if key := cfg.APIKey(nil); key != "" {
		secrets = append(secrets, key)
	}
	orch, err := loop.NewOrchestrator(loop.OrchestratorOptions{Registry: reg, Governance: gov, Ledger: st, KV: st.KV(), Secrets: secrets, Denials: o.Denials})
	if err != nil {
		return nil, err
	}
	return &Engine{Store: st, Registry: reg, Governance: gov, Orchestrator: orch, Model: model, Secrets: secrets, AgentCLI: cli}, nil
}

// Constitution is [governance] as governance reads it, every field of it;
// cli is the resolved [agent].cli, which agent_allow = ["auto"] permits.
func Constitution(cfg *config.Config, cli string) governance.Constitution {
	g := cfg.Governance
	return governance.Constitution{Allow: g.Allow, Deny: g.Deny, ShellAllow: g.ShellAllow,
		RequireContracts: g.RequireContracts, RequireCompensationForEffects: g.RequireCompensationForEffects,
		MaxSteps: g.MaxSteps, MaxCostUSD: g.MaxCostUSD, AgentAllow: agentAllow(cfg, cli), AgentCLI: cli}
}

// Workdir is where plans run: [loop].workdir, or the current directory for
// the defaults (no config file).
func Workdir(cfg *config.Config) string {
	if cfg.File == "" {
		wd, _ := os.Getwd() // no current directory (removed under us): "" leaves plans in the process's own
		return wd
	}
	return cfg.Loop.Workdir
}

// newModel builds the model behind a model-backed provider (nil for
// static, script and agent, and for exec with a [model] that cannot plan:
// no llm.ask). The openai provider reads its key from the environment
// variable model.api_key_env names; a missing key is an error naming that
// variable, raised before any run starts; an agent command that cannot
// run names its line.
func newModel(cfg *config.Config) (arbiter.Model, error) {
	if cfg.ModelError() != nil {
		return nil, nil
	}
	var model arbiter.Model
	var err error
	switch m := cfg.Model; m.Provider {
	case "openai":
		model, err = arbiter.NewOpenAI(m, cfg.APIKey(nil), arbiter.OpenAIOptions{})
	case "command":
		model, err = arbiter.NewCommand(m.Command, arbiter.CommandOptions{Timeout: m.Timeout.Duration, Workdir: Workdir(cfg), Price: m.Price})
		if err != nil && cfg.File != "" {
			err = cfg.ErrorAt("model.command", err.Error())
		}
	}
	if err != nil {
		return nil, configError(err)
	}
	return model, nil
}
