package arbiter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/arbiter/oaitest"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

func TestLLMAskSpec(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{})
	reg := capability.NewRegistry()
	if err := arbiter.RegisterLLMAsk(reg, newModel(t, srv, nil)); err != nil {
		t.Fatal(err)
	}
	c := reg.Get(":llm.ask")
	if c == nil {
		t.Fatal("llm.ask not registered")
	}
	if kinds := c.Spec.EffectKinds(); len(kinds) != 1 || kinds[0] != "llm" {
		t.Errorf("effects = %v", kinds)
	}
	if _, err := c.Spec.InputFrom([]rtfs.Value{rtfs.Int(3)}); err == nil {
		t.Errorf("a non-map input was accepted")
	}
	if err := arbiter.RegisterLLMAsk(reg, newModel(t, srv, nil)); err == nil {
		t.Errorf("llm.ask registered twice")
	}
}

// TestLLMAskThroughOrchestrator runs a plan that asks the model, through
// the real orchestrator and ledger, and checks the answer, the cost on the
// CapabilityCall and what the model was sent.
func TestLLMAskThroughOrchestrator(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text("TestParse fails: unbalanced paren").WithUsage(2000, 1000))
	m := newModel(t, srv, func(c *config.Model) { c.Price = config.Price{InputPerMTok: 1, OutputPerMTok: 2} })
	reg := capability.NewRegistry()
	if err := arbiter.RegisterLLMAsk(reg, m); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	orch, err := loop.NewOrchestrator(loop.OrchestratorOptions{Registry: reg,
		Governance: governance.New(governance.Constitution{}, reg, nil), Ledger: store, KV: store.KV(), Secrets: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := orch.Execute(context.Background(), loop.PlanInput{File: "plan.rtfs", RunID: "run-1", IntentID: "intent-1",
		Source: `(do (step "Summarise" (call :llm.ask {:prompt "Summarise the failure in one line."})))`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := res.Value.Str(); got != "TestParse fails: unbalanced paren" {
		t.Errorf("value = %q", got)
	}
	wantCost := (2000*1.0 + 1000*2.0) / 1e6
	if !near(res.Cost, wantCost) {
		t.Errorf("plan cost = %g, want %g", res.Cost, wantCost)
	}
	actions, err := store.ByRun("run-1")
	if err != nil {
		t.Fatal(err)
	}
	var call *ledger.Action
	for i := range actions {
		if actions[i].Type == ledger.CapabilityCall {
			call = &actions[i]
		}
	}
	if call == nil || call.FunctionName != "llm.ask" || !near(call.Cost, wantCost) || !call.Success {
		t.Fatalf("CapabilityCall = %+v", call)
	}
	if call.Metadata["prompt_tokens"].Str() != "2000" || call.Metadata["completion_tokens"].Str() != "1000" ||
		call.Metadata["model"].Str() != "gpt-4o-mini" {
		t.Errorf("metadata = %v", call.Metadata)
	}
	reqs := srv.Completions()
	if len(reqs) != 1 || len(reqs[0].Messages) != 1 || reqs[0].Messages[0].Content != "Summarise the failure in one line." {
		t.Errorf("sent %+v", reqs)
	}
}

func TestLLMAskFailureIsRecorded(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.ContextLength())
	c := arbiter.LLMAsk(newModel(t, srv, nil))
	in, err := c.Spec.InputFrom([]rtfs.Value{rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("prompt"), rtfs.String("long")))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Handler(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "llm.ask via openai/gpt-4o-mini") || strings.Contains(err.Error(), testKey) {
		t.Errorf("err = %v", err)
	}
}
