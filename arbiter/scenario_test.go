package arbiter_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/arbiter/oaitest"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/rtfs"
)

// Scenarios of issue 7 §9: the pipeline over the openai provider, against
// a fake server that speaks the real chat-completions protocol.

const scenarioKey = "sk-scenario-7f3a9c2e51d8"

const (
	goodPlan = `(do (step "Greet" (call :ccos.echo {:message "hello"})) (step "Sum" (call :ccos.math.add 2 3)))`
	goodIR   = `{"steps": [{"id": "greet", "name": "Greet", "capability": ":ccos.echo", "args": {"message": "hello"}, "deps": []},
	  {"id": "sum", "name": "Sum", "capability": ":ccos.math.add", "args": [2, 3], "deps": []},
	  {"id": "keep", "name": "Keep", "capability": ":kv.put", "args": {"key": "sum", "value": {"$rtfs": "(:result ctx)"}}, "deps": ["sum"]}]}`
	cycleIR = `{"steps": [{"id": "a", "name": "A", "capability": ":ccos.echo", "args": {"message": "a"}, "deps": ["b"]},
	  {"id": "b", "name": "B", "capability": ":ccos.echo", "args": {"message": "b"}, "deps": ["a"]}]}`
)

type nopKV struct{}

func (nopKV) Get(context.Context, string) (rtfs.Value, bool, error) { return rtfs.Nil, false, nil }
func (nopKV) Put(context.Context, string, rtfs.Value) error         { return nil }

// observed keeps what the pipeline reports.
type observed struct {
	mu            sync.Mutex
	consultations []arbiter.Consultation
	tokens        strings.Builder
}

func (o *observed) Consulted(c arbiter.Consultation) {
	o.mu.Lock()
	o.consultations = append(o.consultations, c)
	o.mu.Unlock()
}
func (o *observed) Waiting(string, time.Time) {}
func (o *observed) Token(s string) {
	o.mu.Lock()
	o.tokens.WriteString(s)
	o.mu.Unlock()
}

type scenario struct {
	srv  *oaitest.Server
	prov arbiter.Provider
	obs  *observed
}

func newScenario(t *testing.T, repairs int, opts oaitest.Options, answers ...oaitest.Answer) *scenario {
	t.Helper()
	opts.APIKey = scenarioKey
	srv := oaitest.New(t, opts, answers...)
	m, err := arbiter.NewOpenAI(config.Model{Provider: "openai", Model: "gpt-4o-mini", BaseURL: srv.BaseURL,
		Price: config.Price{InputPerMTok: 1, OutputPerMTok: 2}}, scenarioKey, arbiter.OpenAIOptions{Retry: arbiter.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Workdir: t.TempDir(), KV: nopKV{}}); err != nil {
		t.Fatal(err)
	}
	p := arbiter.NewPipeline(m, arbiter.PipelineOptions{Registry: reg, Governance: governance.New(governance.Constitution{}, reg, nil),
		MaxRepairs: repairs, Provider: "openai", Secrets: []string{scenarioKey}})
	return &scenario{srv: srv, prov: p, obs: &observed{}}
}

func (s *scenario) plan(t *testing.T) (arbiter.PlanResponse, error) {
	t.Helper()
	return s.prov.Plan(context.Background(), arbiter.PlanRequest{Intent: arbiter.Intent{Goal: "Say hello and add 2 and 3"}, Iteration: 1, Observer: s.obs})
}

// noKey checks the key appears in no consultation (each becomes an
// LlmConsultation action) and in no plan field the loop records.
func (s *scenario) noKey(t *testing.T, resp arbiter.PlanResponse, err error) {
	t.Helper()
	var all strings.Builder
	for _, c := range s.obs.consultations {
		all.WriteString(c.Model + c.Prompt + c.Response + c.Err + c.PromptSHA256)
	}
	all.WriteString(resp.Source + resp.Raw + resp.IR + resp.IRDiff)
	for _, d := range resp.Diagnostics {
		all.WriteString(d.Message + d.Fix)
	}
	if err != nil {
		all.WriteString(err.Error())
	}
	if strings.Contains(all.String(), scenarioKey) {
		t.Fatal("the API key appears in what is recorded")
	}
	for _, r := range s.srv.Completions() {
		if r.Authorization() != scenarioKey {
			t.Fatalf("request carried %q, not the key", r.Authorization())
		}
	}
}

