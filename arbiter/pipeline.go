package arbiter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/rtfs"
)

// PipelineOptions configure NewPipeline.
type PipelineOptions struct {
	// Registry holds the capabilities plans may name; nil is an empty one.
	Registry *capability.Registry
	// Governance admits plans; nil is an empty constitution over Registry.
	// Only capabilities it permits are listed in prompts.
	Governance *governance.Kernel
	// MaxRepairs is how many repairs each mode gets after its first
	// attempt ([model].max_repairs); 0 means none.
	MaxRepairs int
	// Provider names the provider in PlanResponse ("openai", "command");
	// empty means the part of the model's Name before the slash.
	Provider string
	// Secrets are replaced by [REDACTED] in recorded prompts, answers and
	// errors (8 bytes or longer, as loop.Redact).
	Secrets []string
}

// Bounds on what a plan response records.
const (
	maxRecorded       = 64 << 10 // answer text in a consultation or PlanResponse.Raw
	maxTotalDiagnoses = 200
)

// NewPipeline returns the provider that turns model answers into checked
// plans (seed 004): Mode A asks for RTFS, extracts it, checks it (parse,
// allowed forms, capability ids, arity and types, governance admission)
// and repairs it with compact hints up to MaxRepairs times; then Mode B asks
// for JSON IR in JSON mode, validates it, sorts and compiles it to RTFS,
// checks that and repairs up to MaxRepairs times. Every exchange is
// reported to the request's Observer as it completes.
func NewPipeline(model Model, opts PipelineOptions) Provider {
	if opts.Registry == nil {
		opts.Registry = capability.NewRegistry()
	}
	if opts.Governance == nil {
		opts.Governance = governance.New(governance.Constitution{}, opts.Registry, nil)
	}
	if opts.Provider == "" {
		opts.Provider, _, _ = strings.Cut(model.Name(), "/")
	}
	opts.MaxRepairs = max(opts.MaxRepairs, 0)
	return &pipeline{
		model: model,
		opts:  opts,
		check: &checker{reg: opts.Registry, gov: opts.Governance},
		inv:   inventory(opts.Registry, opts.Governance),
	}
}

type pipeline struct {
	model Model
	opts  PipelineOptions
	check *checker
	inv   string // the capability inventory, fixed with the registry
}

// ErrNoPlan is matched by errors.Is when every attempt in both modes
// failed its checks.
var ErrNoPlan = errors.New("the model produced no valid plan")

// NoPlanError says how plan generation failed: attempts per mode and the
// last problem found.
type NoPlanError struct {
	Model    string
	Attempts map[string]int
	Last     Diagnostic
}

func (e *NoPlanError) Error() string {
	last := e.Last.Stage
	if e.Last.Pos != "" {
		last += " " + e.Last.Pos
	}
	last += ": " + e.Last.Message
	return fmt.Sprintf("%s produced no valid plan in %d RTFS and %d JSON IR attempts (the last problem: %s); try a stronger model or raise [model].max_repairs",
		e.Model, e.Attempts["A"], e.Attempts["B"], truncate(oneLine(last), 300))
}

// Is makes errors.Is(err, ErrNoPlan) true.
func (e *NoPlanError) Is(target error) bool { return target == ErrNoPlan }

// Plan runs Mode A, then Mode B if A found no valid plan.
func (p *pipeline) Plan(ctx context.Context, req PlanRequest) (resp PlanResponse, err error) {
	s := &session{p: p, req: req, fb: req.Feedback,
		resp: PlanResponse{Provider: p.opts.Provider, Model: p.model.Name(), Attempts: map[string]int{}}}
	defer func() {
		if r := recover(); r != nil { // a bug here must fail the iteration, not the run
			resp, err = s.resp, fmt.Errorf("arbiter: internal error while checking a plan from %s: %v; please report it", p.model.Name(), r)
		}
		s.resp.Repairs = 0
		for _, n := range s.resp.Attempts {
			s.resp.Repairs += n - 1
		}
		resp.Repairs = s.resp.Repairs
	}()
	for _, mode := range []func(context.Context) (bool, error){s.modeA, s.modeB} {
		ok, err := mode(ctx)
		if err != nil || ok {
			return s.resp, err
		}
	}
	last := Diagnostic{Stage: "extract", Message: "no answer"}
	if n := len(s.resp.Diagnostics); n > 0 {
		last = s.resp.Diagnostics[n-1]
	}
	return s.resp, &NoPlanError{Model: p.model.Name(), Attempts: s.resp.Attempts, Last: last}
}

// session is one Plan call.
type session struct {
	p         *pipeline
	req       PlanRequest
	fb        Feedback
	shortened bool   // the feedback was cut after a context-length error
	lastHints string // Mode A's last hints, shown when Mode B starts
	resp      PlanResponse
	prose     int // answers in a row that hold no plan at all
}

// outcome is the result of checking one answer.
type outcome struct {
	src   string
	forms []*rtfs.Node
	model *IR // Mode B: the model's IR, normalised
	diags []Diagnostic
}

