package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/arbiter/oaitest"
	"github.com/ralphloop/ralph/internal/e2e"
)

const planE2EIR = `{"steps": [{"id": "greet", "name": "Greet", "capability": ":ccos.echo", "args": {"message": "hello"}},
  {"id": "sum", "name": "Sum", "capability": ":ccos.math.add", "args": [2, 3]},
  {"id": "keep", "name": "Keep", "capability": ":kv.put", "args": {"key": "sum", "value": {"$rtfs": "(:result ctx)"}}, "deps": ["sum"]}]}`

// PlanOpenAI: `ralph plan` over the openai provider falls back to
// Mode B, prints the compiled plan with its diagnostics and an empty IR
// diff, reports each exchange on stderr, and executes nothing.
var _ = suite.Add(e2e.Test{Name: "PlanOpenAI", Run: func(t *testing.T, e *e2e.E) {
	const key = "sk-e2e-plan-5d1c7a3b90"
	srv := oaitest.New(t, oaitest.Options{APIKey: key}, oaitest.Text("I would rather explain: first greet, then add."), oaitest.Text(planE2EIR))
	cfg := openaiConfig(t, srv.BaseURL, "")
	env := []string{"RALPH_E2E_KEY=" + key}
	out, errOut, code := e.Ralph("plan", cfg, "--ir").Env(e.CleanEnv(env...)).Run()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"mode B (JSON IR compiled to RTFS) · 0 repairs (attempts A×1 B×1) · openai/gpt-4o-mini · ",
		"(do\n  (step-parallel\n    (step \"Greet\" (call :ccos.echo {:message \"hello\"}))\n    (step \"Sum\" (call :ccos.math.add 2 3)))\n  (step \"Keep\" (call :kv.put {:key \"sum\" :value (:result ctx)})))\n",
		"diagnostics:\n  A#1 extract: the answer has no (do …) form — answer with only an RTFS plan",
		"ir diff: none",
		"canonical IR:\n{\n  \"steps\": [",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "consulted openai/gpt-4o-mini: mode A attempt 1") || !strings.Contains(errOut, "consulted openai/gpt-4o-mini: mode B attempt 1") {
		t.Errorf("stderr:\n%s", errOut)
	}
	if strings.Contains(out+errOut, key) {
		t.Error("the key is printed")
	}
	if reqs := srv.Completions(); len(reqs) != 2 || reqs[1].ResponseFormat != "json_object" {
		t.Errorf("requests = %d", len(reqs))
	}
}})

// PlanOpenAIJSON: --json prints each exchange, then the plan.
var _ = suite.Add(e2e.Test{Name: "PlanOpenAIJSON", Run: func(t *testing.T, e *e2e.E) {
	const key = "sk-e2e-plan-json-0b2e4c6a"
	srv := oaitest.New(t, oaitest.Options{APIKey: key}, oaitest.Text("```clojure\n(do (step \"Hi\" (call :ccos.echo {:message \"hi\"})))\n```").WithUsage(100, 10))
	cfg := openaiConfig(t, srv.BaseURL, "")
	out, errOut, code := e.Ralph("plan", cfg, "--json").Env(e.CleanEnv("RALPH_E2E_KEY=" + key)).Run()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 || errOut != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var c struct {
		Event, Mode, Response string
		Attempt               int
		PromptSHA256          string `json:"prompt_sha256"`
		PromptTokens          int64  `json:"prompt_tokens"`
	}
	var p struct {
		Event, Mode, Source string
		Repairs             int
		IR                  struct{ Steps []struct{ ID string } }
		Usage               struct {
			CostUSD float64 `json:"cost_usd"`
		}
	}
	if json.Unmarshal([]byte(lines[0]), &c) != nil || json.Unmarshal([]byte(lines[1]), &p) != nil {
		t.Fatalf("not JSON lines:\n%s", out)
	}
	if c.Event != "consultation" || c.Mode != "A" || c.Attempt != 1 || len(c.PromptSHA256) != 64 || c.PromptTokens != 100 || !strings.Contains(c.Response, "```clojure") {
		t.Errorf("consultation = %+v", c)
	}
	if p.Event != "plan" || p.Mode != "A" || p.Repairs != 0 || len(p.IR.Steps) != 1 || p.IR.Steps[0].ID != "hi" || p.Usage.CostUSD != 120e-6 {
		t.Errorf("plan = %+v", p)
	}
}})

// PlanNoValidPlan: garbage in both modes is exit 2 with every
// problem listed and the reason on stderr.
var _ = suite.Add(e2e.Test{Name: "PlanNoValidPlan", Run: func(t *testing.T, e *e2e.E) {
	const key = "sk-e2e-plan-none-4f6e8a"
	srv := oaitest.New(t, oaitest.Options{APIKey: key}, oaitest.Text("no"), oaitest.Text(`{"steps": "none"}`))
	cfg := openaiConfig(t, srv.BaseURL, "")
	out, errOut, code := e.Ralph("plan", cfg).Env(e.CleanEnv("RALPH_E2E_KEY=" + key)).Run()
	if code != 2 || !strings.Contains(out, ": no plan\n") || !strings.Contains(out, "B#1 ir steps: must be an array of steps") ||
		!strings.Contains(errOut, "ralph: openai/gpt-4o-mini produced no valid plan in 1 RTFS and 1 JSON IR attempts") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}})

// RunRecordsPlanGeneration: a run whose first answer needs a repair
// records both exchanges as LlmConsultation actions and the outcome as
// PlanGenerated with its mode, repairs and canonical IR; the key is in
// none of them.
var _ = suite.Add(e2e.Test{Name: "RunRecordsPlanGeneration", Run: func(t *testing.T, e *e2e.E) {
	const key = "sk-e2e-run-plan-2a9d7e"
	srv := oaitest.New(t, oaitest.Options{APIKey: key},
		oaitest.Text(`(do (step "Greet" (call :ccos.shout {:message "hi"})))`),
		oaitest.Text(`(do (step "Greet" (call :ccos.echo {:message "hi"})))`))
	cfg := openaiConfig(t, srv.BaseURL, "")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, strings.Replace(string(b), "max_repairs = 0", "max_repairs = 1", 1))
	store := filepath.Join(t.TempDir(), "store")
	env := []string{"RALPH_E2E_KEY=" + key}
	out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Env(e.CleanEnv(env...)).Run()
	if code != 3 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	export, _, _ := e.Ralph("chain", "export", "--store", store).Env(e.CleanEnv(env...)).Run()
	if strings.Contains(export, key) {
		t.Fatal("the chain holds the API key")
	}
	var consultations int
	var gen map[string]any
	for _, line := range strings.Split(strings.TrimSpace(export), "\n") {
		var a map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		switch a["action_type"] {
		case "LlmConsultation":
			consultations++
		case "PlanGenerated":
			gen = a["metadata"].(map[string]any)
		}
	}
	if consultations != 2 || gen == nil {
		t.Fatalf("%d consultations, PlanGenerated %v", consultations, gen)
	}
	if gen["mode"] != "A" || gen["repairs"] != float64(1) || !strings.Contains(gen["diagnostics"].(string), "A#1 capability 1:25: unknown capability :ccos.shout") ||
		!strings.Contains(gen["ir"].(string), `"capability":":ccos.echo"`) {
		t.Fatalf("PlanGenerated metadata = %v", gen)
	}
}})
