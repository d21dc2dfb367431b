package mockmodel

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
)

// chatBody is a request as OpenCode's provider sends it: the system
// prompt naming the working directory, the user's prompt, assistants
// messages already answered (each followed by its tool result) and tools.
func chatBody(assistants int, tools bool) string {
	msgs := []any{
		map[string]any{"role": "system", "content": "You are opencode.\n<env>\n  Working directory: /work/calc\n</env>"},
		map[string]any{"role": "user", "content": "fix Add"},
	}
	for i := 0; i < assistants; i++ {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "ok"},
			map[string]any{"role": "tool", "tool_call_id": "x", "content": "done"})
	}
	req := map[string]any{"model": "mock-coder", "stream": true, "messages": msgs}
	if tools {
		req["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "read"}}}
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func postChat(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer mock-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// chunks reads an SSE stream into its chat.completion.chunk objects and
// reports whether it ended with [DONE].
func chatChunks(t *testing.T, r io.Reader) (out []map[string]any, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		if data == "[DONE]" {
			return out, true
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		out = append(out, c)
	}
	return out, false
}

func delta(c map[string]any) map[string]any {
	return c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
}

func TestOpenCodeFixTurns(t *testing.T) {
	h := NewOpenCode(OpenCodeScript("fix", 0, 0), t.Logf)
	srv := httptest.NewServer(h)
	defer srv.Close()

	// Turn 1 (one assistant message so far) edits calc.go under the
	// working directory the system prompt names.
	resp := postChat(t, srv.URL, chatBody(1, true))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	cs, done := chatChunks(t, resp.Body)
	if !done {
		t.Fatal("the stream did not end with [DONE]")
	}
	var args, finish string
	var usage map[string]any
	for _, c := range cs {
		if tc, ok := delta(c)["tool_calls"].([]any); ok {
			fn := tc[0].(map[string]any)["function"].(map[string]any)
			if fn["name"] != "edit" {
				t.Errorf("tool %v, want edit", fn["name"])
			}
			args = fn["arguments"].(string)
		}
		if f, ok := c["choices"].([]any)[0].(map[string]any)["finish_reason"].(string); ok {
			finish = f
		}
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
		}
	}
	if !strings.Contains(args, `"filePath":"/work/calc/calc.go"`) || !strings.Contains(args, `"newString":"return a + b"`) {
		t.Errorf("edit arguments %s", args)
	}
	if finish != "tool_calls" {
		t.Errorf("finish_reason %q, want tool_calls", finish)
	}
	if usage["prompt_tokens"] != 11400.0 || usage["prompt_tokens_details"].(map[string]any)["cached_tokens"] != 11000.0 {
		t.Errorf("usage %v", usage)
	}

	// The title request (no tools) is not a turn.
	resp = postChat(t, srv.URL, chatBody(0, false))
	cs, _ = chatChunks(t, resp.Body)
	if got := delta(cs[1])["content"]; got != "Fix Add" {
		t.Errorf("title %v", got)
	}
	// The last turn says it is done and stops.
	resp = postChat(t, srv.URL, chatBody(3, true))
	cs, _ = chatChunks(t, resp.Body)
	if got := delta(cs[1])["content"].(string); !strings.Contains(got, "<promise>COMPLETE</promise>") {
		t.Errorf("final text %q", got)
	}
	want := []string{"turn 1 attempt 1", "title", "turn 3 attempt 1"}
	if got := h.Requests(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("requests %q, want %q", got, want)
	}
}

func TestOpenCodeRetryThenFail(t *testing.T) {
	srv := httptest.NewServer(NewOpenCode(OpenCodeScript("retry-fail", 0, 0), t.Logf))
	defer srv.Close()
	// The same conversation, asked again: the 429 first, then the 400
	// for good.
	for i, want := range []int{429, 400, 400} {
		resp := postChat(t, srv.URL, chatBody(0, true))
		var body struct {
			Error struct{ Message, Type string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want || body.Error.Message == "" {
			t.Errorf("attempt %d: status %d, body %+v; want %d", i+1, resp.StatusCode, body, want)
		}
		if want == 429 && resp.Header.Get("retry-after-ms") != "300" {
			t.Errorf("429 without retry-after-ms: %v", resp.Header)
		}
	}
}

func TestOpenCodeLimitGivesTheExactWait(t *testing.T) {
	srv := httptest.NewServer(NewOpenCode(OpenCodeScript("limit", 3*time.Second, 0), t.Logf))
	defer srv.Close()
	resp := postChat(t, srv.URL, chatBody(0, true))
	if resp.StatusCode != 429 || resp.Header.Get("retry-after-ms") != "3000" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	if resp = postChat(t, srv.URL, chatBody(0, true)); resp.StatusCode != 200 {
		t.Fatalf("after the limit: status %d", resp.StatusCode)
	}
}

func TestOpenCodeUnknownPathIs404(t *testing.T) {
	var logged []string
	srv := httptest.NewServer(NewOpenCode(nil, func(f string, a ...any) { logged = append(logged, f) }))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || len(logged) != 1 {
		t.Fatalf("status %d, logged %q", resp.StatusCode, logged)
	}
}

func TestOpenCodeHangAndFlood(t *testing.T) {
	hanging := NewOpenCode(OpenCodeScript("hang", 0, 0), t.Logf)
	srv := httptest.NewServer(hanging)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(chatBody(0, true)))
	req.Header.Set("Authorization", "Bearer mock-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Once the mock keeps the stream silent, only the client leaving ends it.
	eventually.True(t, "the stream hanging", func() bool { return hanging.Hanging() == 1 })
	cancel()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.Contains(string(b), `"role":"assistant"`) || strings.Contains(string(b), "[DONE]") {
		t.Fatalf("a hung stream: read %q, %v", b, err)
	}

	flood := httptest.NewServer(NewOpenCode(OpenCodeScript("flood", 0, 100_000), t.Logf))
	defer flood.Close()
	cs, done := chatChunks(t, postChat(t, flood.URL, chatBody(0, true)).Body)
	n := 0
	for _, c := range cs {
		if s, ok := delta(c)["content"].(string); ok {
			n += len(s)
		}
	}
	if !done || n != 100_000 {
		t.Fatalf("flood of %d bytes (done %t), want 100000", n, done)
	}
}

func TestOpenCodeWantsABearerToken(t *testing.T) {
	srv := httptest.NewServer(NewOpenCode(OpenCodeScript("fix", 0, 0), t.Logf))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(0, true)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("status %d without a token, want 401", resp.StatusCode)
	}
}