func TestScenarioValidFirstTime(t *testing.T) {
	t.Parallel()
	s := newScenario(t, 2, oaitest.Options{}, oaitest.Text(goodPlan).WithUsage(900, 40))
	resp, err := s.plan(t)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Mode != "A" || resp.Repairs != 0 || resp.Provider != "openai" || resp.Model != "openai/gpt-4o-mini" || !strings.Contains(resp.Source, `(step "Sum" (call :ccos.math.add 2 3))`) {
		t.Fatalf("response = %+v", resp)
	}
	if resp.Usage.PromptTokens != 900 || resp.Usage.CompletionTokens != 40 || resp.Usage.CostUSD != (900*1+40*2)/1e6 {
		t.Fatalf("usage = %+v", resp.Usage)
	}
	reqs := s.srv.Completions()
	if len(reqs) != 1 || reqs[0].Model != "gpt-4o-mini" || len(reqs[0].Messages) != 2 || reqs[0].Messages[0].Role != "system" ||
		!strings.Contains(reqs[0].Messages[1].Content, "goal: Say hello and add 2 and 3") || reqs[0].ResponseFormat != "" || !reqs[0].Stream {
		t.Fatalf("request = %+v", reqs[0])
	}
	if s.obs.tokens.String() != goodPlan {
		t.Fatalf("streamed tokens = %q", s.obs.tokens.String())
	}
	c := s.obs.consultations
	if len(c) != 1 || c[0].Mode != "A" || c[0].Attempt != 1 || c[0].Response != goodPlan || c[0].Usage.PromptTokens != 900 || c[0].Err != "" || len(c[0].PromptSHA256) != 64 {
		t.Fatalf("consultations = %+v", c)
	}
	s.noKey(t, resp, err)
}

func TestScenarioProseAndFences(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]string{
		"prose":  "Sure! Here's a plan that greets and adds:\n\n" + goodPlan + "\n\nThis plan first greets, then adds the numbers.",
		"fenced": "```clojure\n" + goodPlan + "\n```",
		"both":   "Plan below.\n````markdown\n```rtfs\n" + goodPlan + "\n```\n````\nDone.",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t, 2, oaitest.Options{}, oaitest.Text(answer))
			resp, err := s.plan(t)
			if err != nil || resp.Mode != "A" || resp.Repairs != 0 || resp.Raw != answer || !strings.HasPrefix(resp.Source, "(do\n  (step \"Greet\"") {
				t.Fatalf("err = %v, response = %+v", err, resp)
			}
			s.noKey(t, resp, err)
		})
	}
}

func TestScenarioUnknownCapabilityRepaired(t *testing.T) {
	t.Parallel()
	bad := `(do (step "Greet" (call :ccos.say {:message "hello"})))`
	s := newScenario(t, 2, oaitest.Options{}, oaitest.Text(bad), oaitest.Text(goodPlan))
	resp, err := s.plan(t)
	if err != nil || resp.Mode != "A" || resp.Repairs != 1 || resp.Attempts["A"] != 2 {
		t.Fatalf("err = %v, response = %+v", err, resp)
	}
	if d := resp.Diagnostics; len(d) != 1 || d[0].Stage != "capability" || d[0].Pos != "1:25" {
		t.Fatalf("diagnostics = %+v", d)
	}
	reqs := s.srv.Completions()
	repair := reqs[1].Messages
	if len(reqs) != 2 || len(repair) != 4 || repair[2].Role != "assistant" || repair[2].Content != bad ||
		!strings.Contains(repair[3].Content, "- 1:25 unknown capability :ccos.say") {
		t.Fatalf("repair request = %+v", repair)
	}
	if c := s.obs.consultations; len(c) != 2 || c[1].Attempt != 2 {
		t.Fatalf("consultations = %+v", c)
	}
	s.noKey(t, resp, err)
}

func TestScenarioBrokenParensThenModeB(t *testing.T) {
	t.Parallel()
	s := newScenario(t, 1, oaitest.Options{},
		oaitest.Text(`(do (step "Greet" (call :ccos.echo {:message "hello"}))`),
		oaitest.Text(`(do (step "Greet" (call :ccos.echo {:message "hello"})`),
		oaitest.Text(goodIR))
	resp, err := s.plan(t)
	if err != nil {
		t.Fatal(err)
	}
	want := "(do\n  (step-parallel\n    (step \"Greet\" (call :ccos.echo {:message \"hello\"}))\n    (step \"Sum\" (call :ccos.math.add 2 3)))\n  (step \"Keep\" (call :kv.put {:key \"sum\" :value (:result ctx)})))\n"
	if resp.Mode != "B" || resp.Attempts["A"] != 2 || resp.Attempts["B"] != 1 || resp.Source != want || resp.IRDiff != "" {
		t.Fatalf("response = %+v\n%s", resp, resp.Source)
	}
	if !strings.Contains(resp.IR, `{"id":"keep","name":"Keep","capability":":kv.put"`) || !strings.Contains(resp.IR, `"deps":["greet","sum"]`) {
		t.Fatalf("canonical IR = %s", resp.IR)
	}
	reqs := s.srv.Completions()
	if len(reqs) != 3 || reqs[0].ResponseFormat != "" || reqs[1].ResponseFormat != "" || reqs[2].ResponseFormat != "json_object" || reqs[2].Model != "gpt-4o-mini" {
		t.Fatalf("response_format per request: %q %q %q", reqs[0].ResponseFormat, reqs[1].ResponseFormat, reqs[2].ResponseFormat)
	}
	if !strings.Contains(reqs[2].Messages[0].Content, `{"steps": [{"id": "...", "name": "...", "capability": ":cap.id"`) {
		t.Fatalf("Mode B system prompt = %q", reqs[2].Messages[0].Content)
	}
	if c := s.obs.consultations; len(c) != 3 || c[2].Mode != "B" || c[2].Attempt != 1 {
		t.Fatalf("consultations = %+v", c)
	}
	s.noKey(t, resp, err)
}

