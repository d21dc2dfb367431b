package arbiter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// How ralph plan prints a plan and the exchanges that made it: as text
// (WritePlanText) or JSON lines (WritePlanJSON, PlanObserver), with the
// secrets the engine knows replaced (Redacting, RedactError).

// WritePlanText writes the plan of resp (or that there is none: perr) with
// its diagnostics and Mode B diff, and with withIR its canonical IR.
func WritePlanText(w io.Writer, resp PlanResponse, perr error, withIR bool) error {
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
func planSummary(resp PlanResponse) string {
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
	Event       string          `json:"event"`
	Provider    string          `json:"provider"`
	Model       string          `json:"model,omitempty"`
	Mode        string          `json:"mode"`
	Repairs     int             `json:"repairs"`
	Attempts    map[string]int  `json:"attempts,omitempty"`
	Source      string          `json:"source"`
	IR          json.RawMessage `json:"ir,omitempty"`
	IRDiff      string          `json:"ir_diff"`
	Diagnostics []Diagnostic    `json:"diagnostics"`
	Usage       usageJSON       `json:"usage"`
	Error       string          `json:"error,omitempty"`
}

type usageJSON struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// WritePlanJSON writes the plan of resp as one JSON line (with perr, when
// set, as its error).
func WritePlanJSON(w io.Writer, resp PlanResponse, perr error) error {
	p := planJSON{Event: "plan", Provider: resp.Provider, Model: resp.Model, Mode: resp.Mode, Repairs: resp.Repairs,
		Attempts: resp.Attempts, Source: resp.Source, IRDiff: resp.IRDiff, Diagnostics: resp.Diagnostics,
		Usage: usageJSON{resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.CostUSD}}
	if p.Diagnostics == nil {
		p.Diagnostics = []Diagnostic{}
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
		return fmt.Errorf("encode JSON: %w", err)
	}
	return writeOut(w, buf.String())
}

// PlanObserver reports model exchanges as they complete: a line on stderr,
// or a JSON line on stdout with --json. Waits go to stderr either way.
type PlanObserver struct {
	out, errOut io.Writer
	asJSON      bool
	mu          sync.Mutex
	err         error // the first write failure
}

// NewPlanObserver reports exchanges on errOut, or with asJSON as JSON lines
// on out.
func NewPlanObserver(out, errOut io.Writer, asJSON bool) *PlanObserver {
	return &PlanObserver{out: out, errOut: errOut, asJSON: asJSON}
}

// Err is the first failure to write a report, or nil.
func (o *PlanObserver) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
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

func (o *PlanObserver) Consulted(c Consultation) {
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

func (o *PlanObserver) Waiting(reason string, until time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.errOut, "waiting %s: %s\n", time.Until(until).Round(time.Second), reason) // best effort: a lost notice changes nothing
}

func (o *PlanObserver) Token(string) {}

// Redacting is w with secrets replaced in everything written through it.
func Redacting(w io.Writer, secrets []string) io.Writer { return redactingWriter{w, secrets} }

// redactingWriter replaces secrets in everything written through it.
type redactingWriter struct {
	w       io.Writer
	secrets []string
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, Redact(string(p), r.secrets)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// RedactError is err with secrets replaced in its message.
func RedactError(err error, secrets []string) error { return redactedError{err, secrets} }

// redactedError is err with secrets replaced in its message.
type redactedError struct {
	err     error
	secrets []string
}

func (e redactedError) Error() string { return Redact(e.err.Error(), e.secrets) }
func (e redactedError) Unwrap() error { return e.err }

// writeOut writes s to w; a failure says it was the output's.
func writeOut(w io.Writer, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
