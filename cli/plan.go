package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/rtfs"
)

type planFlags struct {
	ir, asJSON bool
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [CONFIG]",
		Short: "Generate one plan through the configured provider and print it; execute nothing",
		Long: `Ask the provider CONFIG (default ./ralph.toml) configures for the first
iteration's plan and print it with its diagnostics: the mode that produced it
(A: RTFS, B: JSON IR compiled to RTFS), repairs, every problem found on the
way, and for Mode B the diff between the model's IR and the plan. Nothing is
executed and nothing is recorded. Model exchanges are reported on stderr as
they complete.

--ir also prints the plan's canonical JSON IR. --json prints one JSON object
per line: one per model exchange, then the plan (with its IR).

Exit status: 0 a plan was produced, 1 the provider failed (network, server),
2 a bad config, a fatal provider error (such as a missing API key), or no
valid plan after every repair, 4 interrupted.`,
		Example: `  ralph plan
  ralph plan examples/quickstart/ralph.toml --ir
  ralph plan --json | jq 'select(.event == "plan") | .ir_diff'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("plan takes at most one CONFIG, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := configArg(args)
			if err != nil {
				return err
			}
			return runPlan(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg, f)
		},
	}
	cmd.Flags().BoolVar(&f.ir, "ir", false, "also print the plan's canonical JSON IR")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "one JSON object per line on stdout")
	return cmd
}

func runPlan(ctx context.Context, out, errOut io.Writer, cfg *config.Config, f planFlags) error {
	if err := cfg.CheckPaths(); err != nil {
		return exitError(ExitUsage, err)
	}
	intent, err := assemble.Intent(cfg)
	if err != nil {
		return exitError(ExitUsage, err)
	}
	eng, err := memoryEngine(cfg)
	if err != nil {
		return err
	}
	defer eng.Store.Close()
	// The plan, its diagnostics and provider errors are printed as they
	// came; a key an agent CLI or server echoed must not reach the terminal.
	out, errOut = redactingWriter{out, eng.Secrets}, redactingWriter{errOut, eng.Secrets}
	provider, err := assemble.NewProvider(cfg, eng)
	if err != nil {
		return exitError(ExitUsage, err)
	}
	obs := &planObserver{out: out, errOut: errOut, asJSON: f.asJSON}
	resp, perr := provider.Plan(ctx, arbiter.PlanRequest{Intent: intent, Iteration: 1, Observer: obs})
	if obs.err != nil {
		return exitError(ExitFailure, obs.err)
	}
	if perr == nil && resp.IR == "" { // static and script plans: derive the IR here
		forms, err := rtfs.Read(resp.Source, planSourceName(cfg))
		if err != nil {
			return exitError(ExitUsage, err)
		}
		resp.IR = arbiter.Canonicalize(forms).JSON()
	}
	if f.asJSON {
		err = writePlanJSON(out, resp, perr)
	} else {
		err = writePlanText(out, resp, perr, f.ir)
	}
	if err != nil {
		return err
	}
	if perr != nil {
		perr = redactedError{perr, eng.Secrets}
	}
	switch {
	case perr == nil:
		return nil
	case errors.Is(perr, context.Canceled):
		return exitError(ExitCancelled, perr)
	case errors.Is(perr, arbiter.ErrNoPlan), errors.Is(perr, arbiter.ErrFatal), errors.Is(perr, arbiter.ErrScriptExhausted):
		return exitError(ExitUsage, perr)
	}
	return exitError(ExitFailure, perr)
}

// planSourceName names a static or script plan in error positions.
func planSourceName(cfg *config.Config) string {
	switch {
	case cfg.Model.Provider == "script":
		return cfg.Model.Script + " (answer 1)"
	case cfg.Plan.File != "":
		return cfg.Plan.File
	}
	return cfg.File + " [plan].rtfs"
}

func writePlanText(w io.Writer, resp arbiter.PlanResponse, perr error, withIR bool) error {
	var b strings.Builder
	b.WriteString(planSummary(resp))
	if perr == nil {
		b.WriteString("\n\n" + strings.TrimRight(resp.Source, "\n") + "\n")
	} else {
		b.WriteString(": no plan\n")
	}
	if len(resp.Diagnostics) > 0 {
		b.WriteString("\ndiagnostics:\n")
		for _, d := range resp.Diagnostics {
			fmt.Fprintf(&b, "  %s#%d %s", d.Mode, d.Attempt, d.Stage)
			if d.Pos != "" {
				b.WriteString(" " + d.Pos)
			}
			b.WriteString(": " + oneLineText(d.Message))
			if d.Fix != "" {
				b.WriteString(" — " + oneLineText(d.Fix))
			}
			b.WriteByte('\n')
		}
	}
	if resp.Mode == "B" && perr == nil {
		if resp.IRDiff == "" {
			b.WriteString("\nir diff: none (the plan keeps every step, dependency and argument of the model's IR)\n")
		} else {
			b.WriteString("\nir diff:\n")
			for _, l := range strings.Split(resp.IRDiff, "\n") {
				b.WriteString("  " + l + "\n")
			}
		}
	}
	if withIR && resp.IR != "" {
		b.WriteString("\ncanonical IR:\n" + indentJSON(resp.IR) + "\n")
	}
	return writeOut(w, b.String())
}

// planSummary is the first line: how the plan was made and what it cost.
func planSummary(resp arbiter.PlanResponse) string {
	var parts []string
	switch resp.Mode {
	case "A":
		parts = append(parts, "mode A (RTFS)")
	case "B":
		parts = append(parts, "mode B (JSON IR compiled to RTFS)")
	case "": // the provider failed before any answer
		parts = append(parts, "no answer")
	default:
		parts = append(parts, resp.Mode+" plan") // static, script
	}
	if len(resp.Attempts) > 0 {
		modes := make([]string, 0, len(resp.Attempts))
		for m := range resp.Attempts {
			modes = append(modes, m)
		}
		slices.Sort(modes)
		var att []string
		for _, m := range modes {
			att = append(att, fmt.Sprintf("%s×%d", m, resp.Attempts[m]))
		}
		parts = append(parts, fmt.Sprintf("%d repair%s (attempts %s)", resp.Repairs, pluralS(resp.Repairs), strings.Join(att, " ")))
	}
	if resp.Model != "" {
		parts = append(parts, resp.Model)
	}
	if u := resp.Usage; u.Tokens() > 0 || u.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens (%d prompt, %d completion), $%.4f", u.Tokens(), u.PromptTokens, u.CompletionTokens, u.CostUSD))
	}
	return strings.Join(parts, " · ")
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }

func indentJSON(s string) string {
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(s), "", "  ") != nil {
		return s
	}
	return buf.String()
}

// planJSON is the --json line for the outcome.
type planJSON struct {
	Event       string               `json:"event"`
	Provider    string               `json:"provider"`
	Model       string               `json:"model,omitempty"`
	Mode        string               `json:"mode"`
	Repairs     int                  `json:"repairs"`
	Attempts    map[string]int       `json:"attempts,omitempty"`
	Source      string               `json:"source"`
	IR          json.RawMessage      `json:"ir,omitempty"`
	IRDiff      string               `json:"ir_diff"`
	Diagnostics []arbiter.Diagnostic `json:"diagnostics"`
	Usage       usageJSON            `json:"usage"`
	Error       string               `json:"error,omitempty"`
}

type usageJSON struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

func writePlanJSON(w io.Writer, resp arbiter.PlanResponse, perr error) error {
	p := planJSON{Event: "plan", Provider: resp.Provider, Model: resp.Model, Mode: resp.Mode, Repairs: resp.Repairs,
		Attempts: resp.Attempts, Source: resp.Source, IRDiff: resp.IRDiff, Diagnostics: resp.Diagnostics,
		Usage: usageJSON{resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.CostUSD}}
	if p.Diagnostics == nil {
		p.Diagnostics = []arbiter.Diagnostic{}
	}
	if resp.IR != "" && json.Valid([]byte(resp.IR)) {
		p.IR = json.RawMessage(resp.IR)
	}
	if perr != nil {
		p.Error = perr.Error()
	}
	return writeJSONLine(w, p)
}

// writeJSONLine writes v as one line of JSON, without HTML escaping (plans
// hold < and >).
func writeJSONLine(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return exitError(ExitFailure, fmt.Errorf("encode JSON: %w", err))
	}
	return writeOut(w, buf.String())
}

// planObserver reports model exchanges as they complete: a line on stderr,
// or a JSON line on stdout with --json. Waits go to stderr either way.
type planObserver struct {
	out, errOut io.Writer
	asJSON      bool
	mu          sync.Mutex
	err         error // the first write failure
}

type consultationJSON struct {
	Event            string  `json:"event"`
	Model            string  `json:"model"`
	Mode             string  `json:"mode"`
	Attempt          int     `json:"attempt"`
	PromptSHA256     string  `json:"prompt_sha256"`
	Prompt           string  `json:"prompt"`
	Response         string  `json:"response"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	DurationMS       int64   `json:"duration_ms"`
	Error            string  `json:"error,omitempty"`
}

