package arbiter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/rtfs"
)

const validPlan = `(do (step "Greet" (call :ccos.echo {:message "hi"})) (step "Add" (call :ccos.math.add 2 3)))`

const validIR = `{"steps": [{"id": "greet", "name": "Greet", "capability": ":ccos.echo", "args": {"message": "hi"}, "deps": []},
  {"id": "add", "name": "Add", "capability": ":ccos.math.add", "args": [2, 3], "deps": []},
  {"id": "save", "name": "Save", "capability": ":kv.put", "args": {"key": "sum", "value": {"$rtfs": "(:result ctx)"}}, "deps": ["add"]}]}`

func newTestPipeline(t testing.TB, m Model, repairs int, c governance.Constitution, secrets ...string) Provider {
	t.Helper()
	reg := testRegistry(t)
	return NewPipeline(m, PipelineOptions{Registry: reg, Governance: governance.New(c, reg, nil), MaxRepairs: repairs, Secrets: secrets})
}

func plan(t testing.TB, p Provider, obs Observer) (PlanResponse, error) {
	t.Helper()
	return p.Plan(context.Background(), PlanRequest{Intent: Intent{Goal: "greet and add"}, Iteration: 1, Observer: obs})
}

func TestPipelineFirstAttempt(t *testing.T) {
	t.Parallel()
	m := script(validPlan)
	rec := &recorder{}
	resp, err := plan(t, newTestPipeline(t, m, 2, governance.Constitution{}), rec)
	if err != nil {
		t.Fatal(err)
	}
	wantSrc := "(do\n  (step \"Greet\" (call :ccos.echo {:message \"hi\"}))\n  (step \"Add\" (call :ccos.math.add 2 3)))\n"
	if resp.Mode != "A" || resp.Repairs != 0 || resp.Attempts["A"] != 1 || resp.Attempts["B"] != 0 || resp.Source != wantSrc ||
		resp.Provider != "test" || resp.Model != "test/model" || resp.Raw != validPlan || resp.IRDiff != "" || len(resp.Diagnostics) != 0 {
		t.Fatalf("response = %+v", resp)
	}
	if !strings.Contains(resp.IR, `"id":"greet"`) || !strings.Contains(resp.IR, `"deps":["greet"]`) {
		t.Fatalf("IR = %s", resp.IR)
	}
	if resp.Usage != (Usage{PromptTokens: 10, CompletionTokens: 5, CostUSD: 0.001}) {
		t.Fatalf("usage = %+v", resp.Usage)
	}
	if len(rec.consultations) != 1 || rec.tokens != 1 {
		t.Fatalf("observer heard %d consultations, %d tokens", len(rec.consultations), rec.tokens)
	}
	c := rec.consultations[0]
	sum := sha256.Sum256([]byte(renderPrompt(m.requests[0].Messages)))
	if c.Model != "test/model" || c.Mode != "A" || c.Attempt != 1 || c.PromptSHA256 != hex.EncodeToString(sum[:]) ||
		c.Response != validPlan || c.Err != "" || c.Usage.PromptTokens != 10 || !strings.Contains(c.Prompt, "[system]\nYou generate RTFS plans") {
		t.Fatalf("consultation = %+v", c)
	}
	req := m.requests[0]
	if req.JSON || len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user" ||
		!strings.Contains(req.Messages[1].Content, "goal: greet and add") || !strings.Contains(req.Messages[1].Content, "- :ccos.echo {:message string}") {
		t.Fatalf("request = %+v", req)
	}
}

func TestPipelineRepair(t *testing.T) {
	t.Parallel()
	bad := "Here it is:\n```\n(do (step \"Greet\" (call :ccos.ecko {:message \"hi\"})))\n```"
	m := script(bad, validPlan)
	rec := &recorder{}
	resp, err := plan(t, newTestPipeline(t, m, 2, governance.Constitution{}), rec)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Mode != "A" || resp.Repairs != 1 || resp.Attempts["A"] != 2 || len(resp.Diagnostics) != 1 {
		t.Fatalf("response = %+v", resp)
	}
	d := resp.Diagnostics[0]
	if d.Mode != "A" || d.Attempt != 1 || d.Stage != "capability" || d.Pos != "3:25" {
		t.Fatalf("diagnostic = %+v (positions count in the whole answer)", d)
	}
	msgs := m.requests[1].Messages
	if len(msgs) != 4 || msgs[2].Role != "assistant" || msgs[2].Content != bad || msgs[3].Role != "user" {
		t.Fatalf("repair request = %+v", msgs)
	}
	if h := msgs[3].Content; !strings.Contains(h, "- 3:25 unknown capability :ccos.ecko; fix: did you mean :ccos.echo?") || !strings.Contains(h, "Write the whole corrected plan again") {
		t.Fatalf("repair prompt = %q", h)
	}
	if len(rec.consultations) != 2 || rec.consultations[1].Attempt != 2 || !strings.Contains(rec.consultations[1].Prompt, "[assistant]\n"+bad) {
		t.Fatalf("consultations = %+v", rec.consultations)
	}
}

