package cli_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ralphloop/ralph/arbiter/oaitest"
	"github.com/ralphloop/ralph/internal/e2e"
)

// openaiConfig writes a ralph.toml for provider openai at baseURL.
func openaiConfig(t *testing.T, baseURL, extra string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "ralph.toml")
	writeFile(t, path, `[intent]
goal = "Say hello"

[model]
provider = "openai"
model = "gpt-4o-mini"
base_url = "`+baseURL+`"
api_key_env = "RALPH_E2E_KEY"
max_repairs = 0
[model.price]
input_per_mtok = 1.0
output_per_mtok = 2.0

[[stop]]
kind = "max_iterations"
max = 1
`+extra)
	return path
}

// OpenAIUnauthorized: a 401 ends `ralph run` with exit 2 and the fix,
// and the rejected key appears nowhere — not in the output, not in the
// chain, though the server echoed it back.
var _ = suite.Add(e2e.Test{Name: "OpenAIUnauthorized", Run: func(t *testing.T, e *e2e.E) {
	const key = "sk-e2e-wrong-4b1d9f7c2a"
	srv := oaitest.New(t, oaitest.Options{APIKey: "sk-e2e-the-right-one"}, oaitest.Text("(do 1)"))
	cfg := openaiConfig(t, srv.BaseURL, "")
	store := filepath.Join(t.TempDir(), "store")
	env := []string{"RALPH_E2E_KEY=" + key}

	out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Env(e.CleanEnv(env...)).Run()
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out+errOut, "set RALPH_E2E_KEY to a valid key") {
		t.Errorf("the fix is not printed:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	reqs := srv.Completions()
	if len(reqs) != 1 || reqs[0].Authorization() != key || reqs[0].Status != 401 {
		t.Errorf("requests = %+v", reqs)
	}
	export, exErr, exCode := e.Ralph("chain", "export", "--store", store).Env(e.CleanEnv(env...)).Run()
	if exCode != 0 || !strings.Contains(export, "LlmConsultation") {
		t.Fatalf("export: exit %d, %s\n%s", exCode, exErr, export)
	}
	for name, text := range map[string]string{"run stdout": out, "run stderr": errOut, "chain export": export} {
		if strings.Contains(text, key) || strings.Contains(text, "sk-e2e") {
			t.Errorf("%s contains the API key:\n%s", name, text)
		}
	}
	if _, _, code := e.Ralph("chain", "verify", "--store", store).Env(e.CleanEnv()).Run(); code != 0 {
		t.Errorf("chain verify: exit %d", code)
	}
}})

// OpenAIMissingKey: without the key the run does not start.
var _ = suite.Add(e2e.Test{Name: "OpenAIMissingKey", Run: func(t *testing.T, e *e2e.E) {
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text("(do 1)"))
	cfg := openaiConfig(t, srv.BaseURL, "")
	store := filepath.Join(t.TempDir(), "store")
	out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Env(e.CleanEnv()).Run()
	if code != 2 || !strings.Contains(errOut, "set RALPH_E2E_KEY") || out != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
	export, _, _ := e.Ralph("chain", "export", "--store", store).Env(e.CleanEnv()).Run()
	if strings.Contains(export, "RunStarted") {
		t.Errorf("a run was started:\n%s", export)
	}
}})

// OpenAIPlanAndLLMAsk: the model writes a plan that asks the model
// through llm.ask; the run finishes, both exchanges are recorded, the
// llm.ask call carries its cost, and the key is nowhere in the chain.
var _ = suite.Add(e2e.Test{Name: "OpenAIPlanAndLLMAsk", Run: func(t *testing.T, e *e2e.E) {
	const key = "sk-e2e-good-93c0e1f5b7"
	srv := oaitest.New(t, oaitest.Options{APIKey: key},
		oaitest.Text("Here is the plan:\n```clojure\n(do (step \"Ask\" (call :llm.ask {:prompt \"Say hello in French.\"})))\n```").WithUsage(3000, 40),
		oaitest.Text("Bonjour").WithUsage(1000, 500))
	cfg := openaiConfig(t, srv.BaseURL, "")
	store := filepath.Join(t.TempDir(), "store")
	env := []string{"RALPH_E2E_KEY=" + key}
	out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Env(e.CleanEnv(env...)).Run()
	if code != 3 { // max_iterations is a limit-class stop
		t.Fatalf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	reqs := srv.Completions()
	if len(reqs) != 2 || reqs[1].Messages[0].Content != "Say hello in French." || reqs[0].Model != "gpt-4o-mini" {
		t.Fatalf("requests = %+v", reqs)
	}
	export, _, _ := e.Ralph("chain", "export", "--store", store).Env(e.CleanEnv(env...)).Run()
	if strings.Contains(export, key) {
		t.Errorf("chain export contains the API key")
	}
	var call string
	for _, line := range strings.Split(export, "\n") {
		if strings.Contains(line, `"action_type":"CapabilityCall"`) && strings.Contains(line, `"function_name":"llm.ask"`) {
			call = line
		}
	}
	// 1000 prompt tokens at $1/M and 500 completion tokens at $2/M.
	if !strings.Contains(call, `"result":"Bonjour"`) || !strings.Contains(call, `"cost":0.002`) {
		t.Errorf("llm.ask call = %s", call)
	}
	if !strings.Contains(export, "LlmConsultation") || !strings.Contains(export, "PlanGenerated") {
		t.Errorf("the exchange is not recorded:\n%s", export)
	}
}})

// OpenAIStreamErrorEvent: a server that answers the streamed
// request with 200 and an SSE error event invalid_api_key (as some
// proxies and routers do) ends `ralph run` at once with exit 2 and the
// fix, as a 401 does, instead of retrying it as a transient failure.
var _ = suite.Add(e2e.Test{Name: "OpenAIStreamErrorEvent", Run: func(t *testing.T, e *e2e.E) {
	var posts, unstreamed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		posts.Add(1)
		body, _ := io.ReadAll(r.Body)
		const event = `{"error":{"message":"Incorrect API key provided: sk-e2e-***. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
		if !strings.Contains(string(body), `"stream":true`) {
			unstreamed.Add(1)
			http.Error(w, "this test serves streamed requests only", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "data: "+event+"\n\n")
	}))
	t.Cleanup(srv.Close)
	cfg := openaiConfig(t, srv.URL+"/v1", "")
	store := filepath.Join(t.TempDir(), "store")
	out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Env(e.CleanEnv("RALPH_E2E_KEY=sk-e2e-wrong-77aa")).Run()
	if code != 2 || !strings.Contains(out+errOut, "set RALPH_E2E_KEY to a valid key") {
		t.Fatalf("exit %d, want 2 with the fix\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n := posts.Load(); n != 1 || unstreamed.Load() != 0 {
		t.Errorf("%d requests (%d not streamed), want 1 streamed: the error event is not retried", n, unstreamed.Load())
	}
}})
