package mockmodel

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
)

// post sends a Responses request whose user message is prompt and which
// carries outputs tool outputs; it returns the status, the body (for an
// error) and the events (for a stream).
func postResponses(t *testing.T, ctx context.Context, url, key, prompt string, outputs int) (int, string, []sseEvent) {
	t.Helper()
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "instructions"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>x</environment_context>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
	}
	for i := range outputs {
		input = append(input, map[string]any{"type": "function_call_output", "call_id": "c" + string(rune('0'+i)), "output": "out"})
	}
	body, _ := json.Marshal(map[string]any{"model": "gpt-5.5", "stream": true, "input": input})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/responses", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("content-type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	evs := readSSE(t, resp.Body)
	return resp.StatusCode, "", evs
}

// items are the items of the events' response.output_item.done, as
// "type name".
func items(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		if e.name == "response.output_item.done" {
			it := e.data["item"].(map[string]any)
			s := it["type"].(string)
			if n, ok := it["name"].(string); ok {
				s += " " + n
			}
			out = append(out, s)
		}
	}
	return out
}

func newMock(t *testing.T, m *OpenAI) string {
	t.Helper()
	m.Logf = t.Logf
	m.APIKey = "k"
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestOpenAIFixTurns(t *testing.T) {
	t.Parallel()
	url := newMock(t, &OpenAI{Script: "fix"})
	ctx := context.Background()
	for turn, want := range [][]string{
		{"reasoning", "message", "function_call exec_command"},
		{"reasoning", "custom_tool_call apply_patch"},
		{"function_call exec_command"},
		{"message"},
	} {
		code, body, evs := postResponses(t, ctx, url, "k", "Make the tests pass.", turn)
		if code != 200 {
			t.Fatalf("turn %d: %d %s", turn, code, body)
		}
		if got := items(evs); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("turn %d: items %v, want %v", turn, got, want)
		}
		if evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
			t.Errorf("turn %d: events from %s to %s", turn, evs[0].name, evs[len(evs)-1].name)
		}
		usage := evs[len(evs)-1].data["response"].(map[string]any)["usage"].(map[string]any)
		if usage["input_tokens_details"].(map[string]any)["cached_tokens"] == nil ||
			usage["output_tokens_details"].(map[string]any)["reasoning_tokens"] == nil {
			t.Errorf("turn %d: usage %v", turn, usage)
		}
	}
	// The same conversation again is the same turn.
	_, _, evs := postResponses(t, ctx, url, "k", "Make the tests pass.", 1)
	if got := items(evs); len(got) != 2 || got[1] != "custom_tool_call apply_patch" {
		t.Errorf("a repeated request got %v", got)
	}
}

func TestOpenAIScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("unknown path and wrong key", func(t *testing.T) {
		url := newMock(t, &OpenAI{})
		resp, err := http.Get(url + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET /v1/models: %d", resp.StatusCode)
		}
		if code, body, _ := postResponses(t, ctx, url, "wrong", "hi", 0); code != 401 || !strings.Contains(body, "invalid_api_key") {
			t.Errorf("wrong key: %d %s", code, body)
		}
	})
	t.Run("retry then 400", func(t *testing.T) {
		url := newMock(t, &OpenAI{})
		p := "go mock:retry status=503 n=2 then=400"
		for i, want := range []int{503, 503, 400} {
			code, body, _ := postResponses(t, ctx, url, "k", p, 0)
			if code != want {
				t.Errorf("attempt %d: %d %s, want %d", i+1, code, body, want)
			}
			if code == 503 && !strings.Contains(body, "server_is_overloaded") {
				t.Errorf("503 body %s", body)
			}
		}
	})
	t.Run("limit lifts at its reset", func(t *testing.T) {
		var mu sync.Mutex
		now := time.Date(2026, 8, 8, 10, 0, 0, 0, time.UTC)
		url := newMock(t, &OpenAI{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
		code, body, _ := postResponses(t, ctx, url, "k", "mock:limit reset=5", 0)
		if code != 429 || !strings.Contains(body, `"type":"usage_limit_reached"`) || !strings.Contains(body, `"resets_at":1786183205`) {
			t.Errorf("limit: %d %s", code, body)
		}
		mu.Lock()
		now = now.Add(5 * time.Second)
		mu.Unlock()
		if code, body, _ := postResponses(t, ctx, url, "k", "mock:limit reset=5", 0); code != 200 {
			t.Errorf("after the reset: %d %s", code, body)
		}
	})
	t.Run("flood", func(t *testing.T) {
		url := newMock(t, &OpenAI{})
		_, _, evs := postResponses(t, ctx, url, "k", "mock:flood bytes=100000", 0)
		n := 0
		for _, e := range evs {
			if e.name == "response.output_text.delta" {
				n += len(e.data["delta"].(string))
			}
		}
		if n != 100000 {
			t.Errorf("flood streamed %d bytes", n)
		}
	})
	t.Run("hang", func(t *testing.T) {
		m := &OpenAI{}
		url := newMock(t, m)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Once the mock keeps the stream silent, only the client leaving
		// ends it: the client leaves then.
		hung := make(chan bool, 1)
		go func() { hung <- eventually.Poll(func() bool { return m.Hanging() == 1 }); cancel() }()
		_, _, evs := postResponses(t, ctx, url, "k", "mock:hang", 0)
		if !<-hung || len(evs) != 1 || evs[0].name != "response.created" {
			t.Errorf("hang: %d events (%v), or the stream never hung", len(evs), evs)
		}
	})
}
