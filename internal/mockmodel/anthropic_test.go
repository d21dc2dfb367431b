package mockmodel

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
)

// conversation is a request body whose conversation has assistants
// assistant messages, offering one tool unless side.
func conversation(assistants int, side bool) string {
	msgs := []any{map[string]any{"role": "user", "content": "fix it"}}
	for i := 0; i < assistants; i++ {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t", "name": "Read", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t", "content": "ok"}}})
	}
	body := map[string]any{"model": "claude-test", "stream": true, "max_tokens": 100, "messages": msgs,
		"system": []any{map[string]any{"type": "text", "text": "Primary working directory: /work/calc\nIs a git repository: true"}}}
	if !side {
		body["tools"] = []any{map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object"}}}
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func post(t *testing.T, url, body string) (*http.Response, []sseEvent) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages?beta=true", strings.NewReader(body))
	req.Header.Set("x-api-key", "sk-ant-mock")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		var e map[string]any
		if err := json.Unmarshal(b, &e); err != nil || e["type"] != "error" {
			t.Fatalf("error body %q is not the API's", b)
		}
		return resp, []sseEvent{{name: "http-error", data: e}}
	}
	evs := readSSE(t, resp.Body)
	return resp, evs
}

// message rebuilds the streamed message: its text, tool call and input,
// stop reason and final usage.
func sseMessage(t *testing.T, evs []sseEvent) (text, tool string, input map[string]any, stop string, usage map[string]any) {
	t.Helper()
	var partial strings.Builder
	want := []string{"message_start", "ping"}
	for i, w := range want {
		if len(evs) <= i || evs[i].name != w {
			t.Fatalf("stream starts %v, want %v", evs, want)
		}
	}
	if evs[len(evs)-1].name != "message_stop" {
		t.Fatalf("stream ends with %s", evs[len(evs)-1].name)
	}
	for _, e := range evs {
		switch e.name {
		case "content_block_start":
			if b := e.data["content_block"].(map[string]any); b["type"] == "tool_use" {
				tool = b["name"].(string)
			}
		case "content_block_delta":
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				text += d["text"].(string)
			case "input_json_delta":
				partial.WriteString(d["partial_json"].(string))
			}
		case "message_delta":
			stop = e.data["delta"].(map[string]any)["stop_reason"].(string)
			usage = e.data["usage"].(map[string]any)
		}
	}
	if partial.Len() > 0 {
		if err := json.Unmarshal([]byte(partial.String()), &input); err != nil {
			t.Fatalf("tool input %q: %v", partial.String(), err)
		}
	}
	return
}

func TestAnthropicFix(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&Anthropic{Script: "fix", Logf: t.Logf})
	defer srv.Close()
	for step, want := range []struct{ tool, key, value string }{
		{"Read", "file_path", "/work/calc/calc.go"},
		{"Edit", "new_string", "return a + b"},
		{"Bash", "command", "go test ./..."},
		{"", "", ""},
	} {
		_, evs := post(t, srv.URL, conversation(step, false))
		text, tool, input, stop, usage := sseMessage(t, evs)
		if tool != want.tool || (tool != "" && input[want.key] != want.value) {
			t.Errorf("step %d: tool %s %v, want %s %s=%s", step, tool, input, want.tool, want.key, want.value)
		}
		if (tool != "") != (stop == "tool_use") || (tool == "" && (stop != "end_turn" || !strings.Contains(text, "a + b"))) {
			t.Errorf("step %d: stop %s, text %q", step, stop, text)
		}
		if usage["output_tokens"].(float64) <= 1 || usage["cache_read_input_tokens"].(float64) != float64(1000*step) {
			t.Errorf("step %d: usage %v", step, usage)
		}
		start := evs[0].data["message"].(map[string]any)["usage"].(map[string]any)
		if start["output_tokens"].(float64) != 1 {
			t.Errorf("message_start usage %v: the API starts at one output token", start)
		}
	}
	// A side call (no tools) gets a short text, whatever the script.
	_, evs := post(t, srv.URL, conversation(0, true))
	if text, tool, _, _, _ := sseMessage(t, evs); text != "Mock" || tool != "" {
		t.Errorf("side call: %q %q", text, tool)
	}
}

