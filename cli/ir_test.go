package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestIRCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	irFile := filepath.Join(dir, "plan.json")
	writeFile(t, irFile, `{"steps": [
  {"id": "sum", "name": "Sum", "capability": ":ccos.math.add", "args": [2, 3], "deps": []},
  {"id": "greet", "name": "Greet", "capability": ":ccos.echo", "args": {"message": "hi"}},
  {"id": "save", "name": "Save", "capability": ":kv.put", "args": {"key": "sum", "value": {"$rtfs": "(:result ctx)"}}, "deps": ["sum", "greet"],
   "options": {"retry": {"max": 2, "backoff_ms": 100}}}
]}`)
	compiled := `(do
  (step-parallel
    (step "Sum" (call :ccos.math.add 2 3))
    (step "Greet" (call :ccos.echo {:message "hi"})))
  (step "Save" ^{:retry {:backoff-ms 100 :max 2}} (call :kv.put {:key "sum" :value (:result ctx)})))
`
	planFile := filepath.Join(dir, "plan.rtfs")
	writeFile(t, planFile, compiled)
	openaiCfg := filepath.Join(dir, "openai.toml")
	writeFile(t, openaiCfg, "[intent]\ngoal = \"g\"\n\n[model]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\napi_key_env = \"RALPH_IR_TEST_UNSET_KEY\"\n")
	badPlan := filepath.Join(dir, "bad.rtfs")
	writeFile(t, badPlan, "(do\n  (step \"A\"")

	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantOut  string // exact stdout, when set
		wantErr  []string
		wantCode int
	}{
		{name: "compile file", args: []string{"ir", "compile", irFile}, wantOut: compiled},
		{name: "compile stdin", args: []string{"ir", "compile", "-"}, stdin: `{"steps": [{"id": "a", "name": "A", "capability": "ccos.echo", "args": ["x"]}]}`,
			wantOut: "(do\n  (step \"A\" (call :ccos.echo \"x\")))\n"},
		{name: "compile lists every problem", args: []string{"ir", "compile", "-"},
			stdin: `{"steps": [{"id": "a", "capability": ":ccos.echo", "args": {"message": 1}}, {"id": "b", "capability": ":nope", "deps": ["c"]}]}`,
			wantErr: []string{`ralph: <stdin>: steps[0].args: ccos.echo: :message expected string, got int; pass {:message string}`,
				`<stdin>: steps[1].deps[0]: no step has id "c"`, `<stdin>: steps[1].capability: unknown capability :nope`},
			wantCode: 2},
		{name: "compile names the cycle", args: []string{"ir", "compile", "-"},
			stdin:    `{"steps": [{"id": "a", "capability": ":ccos.echo", "args": ["x"], "deps": ["b"]}, {"id": "b", "capability": ":ccos.echo", "args": ["y"], "deps": ["a"]}]}`,
			wantErr:  []string{`<stdin>: steps[1].deps: the deps form a cycle: a → b → a; remove "a" from the deps of "b"`},
			wantCode: 2},
		{name: "compile with a model config needs no key and knows llm.ask", args: []string{"ir", "compile", "--config", openaiCfg, "-"},
			stdin: `{"steps": [{"id": "ask", "name": "Ask", "capability": ":llm.ask", "args": {"prompt": "hi"}}]}`, wantOut: "(do\n  (step \"Ask\" (call :llm.ask {:prompt \"hi\"})))\n"},
		{name: "compile bad JSON", args: []string{"ir", "compile", "-"}, stdin: "{\n  \"steps\": [}", wantErr: []string{"ralph: <stdin>:2:13: not valid JSON"}, wantCode: 2},
		{name: "compile missing file", args: []string{"ir", "compile", filepath.Join(dir, "nope.json")}, wantErr: []string{"no such file"}, wantCode: 2},
		{name: "compile needs one input", args: []string{"ir", "compile"}, wantErr: []string{"ir compile takes one FILE"}, wantCode: 2},
		{name: "canon bad RTFS", args: []string{"ir", "canon", badPlan}, wantErr: []string{badPlan + ":2:3: "}, wantCode: 2},
		{name: "canon needs one input", args: []string{"ir", "canon", "a", "b"}, wantErr: []string{"ir canon takes one FILE"}, wantCode: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := run(t, context.Background(), tc.stdin, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out, errOut)
			}
			if tc.wantOut != "" && out != tc.wantOut {
				t.Fatalf("stdout:\n%s\nwant:\n%s", out, tc.wantOut)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut, w) {
					t.Fatalf("stderr:\n%s\nlacks %q", errOut, w)
				}
			}
			if tc.wantErr == nil && errOut != "" {
				t.Fatalf("stderr: %s", errOut)
			}
		})
	}
}

// ir canon of a compiled plan gives back the IR's steps and deps; canon is
// deterministic.
func TestIRCanon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	planFile := filepath.Join(dir, "plan.rtfs")
	writeFile(t, planFile, `(do (step "Sum" (call :ccos.math.add 2 3))
	  (step-parallel (step "A" (call :ccos.echo "a")) (step "B" ^{:timeout-ms 50} (call :ccos.echo {:message "b"})))
	  (step "Save" (call :kv.put {:key "k" :value :done})))`)
	out, errOut, code := run(t, context.Background(), "", "ir", "canon", planFile)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ir struct {
		Steps []struct {
			ID, Capability string
			Deps           []string
			Args           json.RawMessage
			Options        map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &ir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []string
	for _, s := range ir.Steps {
		var args bytes.Buffer
		if err := json.Compact(&args, s.Args); err != nil {
			t.Fatal(err)
		}
		got = append(got, s.ID+"<-"+strings.Join(s.Deps, ",")+" "+s.Capability+" "+args.String())
	}
	want := `sum<- :ccos.math.add [2,3]|a<-sum :ccos.echo ["a"]|b<-sum :ccos.echo {"message":"b"}|save<-a,b :kv.put {"key":"k","value":{"$rtfs":":done"}}`
	if strings.Join(got, "|") != want {
		t.Fatalf("canonical IR:\n%s\nwant %s", strings.Join(got, "|"), want)
	}
	if ir.Steps[2].Options["timeout_ms"] != float64(50) {
		t.Fatalf("options = %v", ir.Steps[2].Options)
	}
	again, _, _ := run(t, context.Background(), "", "ir", "canon", planFile)
	if again != out {
		t.Fatal("canon is not deterministic")
	}
}
