package arbiter

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// LLMAskID is the capability through which a plan asks the run's model a
// question.
const LLMAskID = "llm.ask"

// LLMAsk is the llm.ask capability over m: {:prompt string} → the answer
// text, effect [:llm]. Its cost (from [model.price]) goes into the result,
// so the orchestrator records it on the CapabilityCall and counts it
// against the run's budget; the model, its tokens and the call's cost
// are recorded as metadata.
func LLMAsk(m Model) *capability.Capability {
	return &capability.Capability{
		Spec: &capability.Spec{
			ID: LLMAskID, Version: "1.0.0",
			Description: "Ask the run's model one question and return its answer as text.",
			Input:       rtfs.MustParseType("[:map [:prompt :string]]"),
			Output:      rtfs.MustParseType(":string"),
			Effects:     []capability.Effect{{Kind: "llm"}},
			Risk:        capability.RiskMedium,
			Examples:    []string{`(call :llm.ask {:prompt "Summarise this test failure in one line: ..."})`},
		},
		Handler: func(ctx context.Context, in rtfs.Value) (capability.Result, error) {
			p := in.AsMap().GetKey("prompt").Str()
			reply, err := m.Complete(ctx, Completion{Messages: []Message{{Role: "user", Content: p}}}, nil)
			if err != nil {
				return capability.Result{}, fmt.Errorf("llm.ask via %s: %w", m.Name(), err)
			}
			return capability.Result{Value: rtfs.String(reply.Text), Cost: reply.Usage.CostUSD, Metadata: map[string]string{
				"model":             reply.Model,
				"prompt_tokens":     strconv.FormatInt(reply.Usage.PromptTokens, 10),
				"completion_tokens": strconv.FormatInt(reply.Usage.CompletionTokens, 10),
			}}, nil
		},
	}
}

// RegisterLLMAsk adds llm.ask over m to r.
func RegisterLLMAsk(r *capability.Registry, m Model) error { return r.Register(LLMAsk(m)) }