type builder func(Feedback) []Message

func (s *session) modeA(ctx context.Context) (bool, error) {
	base := func(fb Feedback) []Message {
		return []Message{{Role: "system", Content: systemA}, {Role: "user", Content: userPrompt(s.p.inv, s.req, fb)}}
	}
	return s.run(ctx, "A", base, false, s.p.checkRTFS, repairA)
}

func (s *session) modeB(ctx context.Context) (bool, error) {
	note := fallbackNote(s.lastHints)
	base := func(fb Feedback) []Message {
		return []Message{{Role: "system", Content: systemB}, {Role: "user", Content: userPrompt(s.p.inv, s.req, fb) + note}}
	}
	return s.run(ctx, "B", base, true, s.p.checkIR, repairB)
}

// run makes one mode's attempts: the first, then up to MaxRepairs repairs
// that quote the previous answer and its hints.
func (s *session) run(ctx context.Context, mode string, base builder, json bool, check func(string) outcome, repair func(string) string) (bool, error) {
	build := base
	for attempt := 1; attempt <= 1+s.p.opts.MaxRepairs; attempt++ {
		s.resp.Attempts[mode] = attempt
		text, err := s.consult(ctx, mode, attempt, build, json)
		if err != nil {
			return false, err
		}
		s.resp.Mode, s.resp.Raw = mode, capText(text, maxRecorded)
		out := check(text)
		if len(out.diags) == 0 {
			s.accept(out)
			return true, nil
		}
		s.prose++
		if !isPlanless(text) {
			s.prose = 0
		}
		for _, d := range out.diags {
			if len(s.resp.Diagnostics) < maxTotalDiagnoses {
				d.Mode, d.Attempt = mode, attempt
				s.resp.Diagnostics = append(s.resp.Diagnostics, d)
			}
		}
		if err := s.agentAnswers(); err != nil { // neither a repair nor Mode B would get a plan from it
			return false, err
		}
		h := hints(out.diags)
		if mode == "A" {
			s.lastHints = h
		}
		prev := quoteOutput(text)
		build = func(fb Feedback) []Message {
			return append(base(fb), Message{Role: "assistant", Content: prev}, Message{Role: "user", Content: repair(h)})
		}
	}
	return false, nil
}

// accept records the checked plan, its canonical IR and, for Mode B, the
// diff between the model's IR and the canonical one.
func (s *session) accept(out outcome) {
	s.resp.Source = out.src
	canonical := Canonicalize(out.forms)
	s.resp.IR = canonical.JSON()
	if out.model != nil {
		s.resp.IRDiff = DiffIR(out.model, canonical, s.p.opts.Registry)
	}
}

// consult sends one request, shortening the feedback and trying once more
// if the model reports the prompt too long.
func (s *session) consult(ctx context.Context, mode string, attempt int, build builder, json bool) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", s.p.model.Name(), err)
	}
	reply, err := s.exchange(ctx, mode, attempt, build(s.fb), json)
	if err != nil && errors.Is(err, ErrContextLength) && !s.shortened {
		s.shortened = true
		s.fb = shortenFeedback(s.fb)
		reply, err = s.exchange(ctx, mode, attempt, build(s.fb), json)
	}
	if err != nil {
		return "", s.modelError(mode, attempt, err)
	}
	return reply.Text, nil
}

func (s *session) modelError(mode string, attempt int, err error) error {
	name := s.p.model.Name()
	switch {
	case errors.Is(err, ErrFatal), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", name, err)
	case errors.Is(err, ErrContextLength):
		return fmt.Errorf("%s: %w even with the previous iteration's feedback shortened; shorten PROMPT.md or use a model with a larger context", name, err)
	}
	return fmt.Errorf("%s: mode %s attempt %d: %w", name, mode, attempt, err)
}

// exchange asks the model once and reports the exchange to the observer.
func (s *session) exchange(ctx context.Context, mode string, attempt int, msgs []Message, json bool) (Reply, error) {
	prompt := renderPrompt(msgs)
	sum := sha256.Sum256([]byte(prompt))
	start := time.Now()
	var obs Observer // nil tells the model nobody listens (no streaming needed)
	if s.req.Observer != nil {
		obs = modelObserver{s.req.Observer}
	}
	reply, err := s.p.model.Complete(ctx, Completion{Messages: msgs, JSON: json}, obs)
	c := Consultation{Model: s.p.model.Name(), Mode: mode, Attempt: attempt, PromptSHA256: hex.EncodeToString(sum[:]),
		Prompt: Redact(prompt, s.p.opts.Secrets), Response: Redact(capText(reply.Text, maxRecorded), s.p.opts.Secrets),
		Usage: reply.Usage, Duration: time.Since(start)}
	if err != nil {
		c.Err = Redact(err.Error(), s.p.opts.Secrets)
	}
	s.resp.Usage.PromptTokens += reply.Usage.PromptTokens
	s.resp.Usage.CompletionTokens += reply.Usage.CompletionTokens
	s.resp.Usage.CostUSD += reply.Usage.CostUSD
	if s.req.Observer != nil {
		s.req.Observer.Consulted(c)
	}
	return reply, err
}

