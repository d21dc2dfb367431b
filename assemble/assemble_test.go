package assemble_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// everyField sets every [governance] field, and an agent CLI that
// agent_allow = ["auto"] then also permits.
const everyField = `
[intent]
goal = "greet"
params = { greeting = "hello" }
[model]
provider = "static"
[plan]
rtfs = '(step "Greet" (call :ccos.echo {:message (:greeting ctx)}))'
[agent]
cli = "command"
command = ["sh"]
[governance]
allow = ["ccos.*", "kv.*", "agent.run", "shell.exec"]
deny = ["fs.delete"]
shell_allow = ["go"]
require_contracts = ["shell.*"]
require_compensation_for_effects = ["process"]
max_steps = 7
max_cost_usd = 3.5
agent_allow = ["auto"]
[[stop]]
name = "greeted"
kind = "predicate"
rtfs = '(>= (audit.count "Greet" :succeeded) 2)'
[[stop]]
name = "greeted-badly"
kind = "predicate"
class = "failure"
rtfs = '(>= (audit.count "Greet" :failed) 1)'
[[stop]]
name = "enough"
kind = "max_iterations"
max = 3
`

func load(t *testing.T, src string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func inMemory(t *testing.T) assemble.Opener {
	return func() (*ledger.Store, error) {
		st, err := assemble.InMemory()
		if err == nil {
			t.Cleanup(func() { st.Close() })
		}
		return st, err
	}
}

// The governance kernel gets every field of [governance], none left at its
// zero value, and the runner watches the success-class predicates only.
func TestRunTakesTheWholeConstitutionAndSuccessPredicates(t *testing.T) {
	cfg := load(t, everyField)
	run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: inMemory(t)})
	if err != nil {
		t.Fatal(err)
	}
	got := run.Governance.Constitution()
	v := reflect.ValueOf(got)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("Constitution.%s is not wired from the config", v.Type().Field(i).Name)
		}
	}
	g := cfg.Governance
	want := governance.Constitution{Allow: g.Allow, Deny: g.Deny, ShellAllow: g.ShellAllow, RequireContracts: g.RequireContracts,
		RequireCompensationForEffects: g.RequireCompensationForEffects, MaxSteps: 7, MaxCostUSD: 3.5,
		AgentAllow: []string{"auto", "command"}, AgentCLI: "command"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("constitution\n got %+v\nwant %+v", got, want)
	}
	if n := len(run.Options.Conditions); n != 3 {
		t.Errorf("%d conditions, want 3", n)
	}
	var preds []string
	for _, p := range run.Options.Predicates {
		preds = append(preds, p.Name)
	}
	if !slices.Equal(preds, []string{"greeted"}) {
		t.Errorf("predicates watched after every action %q, want the success-class one only", preds)
	}
	if run.Options.Intent.Goal != "greet" || run.Options.Intent.Params.AsMap().GetKey("greeting").Str() != "hello" {
		t.Errorf("intent %+v", run.Options.Intent)
	}
	if run.Options.Provider == nil || run.Options.Orchestrator != run.Orchestrator || run.Options.Store != run.Store {
		t.Errorf("runner options not wired: %+v", run.Options)
	}
	if _, err := run.NewRunner(); err != nil {
		t.Fatal(err)
	}
}

// ralph run (and resume), ralph exec, ralph plan and a fleet worker wire
// the same engine for the same config.
func TestEveryCallerGetsTheSameEngine(t *testing.T) {
	cfg := load(t, everyField)
	run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: inMemory(t)})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: inMemory(t), RunID: "0199c3a0-0000-7000-8000-000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := assemble.OpenEngine(cfg, inMemory(t), assemble.EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := inMemory(t)()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := assemble.PlanEngine(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	want := describe(run.Engine)
	for name, eng := range map[string]*assemble.Engine{"worker": worker.Engine, "exec": exec, "plan": plan} {
		if got := describe(eng); !reflect.DeepEqual(got, want) {
			t.Errorf("%s's engine\n got %+v\nwant %+v (ralph run's)", name, got, want)
		}
	}
}

type engineShape struct {
	Constitution governance.Constitution
	Capabilities []string
	Secrets      []string
	AgentCLI     string
	Model        bool
}

func describe(e *assemble.Engine) engineShape {
	s := engineShape{Constitution: e.Governance.Constitution(), Secrets: e.Secrets, AgentCLI: e.AgentCLI, Model: e.Model != nil}
	for _, sp := range e.Registry.Specs() {
		s.Capabilities = append(s.Capabilities, sp.ID)
	}
	slices.Sort(s.Capabilities)
	return s
}

// A plan governance refuses is a config error, and the store the build
// had created for it is removed again.
func TestRefusedPlanLeavesNoStore(t *testing.T) {
	cfg := load(t, `
[plan]
rtfs = '(step "Greet" (call :ccos.echo {:message "hi"}))'
[governance]
deny = ["ccos.*"]
`)
	dir := filepath.Join(t.TempDir(), "store")
	_, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Dir: dir,
		Open: func() (*ledger.Store, error) { return ledger.Open(ledger.Options{Dir: dir}) }})
	var ce *assemble.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err %v (%T), want a *ConfigError", err, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store %s the refused run created is still there (%v)", dir, err)
	}
}

// A test's stand-in capabilities are registered beside the built-ins and
// judged by the same governance.
func TestCapabilitiesOptionAddsStandIns(t *testing.T) {
	cfg := load(t, `
[plan]
rtfs = '(step "Charge" (call :test.charge {}))'
[governance]
deny = ["test.refused"]
`)
	add := func(reg *capability.Registry) error {
		for _, id := range []string{"test.charge", "test.refused"} {
			err := reg.Register(&capability.Capability{
				Spec: &capability.Spec{ID: id, Version: "1", Input: rtfs.MustParseType(":any"), Risk: capability.RiskLow},
				Handler: func(context.Context, rtfs.Value) (capability.Result, error) {
					return capability.Result{Value: rtfs.True}, nil
				},
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: inMemory(t),
		EngineOptions: assemble.EngineOptions{Capabilities: add}})
	if err != nil {
		t.Fatal(err)
	}
	if !run.Governance.Permits("test.charge") || run.Governance.Permits("test.refused") {
		t.Errorf("governance permits test.charge %v, test.refused %v; want true, false",
			run.Governance.Permits("test.charge"), run.Governance.Permits("test.refused"))
	}
}