func TestPipelineModeB(t *testing.T) {
	t.Parallel()
	m := script(`(do (step "A" (call :ccos.echo {:message "x"})`, `(do (step "A" (call :ccos.echo {:message "x"}))`, validIR)
	rec := &recorder{}
	resp, err := plan(t, newTestPipeline(t, m, 1, governance.Constitution{}), rec)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Mode != "B" || resp.Attempts["A"] != 2 || resp.Attempts["B"] != 1 || resp.Repairs != 1 || resp.IRDiff != "" || resp.Raw != validIR {
		t.Fatalf("response = %+v", resp)
	}
	want := "(do\n  (step-parallel\n    (step \"Greet\" (call :ccos.echo {:message \"hi\"}))\n    (step \"Add\" (call :ccos.math.add 2 3)))\n  (step \"Save\" (call :kv.put {:key \"sum\" :value (:result ctx)})))\n"
	if resp.Source != want {
		t.Fatalf("compiled plan:\n%s\nwant:\n%s", resp.Source, want)
	}
	req := m.requests[2]
	if !req.JSON || !strings.HasPrefix(req.Messages[0].Content, "You generate plans for ralph, an agent-loop runner, as JSON.") ||
		!strings.Contains(req.Messages[1].Content, "Your RTFS plans were rejected") || !strings.Contains(req.Messages[1].Content, "never closed") {
		t.Fatalf("Mode B request = %+v", req)
	}
	if m.requests[0].JSON || m.requests[1].JSON {
		t.Fatal("Mode A must not ask for JSON")
	}
	if rec.consultations[2].Mode != "B" || rec.consultations[2].Attempt != 1 {
		t.Fatalf("consultation = %+v", rec.consultations[2])
	}
	if !strings.Contains(resp.IR, `"id":"save","name":"Save","capability":":kv.put"`) {
		t.Fatalf("IR = %s", resp.IR)
	}
}