// modelObserver passes a model's waits and tokens on; consultations are
// the pipeline's to report.
type modelObserver struct{ o Observer }

func (m modelObserver) Consulted(Consultation)                 {}
func (m modelObserver) Waiting(reason string, until time.Time) { m.o.Waiting(reason, until) }
func (m modelObserver) Token(text string)                      { m.o.Token(text) }

// checkRTFS extracts and checks a Mode A answer.
func (p *pipeline) checkRTFS(answer string) outcome {
	ex, ds := extractRTFS(answer)
	if len(ds) > 0 {
		return outcome{diags: ds}
	}
	forms, ps := p.check.check(ex.text)
	if len(ps) > 0 {
		out := outcome{}
		for _, pr := range ps {
			d := Diagnostic{Stage: pr.stage, Message: pr.msg, Fix: pr.fix}
			if pr.pos.Line > 0 {
				l, c := ex.shift(pr.pos.Line, pr.pos.Col)
				d.Pos = fmt.Sprintf("%d:%d", l, c)
			}
			out.diags = append(out.diags, d)
		}
		return out
	}
	return outcome{src: formatChecked(forms, ex.text), forms: forms}
}

// formatChecked lays a checked plan out canonically, keeping the text as
// written if the layout would not read back to the same forms.
func formatChecked(forms []*rtfs.Node, written string) string {
	src := FormatPlan(forms)
	again, err := rtfs.ReadWith(src, rtfs.ReadOptions{File: planFile, MaxDepth: planMaxDepth, MaxLiteral: planMaxLiteral})
	if err != nil || rtfs.PrintProgram(again) != rtfs.PrintProgram(forms) {
		return written
	}
	return src
}

var lineColRE = regexp.MustCompile(`^(\d+):(\d+)$`)

// checkIR extracts, validates, compiles and checks a Mode B answer.
// Problems in the compiled plan are reported against the IR step they
// come from.
func (p *pipeline) checkIR(answer string) outcome {
	ex, ds := extractJSON(answer)
	if len(ds) > 0 {
		return outcome{diags: ds}
	}
	steps, ds := decodeIR([]byte(ex.text))
	if len(ds) > 0 {
		for i := range ds {
			if m := lineColRE.FindStringSubmatch(ds[i].Pos); m != nil {
				l, _ := strconv.Atoi(m[1])
				c, _ := strconv.Atoi(m[2])
				l, c = ex.shift(l, c)
				ds[i].Pos = fmt.Sprintf("%d:%d", l, c)
			}
		}
		return outcome{diags: ds}
	}
	checked, ls, ds := validateIR(steps, p.opts.Registry, p.opts.Governance.Permits)
	if len(ds) > 0 {
		return outcome{diags: ds}
	}
	src := FormatPlan([]*rtfs.Node{compileSteps(checked, ls)})
	forms, ps := p.check.check(src)
	if len(ps) > 0 {
		located := forms
		if located == nil { // it does not read under the plan limits: find its steps without them
			located, _ = rtfs.ReadWith(src, rtfs.ReadOptions{File: planFile})
		}
		lines := stepLines(located, ls, checked)
		out := outcome{}
		for _, pr := range ps {
			d := Diagnostic{Stage: pr.stage, Message: pr.msg, Fix: pr.fix}
			if idx, ok := lines.at(pr.pos.Line); ok {
				d.Pos = fmt.Sprintf("steps[%d]", idx)
			} else if pr.pos.Line > 0 {
				d.Pos = fmt.Sprintf("compiled plan %d:%d", pr.pos.Line, pr.pos.Col)
			}
			out.diags = append(out.diags, d)
		}
		return out
	}
	return outcome{src: src, forms: forms, model: modelIR(checked)}
}

// lineRanges maps lines of a compiled plan to the IR steps written there.
type lineRanges []struct{ from, to, step int }

func (r lineRanges) at(line int) (int, bool) {
	for _, x := range r {
		if line >= x.from && line <= x.to {
			return x.step, true
		}
	}
	return 0, false
}

func stepLines(forms []*rtfs.Node, ls [][]int, steps []*checkedStep) lineRanges {
	var out lineRanges
	if len(forms) != 1 || forms[0].Head() != "do" || len(forms[0].Items) != len(ls)+1 {
		return nil
	}
	for li, layer := range ls {
		n := forms[0].Items[li+1]
		nodes := []*rtfs.Node{n}
		if len(layer) > 1 {
			nodes = n.Items[1:]
		}
		for k, i := range layer {
			if k < len(nodes) {
				out = append(out, struct{ from, to, step int }{nodes[k].Pos.Line, max(nodes[k].End.Line, nodes[k].Pos.Line), steps[i].index})
			}
		}
	}
	return out
}

// capText bounds recorded text, saying how much was cut.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncate(s, n) + fmt.Sprintf("\n[… %d more bytes not recorded]", len(s)-n)
}