func TestAnthropicRetryAndLimit(t *testing.T) {
	t.Parallel()
	m := &Anthropic{Script: "retry", Transient: []int{429, 529, 503}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	for _, want := range []struct {
		status int
		typ    string
	}{{429, "rate_limit_error"}, {529, "overloaded_error"}, {503, "api_error"}} {
		resp, evs := post(t, srv.URL, conversation(0, false))
		errObj := evs[0].data["error"].(map[string]any)
		if resp.StatusCode != want.status || errObj["type"] != want.typ || resp.Header.Get("retry-after") == "" {
			t.Errorf("status %d %v, want %d %s with retry-after", resp.StatusCode, errObj, want.status, want.typ)
		}
	}
	if _, evs := post(t, srv.URL, conversation(0, false)); evs[0].name != "message_start" {
		t.Errorf("after the transients: %v", evs[0])
	}

	reset := time.Now().Add(time.Hour).Truncate(time.Second).Add(300 * time.Millisecond) // the headers name the next whole second
	l := httptest.NewServer(&Anthropic{Script: "limit", Reset: reset})
	defer l.Close()
	resp, evs := post(t, l.URL, conversation(0, false))
	if resp.StatusCode != 429 || resp.Header.Get("anthropic-ratelimit-unified-status") != "rejected" ||
		resp.Header.Get("anthropic-ratelimit-unified-reset") != strconv.FormatInt(reset.Unix()+1, 10) ||
		evs[0].data["error"].(map[string]any)["type"] != "rate_limit_error" {
		t.Errorf("limit: %d %v %v", resp.StatusCode, resp.Header, evs[0].data)
	}

	o := httptest.NewServer(&Anthropic{Script: "overloaded"})
	defer o.Close()
	if _, evs := post(t, o.URL, conversation(0, false)); evs[len(evs)-1].name != "error" ||
		evs[len(evs)-1].data["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Errorf("overloaded: the stream ends %v", evs[len(evs)-1])
	}
	if _, evs := post(t, o.URL, conversation(0, false)); evs[len(evs)-1].name != "message_stop" {
		t.Errorf("overloaded, again: the stream ends %v", evs[len(evs)-1])
	}

	f := httptest.NewServer(&Anthropic{Script: "retry-fatal"})
	defer f.Close()
	for _, want := range []int{429, 400, 400} {
		if resp, _ := post(t, f.URL, conversation(0, false)); resp.StatusCode != want {
			t.Errorf("retry-fatal: status %d, want %d", resp.StatusCode, want)
		}
	}
}

func TestAnthropicFloodHangAndErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&Anthropic{Script: "flood", Flood: 100_000})
	defer srv.Close()
	_, evs := post(t, srv.URL, conversation(0, false))
	if text, _, _, _, _ := sseMessage(t, evs); len(text) != 100_000 {
		t.Errorf("flood: %d bytes", len(text))
	}

	hanging := &Anthropic{Script: "hang"}
	h := httptest.NewServer(hanging)
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.URL+"/v1/messages", strings.NewReader(conversation(0, false)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Once the mock keeps the stream silent, only the client leaving ends it.
	eventually.True(t, "the stream hanging", func() bool { return hanging.Hanging() == 1 })
	cancel()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.Contains(string(b), "message_start") || strings.Contains(string(b), "message_stop") {
		t.Errorf("hang: the stream ended (%v) or never started: %q", err, b)
	}

	var logged []string
	u := httptest.NewServer(&Anthropic{Script: "fix", Logf: func(f string, a ...any) { logged = append(logged, f) }})
	defer u.Close()
	resp, err = http.Get(u.URL + "/api/oauth/profile")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || len(logged) != 1 {
		t.Errorf("unknown path: %d, logged %q", resp.StatusCode, logged)
	}
	req, _ = http.NewRequest(http.MethodPost, u.URL+"/v1/messages", strings.NewReader(conversation(0, false)))
	req.Header.Set("x-api-key", InvalidKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("invalid key: %d", resp.StatusCode)
	}
}