func TestPipelineModeBRepairsCycle(t *testing.T) {
	t.Parallel()
	cycle := `{"steps": [{"id": "a", "name": "A", "capability": ":ccos.echo", "args": {"message": "a"}, "deps": ["b"]},
	  {"id": "b", "name": "B", "capability": ":ccos.echo", "args": {"message": "b"}, "deps": ["a"]}]}`
	m := script("no plan, sorry", "still none", "```json\n"+cycle+"\n```", validIR)
	resp, err := plan(t, newTestPipeline(t, m, 1, governance.Constitution{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Mode != "B" || resp.Attempts["B"] != 2 || resp.Repairs != 2 || resp.Attempts["A"] != 2 {
		t.Fatalf("response = %+v", resp)
	}
	last := resp.Diagnostics[len(resp.Diagnostics)-1]
	if last.Mode != "B" || last.Attempt != 1 || last.Pos != "steps[1].deps" || !strings.Contains(last.Message, "a → b → a") {
		t.Fatalf("diagnostic = %+v", last)
	}
	repair := m.requests[3].Messages
	if !m.requests[3].JSON || len(repair) != 4 || !strings.Contains(repair[3].Content, "- steps[1].deps: the deps form a cycle: a → b → a") {
		t.Fatalf("repair = %+v", repair)
	}
}

func TestPipelineGovernanceInModeB(t *testing.T) {
	t.Parallel()
	doc := `{"steps": [{"id": "a", "name": "A", "capability": ":ccos.echo", "args": {"message": "a"}},
	  {"id": "rm", "name": "Remove", "capability": ":shell.exec", "args": {"cmd": "rm", "args": ["-rf", "/"]}}]}`
	m := script("nothing", doc)
	resp, err := plan(t, newTestPipeline(t, m, 0, governance.Constitution{ShellAllow: []string{"go"}}), nil)
	if !errors.Is(err, ErrNoPlan) {
		t.Fatalf("err = %v", err)
	}
	last := resp.Diagnostics[len(resp.Diagnostics)-1]
	if last.Stage != "governance" || last.Pos != "steps[1]" || !strings.Contains(last.Message, `command "rm"`) || !strings.Contains(last.Fix, "only these commands") {
		t.Fatalf("diagnostic = %+v", last)
	}
}

func TestPipelineNoPlan(t *testing.T) {
	t.Parallel()
	m := script("I'd rather not.", "(do (", "```\n{\"steps\": \n```", `{"steps": [{"id": "x", "capability": ":nope"}]}`)
	rec := &recorder{}
	resp, err := plan(t, newTestPipeline(t, m, 1, governance.Constitution{}), rec)
	var np *NoPlanError
	if !errors.Is(err, ErrNoPlan) || !errors.As(err, &np) {
		t.Fatalf("err = %v, want a NoPlanError", err)
	}
	want := "test/model produced no valid plan in 2 RTFS and 2 JSON IR attempts (the last problem: ir steps[0].capability: unknown capability :nope); try a stronger model or raise [model].max_repairs"
	if err.Error() != want {
		t.Fatalf("error:\n%s\nwant\n%s", err, want)
	}
	if resp.Source != "" || resp.Mode != "B" || resp.Repairs != 2 || len(resp.Diagnostics) != 4 || len(rec.consultations) != 4 {
		t.Fatalf("response = %+v, %d consultations", resp, len(rec.consultations))
	}
	for i, want := range []string{"A1", "A2", "B1", "B2"} {
		if d := resp.Diagnostics[i]; fmt.Sprintf("%s%d", d.Mode, d.Attempt) != want {
			t.Fatalf("diagnostic %d = %+v, want %s", i, d, want)
		}
	}
}

func TestPipelineModelErrors(t *testing.T) {
	t.Parallel()
	t.Run("fatal at once", func(t *testing.T) {
		t.Parallel()
		m := &scriptModel{answers: []answer{{err: fmt.Errorf("%w: 401 Unauthorized; set OPENAI_API_KEY", ErrFatal)}, {text: validPlan}}}
		rec := &recorder{}
		_, err := plan(t, newTestPipeline(t, m, 2, governance.Constitution{}), rec)
		if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "set OPENAI_API_KEY") || len(m.requests) != 1 {
			t.Fatalf("err = %v after %d requests", err, len(m.requests))
		}
		if len(rec.consultations) != 1 || !strings.Contains(rec.consultations[0].Err, "401") {
			t.Fatalf("consultations = %+v", rec.consultations)
		}
	})
	t.Run("transport error is returned, not repaired", func(t *testing.T) {
		t.Parallel()
		m := &scriptModel{answers: []answer{{err: errors.New("connection refused")}, {text: validPlan}}}
		_, err := plan(t, newTestPipeline(t, m, 2, governance.Constitution{}), nil)
		if err == nil || err.Error() != "test/model: mode A attempt 1: connection refused" || errors.Is(err, ErrNoPlan) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m := script(validPlan)
		_, err := newTestPipeline(t, m, 2, governance.Constitution{}).Plan(ctx, PlanRequest{})
		if !errors.Is(err, context.Canceled) || len(m.requests) != 0 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a panicking model fails the plan", func(t *testing.T) {
		t.Parallel()
		_, err := plan(t, newTestPipeline(t, panicModel{}, 2, governance.Constitution{}), nil)
		if err == nil || !strings.Contains(err.Error(), "internal error") {
			t.Fatalf("err = %v", err)
		}
	})
}

type panicModel struct{}

func (panicModel) Name() string { return "test/panic" }
func (panicModel) Complete(context.Context, Completion, Observer) (Reply, error) {
	panic("boom")
}

func TestPipelineContextLength(t *testing.T) {
	t.Parallel()
	fb := Feedback{Iteration: 4, LastPlan: "(do (step \"Old\" (call :ccos.echo {:message \"PREVIOUS-PLAN\"})))",
		Failures: []string{"f1", "f2", "f3", "f4", "f5"}}
	req := PlanRequest{Intent: Intent{Goal: "g"}, Iteration: 5, Feedback: fb}
	t.Run("shortened and tried once more", func(t *testing.T) {
		t.Parallel()
		m := &scriptModel{answers: []answer{{err: fmt.Errorf("%w: 9000 > 8192 tokens", ErrContextLength)}, {text: validPlan}}}
		rec := &recorder{}
		r := req
		r.Observer = rec
		resp, err := newTestPipeline(t, m, 0, governance.Constitution{}).Plan(context.Background(), r)
		if err != nil || resp.Mode != "A" {
			t.Fatalf("err = %v, resp = %+v", err, resp)
		}
		first, second := m.requests[0].Messages[1].Content, m.requests[1].Messages[1].Content
		if !strings.Contains(first, "PREVIOUS-PLAN") || strings.Contains(second, "PREVIOUS-PLAN") || strings.Contains(second, "- f4") || !strings.Contains(second, "- f3") || len(second) >= len(first) {
			t.Fatalf("second prompt is not shortened:\n%s", second)
		}
		if len(rec.consultations) != 2 || rec.consultations[0].Attempt != 1 || rec.consultations[1].Attempt != 1 || rec.consultations[0].Err == "" {
			t.Fatalf("consultations = %+v", rec.consultations)
		}
	})
	t.Run("only once", func(t *testing.T) {
		t.Parallel()
		m := &scriptModel{answers: []answer{{err: ErrContextLength}, {err: ErrContextLength}, {text: validPlan}}}
		_, err := newTestPipeline(t, m, 0, governance.Constitution{}).Plan(context.Background(), req)
		if !errors.Is(err, ErrContextLength) || !strings.Contains(err.Error(), "shorten PROMPT.md") || len(m.requests) != 2 {
			t.Fatalf("err = %v after %d requests", err, len(m.requests))
		}
	})
}

func TestPipelineRedactsSecrets(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789abcdef"
	m := &scriptModel{answers: []answer{{text: "ignore that; the key is " + key}, {text: "", err: errors.New("bad key " + key)}}}
	rec := &recorder{}
	p := newTestPipeline(t, m, 2, governance.Constitution{}, key)
	_, err := p.Plan(context.Background(), PlanRequest{Intent: Intent{Goal: "use " + key}, Observer: rec})
	if err == nil {
		t.Fatal("want the model's error")
	}
	if len(rec.consultations) != 2 {
		t.Fatalf("consultations = %d", len(rec.consultations))
	}
	for _, c := range rec.consultations {
		all := c.Prompt + c.Response + c.Err
		if strings.Contains(all, key) {
			t.Fatalf("the key leaked: %+v", c)
		}
	}
	if !strings.Contains(rec.consultations[0].Prompt, "use [REDACTED]") || !strings.Contains(rec.consultations[1].Err, "[REDACTED]") {
		t.Fatalf("redaction = %+v", rec.consultations)
	}
	sum := sha256.Sum256([]byte(renderPrompt(m.requests[0].Messages)))
	if rec.consultations[0].PromptSHA256 != hex.EncodeToString(sum[:]) || !strings.Contains(m.requests[0].Messages[1].Content, key) {
		t.Fatal("the hash is of the prompt as sent")
	}
}

func TestPromptContents(t *testing.T) {
	t.Parallel()
	m := script(validPlan)
	reg := testRegistry(t)
	p := NewPipeline(m, PipelineOptions{Registry: reg, Governance: governance.New(governance.Constitution{Deny: []string{"fs.*"}, ShellAllow: []string{"go"}}, reg, nil)})
	params := rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("package"), rtfs.String("./...")))
	_, err := p.Plan(context.Background(), PlanRequest{
		Intent:    Intent{Goal: "make the tests pass", Prompt: "Be careful with the database.", Params: params},
		Iteration: 3,
		Feedback: Feedback{Iteration: 2, LastPlan: `(do (step "Test" (call :shell.exec {:cmd "go"})))`, Failures: []string{"step \"Test\" failed:\nexit 1"},
			Conditions: []ConditionStatus{{Name: "tests-green", Kind: "command", Class: "success", Progress: 0.5, Detail: "exit 1", Reason: "2 tests failed"},
				{Name: "enough", Kind: "max_iterations", Class: "limit", Met: false, Progress: 0.4, Detail: "2/5"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	user := m.requests[0].Messages[1].Content
	for _, want := range []string{
		"goal: make the tests pass", `params (in ctx): {:package "./..."}`, "instructions (PROMPT.md):\nBe careful with the database.",
		"Previous iteration (2):", `plan:` + "\n" + `(do (step "Test"`, `- step "Test" failed: exit 1`,
		"- tests-green (command, success): not met, progress 50% (exit 1) — 2 tests failed",
		"- enough (max_iterations, limit): not met, progress 40% (2/5)", "Write the plan for iteration 3.",
		"- :shell.exec {:cmd string", "commands allowed: go", "  example: (call :ccos.echo {:message \"hello\"})", "  effects: none",
	} {
		if !strings.Contains(user, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if strings.Contains(user, ":fs.read") {
		t.Error("a denied capability is listed")
	}
	sys := m.requests[0].Messages[0].Content
	for _, want := range []string{"Output ONLY an RTFS plan wrapped in (do ...)", "Allowed forms: do, step, call, let, if", "Map keys MUST be colon-keywords", "Example 1:", "Example 2:", "Example 3:"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
}

// The system prompt's examples are plans that pass every check.
func TestPromptExamplesAreValid(t *testing.T) {
	t.Parallel()
	c := testChecker(t, governance.Constitution{})
	for i, ex := range strings.Split(systemA, "\nExample ")[1:] {
		src := ex[strings.Index(ex, "\n")+1:]
		if _, ps := c.check(src); len(ps) > 0 {
			t.Errorf("example %d: %+v", i+1, ps)
		}
	}
	body := systemB[strings.Index(systemB, "Example:\n")+len("Example:\n"):]
	if _, err := CompileIR([]byte(body), testRegistry(t)); err != nil {
		t.Errorf("Mode B example: %v", err)
	}
}

// The hint for an unknown capability suggests and lists only what the
// constitution permits, as the prompt's inventory does: pointing the model
// at a denied capability spends a repair on a governance refusal.
func TestUnknownCapabilityHintsOnlyPermitted(t *testing.T) {
	t.Parallel()
	con := governance.Constitution{Allow: []string{"ccos.*"}}
	for _, mode := range []struct{ name, first string }{
		{"A", `(do (step "Read" (call :fs.reed {:path "x"})))`},
		{"B", `{"steps": [{"id": "read", "capability": ":fs.reed", "args": {"path": "x"}}]}`},
	} {
		answers := []string{mode.first, validPlan}
		if mode.name == "B" {
			answers = []string{"no", "no", mode.first, `{"steps": [{"id": "greet", "capability": ":ccos.echo", "args": {"message": "hi"}}]}`}
		}
		resp, err := plan(t, newTestPipeline(t, script(answers...), 1, con), nil)
		if err != nil {
			t.Fatalf("mode %s: %v", mode.name, err)
		}
		var fix string
		for _, d := range resp.Diagnostics {
			if d.Stage == "capability" || strings.Contains(d.Message, "unknown capability") {
				fix = d.Fix
			}
		}
		if fix == "" || strings.Contains(fix, ":fs.") || strings.Contains(fix, ":shell.") || !strings.Contains(fix, ":ccos.echo") {
			t.Errorf("mode %s: fix = %q, want only permitted capabilities", mode.name, fix)
		}
	}
}

// A compiled plan that does not read under the plan limits (a string arg
// over 64 KiB) is still reported against the IR step it came from: the
// model never sees the compiled text, so "compiled plan 4:41" tells it
// nothing.
func TestModeBParseProblemNamesTheStep(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	p := NewPipeline(script(), PipelineOptions{Registry: reg}).(*pipeline)
	doc := `{"steps": [{"id": "a", "capability": "ccos.echo", "args": {"message": "hi"}},
		{"id": "b", "capability": "fs.write", "args": {"path": "x", "content": "` + strings.Repeat("x", planMaxLiteral+10) + `"}}]}`
	out := p.checkIR(doc)
	if len(out.diags) != 1 || out.diags[0].Stage != "parse" || out.diags[0].Pos != "steps[1]" {
		t.Fatalf("diagnostics = %+v, want one parse problem at steps[1]", out.diags)
	}
}