func (o *planObserver) Consulted(c arbiter.Consultation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	if o.asJSON {
		err = writeJSONLine(o.out, consultationJSON{Event: "consultation", Model: c.Model, Mode: c.Mode, Attempt: c.Attempt,
			PromptSHA256: c.PromptSHA256, Prompt: c.Prompt, Response: c.Response, PromptTokens: c.Usage.PromptTokens,
			CompletionTokens: c.Usage.CompletionTokens, CostUSD: c.Usage.CostUSD, DurationMS: c.Duration.Milliseconds(), Error: c.Err})
	} else {
		status := fmt.Sprintf("%d tokens", c.Usage.Tokens())
		if c.Err != "" {
			status = "failed: " + oneLineText(c.Err)
		}
		_, err = fmt.Fprintf(o.errOut, "consulted %s: mode %s attempt %d, %s, %s\n", c.Model, c.Mode, c.Attempt, c.Duration.Round(time.Millisecond), status)
	}
	if err != nil && o.err == nil {
		o.err = err
	}
}

func (o *planObserver) Waiting(reason string, until time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.errOut, "waiting %s: %s\n", time.Until(until).Round(time.Second), reason) // best effort: a lost notice changes nothing
}

func (o *planObserver) Token(string) {}

// redactingWriter replaces secrets in everything written through it.
type redactingWriter struct {
	w       io.Writer
	secrets []string
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, arbiter.Redact(string(p), r.secrets)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redactedError is err with secrets replaced in its message.
type redactedError struct {
	err     error
	secrets []string
}

func (e redactedError) Error() string { return arbiter.Redact(e.err.Error(), e.secrets) }
func (e redactedError) Unwrap() error { return e.err }
