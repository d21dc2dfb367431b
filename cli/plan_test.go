package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanCommandStaticAndScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	static := filepath.Join(dir, "static.toml")
	writeFile(t, static, `[intent]
goal = "greet"

[model]
provider = "static"

[plan]
rtfs = '''(do (step "Greet" (call :ccos.echo {:message "hi"})) (step "Add" (call :ccos.math.add 1 2)))'''
`)
	answers := filepath.Join(dir, "answers.jsonl")
	writeFile(t, answers, `{"content": "(do (step \"Only\" (call :ccos.echo {:message \"x\"})))", "prompt_tokens": 12, "completion_tokens": 3}`+"\n")
	script := filepath.Join(dir, "script.toml")
	writeFile(t, script, "[intent]\ngoal = \"g\"\n\n[model]\nprovider = \"script\"\nscript = \"answers.jsonl\"\n")
	broken := filepath.Join(dir, "broken.toml")
	writeFile(t, broken, "[intent]\ngoal = \"g\"\n\n[model]\nprovider = \"static\"\n\n[plan]\nrtfs = '(do (step \"A\"'\n")

	out, errOut, code := run(t, context.Background(), "", "plan", static)
	want := "static plan\n\n" + `(do (step "Greet" (call :ccos.echo {:message "hi"})) (step "Add" (call :ccos.math.add 1 2)))` + "\n"
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}

	out, _, code = run(t, context.Background(), "", "plan", static, "--ir")
	if code != 0 || !strings.Contains(out, "canonical IR:\n{\n  \"steps\": [") || !strings.Contains(out, `"id": "add"`) || !strings.Contains(out, "\"deps\": [\n        \"greet\"\n      ]") {
		t.Fatalf("--ir:\n%s", out)
	}

	out, _, code = run(t, context.Background(), "", "plan", script, "--json")
	var p struct {
		Event, Provider, Mode, Source string
		IR                            struct {
			Steps []struct{ ID, Capability string }
		}
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		}
		Diagnostics []any
	}
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Event != "plan" || p.Provider != "script" || p.Mode != "script" || len(p.IR.Steps) != 1 || p.IR.Steps[0].Capability != ":ccos.echo" || p.Usage.PromptTokens != 12 || p.Diagnostics == nil {
		t.Fatalf("--json = %+v", p)
	}

	_, errOut, code = run(t, context.Background(), "", "plan", broken)
	if code != 2 || !strings.Contains(errOut, "[plan].rtfs:1:5: ") {
		t.Fatalf("broken static plan: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = run(t, context.Background(), "", "plan", filepath.Join(dir, "missing.toml"))
	if code != 2 || errOut == "" {
		t.Fatalf("missing config: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = run(t, context.Background(), "", "plan", static, script)
	if code != 2 || !strings.Contains(errOut, "plan takes at most one CONFIG") {
		t.Fatalf("two configs: exit %d, stderr %q", code, errOut)
	}
}

// A provider that fails before any answer leaves no mode: the summary
// says so instead of starting with " plan".
func TestPlanCommandProviderFailsFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, "[intent]\ngoal = \"g\"\n\n[model]\nprovider = \"command\"\ncommand = [\"false\"]\n")
	out, errOut, code := run(t, context.Background(), "", "plan", cfg)
	if code != 1 || !strings.HasPrefix(out, "no answer · ") || !strings.Contains(errOut, "exited with status 1") {
		t.Fatalf("exit %d\nstdout:\n%q\nstderr:\n%s", code, out, errOut)
	}
}