func TestScenarioModeBWithoutJSONMode(t *testing.T) {
	t.Parallel()
	s := newScenario(t, 0, oaitest.Options{RejectJSONMode: true}, oaitest.Text("no plan"), oaitest.Text(goodIR))
	resp, err := s.plan(t)
	if err != nil || resp.Mode != "B" {
		t.Fatalf("err = %v, response = %+v", err, resp)
	}
	s.noKey(t, resp, err)
}

func TestScenarioIRCycleRepaired(t *testing.T) {
	t.Parallel()
	s := newScenario(t, 1, oaitest.Options{}, oaitest.Text("I can't write RTFS."), oaitest.Text("Still no."),
		oaitest.Text("```json\n"+cycleIR+"\n```"), oaitest.Text(goodIR))
	resp, err := s.plan(t)
	if err != nil || resp.Mode != "B" || resp.Attempts["B"] != 2 || resp.Repairs != 2 {
		t.Fatalf("err = %v, response = %+v", err, resp)
	}
	reqs := s.srv.Completions()
	last := reqs[3]
	if last.ResponseFormat != "json_object" || len(last.Messages) != 4 || !strings.Contains(last.Messages[3].Content, "- steps[1].deps: the deps form a cycle: a → b → a") {
		t.Fatalf("repair request = %+v", last.Messages)
	}
	s.noKey(t, resp, err)
}

func TestScenarioGarbageInBothModes(t *testing.T) {
	t.Parallel()
	s := newScenario(t, 1, oaitest.Options{},
		oaitest.Text("Sorry, as an AI I cannot. My key is "+scenarioKey),
		oaitest.Text("((((((("),
		oaitest.Text("{\"steps\": [oops"),
		oaitest.Text("\x00\x01 binary \xff"))
	resp, err := s.plan(t)
	if !errors.Is(err, arbiter.ErrNoPlan) || !strings.Contains(err.Error(), "openai/gpt-4o-mini produced no valid plan in 2 RTFS and 2 JSON IR attempts") {
		t.Fatalf("err = %v", err)
	}
	if resp.Source != "" || len(resp.Diagnostics) != 4 || len(s.obs.consultations) != 4 {
		t.Fatalf("response = %+v, %d consultations", resp, len(s.obs.consultations))
	}
	if c := s.obs.consultations[0]; !strings.Contains(c.Response, "My key is [REDACTED]") {
		t.Fatalf("the echoed key must be redacted: %q", c.Response)
	}
	s.noKey(t, resp, err)
}

func TestScenarioContextLength(t *testing.T) {
	t.Parallel()
	s := newScenario(t, 0, oaitest.Options{}, oaitest.ContextLength(), oaitest.Text(goodPlan))
	resp, err := s.prov.Plan(context.Background(), arbiter.PlanRequest{Intent: arbiter.Intent{Goal: "g"}, Iteration: 2, Observer: s.obs,
		Feedback: arbiter.Feedback{Iteration: 1, LastPlan: "(do (step \"Old\" (call :ccos.echo {:message \"OLD-PLAN-TEXT\"})))", Failures: []string{"x"}}})
	if err != nil || resp.Mode != "A" {
		t.Fatalf("err = %v, response = %+v", err, resp)
	}
	reqs := s.srv.Completions()
	if len(reqs) != 2 || !strings.Contains(reqs[0].Messages[1].Content, "OLD-PLAN-TEXT") || strings.Contains(reqs[1].Messages[1].Content, "OLD-PLAN-TEXT") {
		t.Fatalf("the retry must carry shortened feedback: %d requests", len(reqs))
	}
	if c := s.obs.consultations; len(c) != 2 || c[0].Err == "" || c[1].Err != "" {
		t.Fatalf("consultations = %+v", c)
	}
}

func TestScenarioUnauthorizedIsFatal(t *testing.T) {
	t.Parallel()
	s := newScenario(t, 2, oaitest.Options{}, oaitest.Unauthorized(), oaitest.Text(goodPlan))
	resp, err := s.plan(t)
	if !errors.Is(err, arbiter.ErrFatal) || len(s.srv.Completions()) != 1 {
		t.Fatalf("err = %v after %d requests", err, len(s.srv.Completions()))
	}
	s.noKey(t, resp, err)
}
