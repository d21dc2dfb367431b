package arbiter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ralphloop/ralph/rtfs"
)

// Intent is what the loop is asked to achieve.
type Intent struct {
	Goal   string
	Prompt string     // PROMPT.md text, appended to the goal
	Params rtfs.Value // the plan context map's starting point
}

// Feedback is what the previous iteration left for the next plan.
type Feedback struct {
	Iteration  int
	Status     string // how that iteration ended: ok, failed, refused, skipped, provider-error
	LastPlan   string
	Failures   []string          // failed steps and calls, with their errors
	Conditions []ConditionStatus // each stop condition's status and progress, in priority order
}

// ConditionStatus is one stop condition's result as the model sees it.
type ConditionStatus struct {
	Name     string
	Kind     string
	Class    string // success | failure | limit | abort
	Met      bool
	Progress float64 // 0–1
	Detail   string  // "7/20", "exit 1"
	Reason   string
	Evidence string // what the condition looked at (a command's output tail)
}

// PlanRequest asks a provider for one iteration's plan.
type PlanRequest struct {
	Intent    Intent
	Iteration int
	Feedback  Feedback
	// Observer, when set, hears about the exchange as it happens: each
	// model consultation (to be recorded as an LlmConsultation action the
	// moment it completes, so a crash loses none), rate-limit waits and
	// streamed tokens. Nil is fine.
	Observer Observer
}

// Observer receives what a provider does while producing one plan. Calls
// come from the provider's goroutine; implementations must not block long.
type Observer interface {
	// Consulted reports one finished model exchange, successful or not.
	Consulted(Consultation)
	// Waiting reports a pause the provider takes before retrying, e.g. a 429
	// with Retry-After: the UI shows a countdown to until. It is neither an
	// iteration nor charged to any budget.
	Waiting(reason string, until time.Time)
	// Token reports streamed completion text as it arrives.
	Token(text string)
}

// Consultation is one request to a model and its answer.
type Consultation struct {
	Model        string
	Mode         string // "A" (RTFS) or "B" (JSON IR)
	Attempt      int    // 1 for the first try in a mode, 2.. for repairs
	PromptSHA256 string // hex SHA-256 of the prompt text before redaction
	Prompt       string // the prompt text, secrets redacted
	Response     string
	Usage        Usage
	Duration     time.Duration
	Err          string // empty on success
}

// Diagnostic is one problem found in a model's output.
type Diagnostic struct {
	Mode    string `json:"mode"` // "A" or "B"
	Attempt int    `json:"attempt"`
	Stage   string `json:"stage"`         // "extract" "parse" "forms" "capability" "schema" "governance" "ir"
	Pos     string `json:"pos,omitempty"` // "line:col" in the extracted plan, or a JSON path for IR
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Usage is what producing a plan cost.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	CostUSD          float64
}

// Tokens is the total token count.
func (u Usage) Tokens() int64 { return u.PromptTokens + u.CompletionTokens }

// PlanResponse is a provider's answer: RTFS plan text, how it was
// obtained, and what it cost.
type PlanResponse struct {
	Source   string // RTFS, checked when Mode is "A" or "B"
	Provider string // "static", "script", "openai", "command"
	Model    string
	Mode     string         // how the plan was produced: "static", "script", "A", "B"
	Repairs  int            // repairs across both modes
	Attempts map[string]int // attempts per mode ("A": 3, "B": 1)
	Raw      string         // the final raw model output
	Usage    Usage          // every consultation's tokens and cost summed
	// Diagnostics lists every problem found on the way, across attempts.
	Diagnostics []Diagnostic
	IR          string // the final plan's canonical JSON IR, when computed
	IRDiff      string // Mode B: model IR vs canonical IR; empty when equivalent
}

// Provider turns an intent and the last iteration's feedback into a plan.
// static and script return plan text as written; model-backed providers
// run the arbiter pipeline (extract, check, repair, Mode B).
type Provider interface {
	Plan(ctx context.Context, req PlanRequest) (PlanResponse, error)
}

// StaticProvider returns the same plan every iteration: the classic Ralph loop.
type StaticProvider struct{ Source string }

// Plan returns the static plan.
func (p StaticProvider) Plan(context.Context, PlanRequest) (PlanResponse, error) {
	return PlanResponse{Source: p.Source, Provider: "static", Mode: "static", Raw: p.Source}, nil
}

// ScriptProvider replays canned model answers from a JSONL file, one per
// plan request, in order. A line is a JSON string (the answer) or an object
// {"content": "…", "prompt_tokens": n, "completion_tokens": m, "cost_usd": x}.
type ScriptProvider struct {
	file    string
	mu      sync.Mutex
	answers []scriptAnswer
	next    int
}

type scriptAnswer struct {
	Content          string  `json:"content"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// NewScriptProvider reads and checks every line of file.
func NewScriptProvider(file string) (*ScriptProvider, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("script provider: %w", err)
	}
	p := &ScriptProvider{file: file}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var a scriptAnswer
		if text[0] == '"' {
			if err := json.Unmarshal(text, &a.Content); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
		} else {
			dec := json.NewDecoder(bytes.NewReader(text))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil {
				return nil, fmt.Errorf("%s:%d: each line must be a JSON string or {\"content\": …, \"prompt_tokens\": n, \"completion_tokens\": m}: %v", file, line, err)
			}
		}
		p.answers = append(p.answers, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(p.answers) == 0 {
		return nil, fmt.Errorf("%s has no answers; write one JSON line per plan", file)
	}
	return p, nil
}

// ErrScriptExhausted is returned once every answer has been used.
var ErrScriptExhausted = errors.New("script provider has no answers left")

// Plan returns the next answer.
func (p *ScriptProvider) Plan(context.Context, PlanRequest) (PlanResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= len(p.answers) {
		return PlanResponse{}, fmt.Errorf("%w (%s had %d)", ErrScriptExhausted, p.file, len(p.answers))
	}
	a := p.answers[p.next]
	p.next++
	return PlanResponse{Source: a.Content, Provider: "script", Mode: "script", Raw: a.Content,
		Usage: Usage{PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens, CostUSD: a.CostUSD}}, nil
}

// Skip advances past n answers (used on resume).
func (p *ScriptProvider) Skip(n int) {
	p.mu.Lock()
	p.next = min(p.next+n, len(p.answers))
	p.mu.Unlock()
}
