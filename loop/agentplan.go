package loop

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/rtfs"
)

// AgentPlanner is the provider of the agent loop ([agent] and no [plan]):
// every iteration's plan is one agent.run call on the prompt followed by
// the feedback block, so the stop conditions' verdicts reach the agent
// without the plan running the tests itself. Its plans are recorded as
// PlanGenerated of mode "agent".
type AgentPlanner struct {
	PromptFile    string   // read at every iteration, so edits between iterations count
	Prompt        string   // the prompt when there is no PromptFile ([intent].goal)
	MaxIterations int      // N in "iteration i of N"; 0 when no max_iterations bounds the run
	Secrets       []string // redacted from the feedback (it is recorded with the plan)
}

// Plan writes the iteration's plan.
func (p AgentPlanner) Plan(_ context.Context, req arbiter.PlanRequest) (arbiter.PlanResponse, error) {
	text, from := p.Prompt, "[intent].goal"
	if p.PromptFile != "" {
		b, err := os.ReadFile(p.PromptFile)
		if err != nil {
			return arbiter.PlanResponse{Provider: "agent", Mode: "agent"}, fmt.Errorf("read the agent's prompt: %w; restore the file or fix [agent].prompt_file", err)
		}
		text, from = string(b), p.PromptFile
	}
	prompt := strings.TrimRight(text, "\n") + "\n\n" + FeedbackBlock(req.Iteration, p.MaxIterations, req.Feedback)
	prompt = arbiter.Redact(prompt, p.Secrets)
	lit := rtfs.Print(rtfs.String(prompt))
	if len(lit) > MaxPromptBytes {
		return arbiter.PlanResponse{Provider: "agent", Mode: "agent"}, fmt.Errorf(
			"the agent's prompt %s is %d bytes and takes %d in the plan (with the feedback block, and escapes for what is not plain text), more than the %d a plan's string holds; shorten it",
			from, len(text), len(lit), MaxPromptBytes)
	}
	src := fmt.Sprintf("(do (step \"Agent\" (call :agent.run {:prompt %s})))", lit)
	return arbiter.PlanResponse{Source: src, Provider: "agent", Mode: "agent", Raw: src}, nil
}

// MaxPromptBytes bounds the agent's prompt as the plan writes it: a quoted
// RTFS string, which the reader takes up to 1 MiB long.
const MaxPromptBytes = 1 << 20

// Bounds of the feedback block.
const (
	feedbackFailureBytes  = 600  // each failure of the last iteration
	feedbackEvidenceLines = 40   // each unmet condition's evidence, from its end
	feedbackEvidenceBytes = 4000 // the same, in bytes
)

// FeedbackBlock is what ralph appends to the agent's prompt (docs/agents.md
// "The feedback block" documents it line by line): the iteration, how the
// last one ended, and each unmet success condition with its evidence.
func FeedbackBlock(iteration, max int, fb arbiter.Feedback) string {
	var b strings.Builder
	b.WriteString("## ralph feedback\n\n")
	if max > 0 {
		fmt.Fprintf(&b, "Iteration %d of %d.\n", iteration, max)
	} else {
		fmt.Fprintf(&b, "Iteration %d.\n", iteration)
	}
	if fb.Iteration == 0 {
		b.WriteString("Last iteration: none; this is the first.\n")
	} else {
		status := fb.Status
		if status == "" {
			status = "ok"
		}
		fmt.Fprintf(&b, "Last iteration (%d): %s.\n", fb.Iteration, status)
		for _, f := range fb.Failures {
			fmt.Fprintf(&b, "- %s\n", cutBytes(oneLineText(f), feedbackFailureBytes))
		}
	}
	var unmet []arbiter.ConditionStatus
	for _, c := range fb.Conditions {
		if c.Class == "success" && !c.Met {
			unmet = append(unmet, c)
		}
	}
	switch {
	case len(unmet) == 0 && fb.Conditions == nil:
		b.WriteString("\nThe success conditions have not been checked yet.\n")
	case len(unmet) == 0:
		b.WriteString("\nNo success condition is unmet.\n")
	default:
		b.WriteString("\nUnmet success conditions:\n")
		for _, c := range unmet {
			fmt.Fprintf(&b, "\n### %s (%s): %s\n", c.Name, c.Kind, oneLineText(c.Reason))
			if ev := evidenceTail(c.Evidence); ev != "" {
				b.WriteString("\n```\n" + ev + "\n```\n")
			}
		}
	}
	return b.String()
}

// evidenceTail is the last lines of a condition's evidence, with any code
// fence in it broken so it cannot close the block it is quoted in.
func evidenceTail(ev string) string {
	ev = strings.TrimRight(ev, "\n")
	lines := strings.Split(ev, "\n")
	if len(lines) > feedbackEvidenceLines {
		lines = lines[len(lines)-feedbackEvidenceLines:]
	}
	ev = strings.Join(lines, "\n")
	if len(ev) > feedbackEvidenceBytes {
		ev = strings.ToValidUTF8(ev[len(ev)-feedbackEvidenceBytes:], "")
	}
	return strings.ReplaceAll(ev, "```", "'''")
}

func oneLineText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
