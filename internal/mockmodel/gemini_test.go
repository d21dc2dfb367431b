package mockmodel

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
)

func geminiPost(t *testing.T, url, path, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// geminiSSE reads the data: events of a streamed reply.
func geminiSSE(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

const streamPath = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"

func geminiConversation(modelTurns int) string {
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "fix it"}}}}
	for range modelTurns {
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "x"}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "x"}}}})
	}
	b, _ := json.Marshal(map[string]any{"contents": contents})
	return string(b)
}

func TestGeminiTurnsFromTheConversation(t *testing.T) {
	g := &Gemini{Turns: GeminiRetry("go test ./...", Gemini503), Logf: t.Logf}
	srv := httptest.NewServer(g)
	defer srv.Close()
	defer g.Close()

	resp := geminiPost(t, srv.URL, streamPath, "k", geminiConversation(0))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct {
			Code   int
			Status string
		}
	}
	if resp.StatusCode != 503 || json.Unmarshal(b, &e) != nil || e.Error.Code != 503 || e.Error.Status != "UNAVAILABLE" {
		t.Fatalf("first attempt: %d %s", resp.StatusCode, b)
	}
	// The same conversation again is the same turn's next attempt.
	resp = geminiPost(t, srv.URL, streamPath, "k", geminiConversation(0))
	evs := geminiSSE(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || len(evs) < 2 {
		t.Fatalf("second attempt: %d, %d events", resp.StatusCode, len(evs))
	}
	var text strings.Builder
	var call map[string]any
	for _, ev := range evs {
		c := ev["candidates"].([]any)[0].(map[string]any)
		for _, p := range c["content"].(map[string]any)["parts"].([]any) {
			pm := p.(map[string]any)
			if s, ok := pm["text"].(string); ok && pm["thought"] == nil {
				text.WriteString(s)
			}
			if fc, ok := pm["functionCall"].(map[string]any); ok {
				call = fc
			}
		}
	}
	last := evs[len(evs)-1]
	u := last["usageMetadata"].(map[string]any)
	if text.String() != "I will read calc.go first.\n" || call["name"] != "read_file" ||
		last["candidates"].([]any)[0].(map[string]any)["finishReason"] != "STOP" || u["thoughtsTokenCount"] != float64(7) {
		t.Errorf("turn 0: text %q, call %v, last %v", text.String(), call, last)
	}
	if g.Attempts(0) != 2 {
		t.Errorf("attempts %d", g.Attempts(0))
	}
	// Two model turns in the conversation: the third turn, the shell.
	resp = geminiPost(t, srv.URL, streamPath, "k", geminiConversation(2))
	evs = geminiSSE(t, resp.Body)
	resp.Body.Close()
	if !strings.Contains(geminiJSON(evs), `"run_shell_command"`) {
		t.Errorf("turn 2: %s", geminiJSON(evs))
	}
	// Past the script: a 400 naming it.
	resp = geminiPost(t, srv.URL, streamPath, "k", geminiConversation(9))
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("past the script: %d", resp.StatusCode)
	}
}

func geminiJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestGeminiErrorsAsTheAPISendsThem(t *testing.T) {
	g := &Gemini{Turns: GeminiLimit("go test ./...", 2*time.Hour)}
	srv := httptest.NewServer(g)
	defer srv.Close()
	defer g.Close()
	resp := geminiPost(t, srv.URL, streamPath, "k", geminiConversation(0))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []map[string]any
		}
	}
	if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != 429 || e.Error.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	types := map[string]map[string]any{}
	for _, d := range e.Error.Details {
		types[d["@type"].(string)] = d
	}
	q := types["type.googleapis.com/google.rpc.QuotaFailure"]
	r := types["type.googleapis.com/google.rpc.RetryInfo"]
	if q == nil || !strings.Contains(geminiJSON(q), "PerDay") || r == nil || r["retryDelay"] != "7200s" ||
		!strings.Contains(e.Error.Message, "Please retry in 7200.0s.") {
		t.Errorf("details %s, message %q", geminiJSON(e.Error.Details), e.Error.Message)
	}

	for _, tc := range []struct {
		key, path string
		status    int
	}{
		{"", streamPath, 403},
		{GeminiInvalidKey, streamPath, 400},
		{"k", "/v1beta/models", 404},
		{"k", "/v1/other", 404},
	} {
		resp := geminiPost(t, srv.URL, tc.path, tc.key, geminiConversation(0))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%q %s: %d %s", tc.key, tc.path, resp.StatusCode, b)
		}
	}
}

func TestGeminiSideCallsFillTheirSchema(t *testing.T) {
	g := &Gemini{}
	srv := httptest.NewServer(g)
	defer srv.Close()
	body := `{"contents":[{"role":"user","parts":[{"text":"who speaks next?"}]}],"generationConfig":{"responseJsonSchema":` +
		`{"type":"object","properties":{"reasoning":{"type":"string"},"next_speaker":{"type":"string","enum":["model","user"]},"score":{"type":"integer"}}}}}`
	resp := geminiPost(t, srv.URL, "/v1beta/models/gemini-2.5-flash:generateContent", "k", body)
	var out struct {
		Candidates []struct {
			Content struct{ Parts []struct{ Text string } }
		}
	}
	err := json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || len(out.Candidates) != 1 {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out.Candidates[0].Content.Parts[0].Text), &got); err != nil ||
		got["next_speaker"] != "user" || got["reasoning"] != "mock" || got["score"] != float64(10) {
		t.Errorf("filled %v (%v)", got, err)
	}
}

func TestGeminiHangAndFlood(t *testing.T) {
	g := &Gemini{Turns: GeminiHang()}
	srv := httptest.NewServer(g)
	defer srv.Close()
	resp := geminiPost(t, srv.URL, streamPath, "k", geminiConversation(0))
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, "Let me think") {
		t.Fatalf("first chunk %q %v", first, err)
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.ReadAll(br)
		close(done)
	}()
	// Once the mock keeps the reply silent, only Close (or the client
	// leaving) ends it.
	eventually.True(t, "the reply hanging", func() bool { return g.Hanging() == 1 })
	select {
	case <-done:
		t.Fatal("the hanging reply ended by itself")
	default:
	}
	g.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second): // a hang guard
		t.Fatal("Close did not end the hanging reply")
	}
	if n := g.Hanging(); n != 0 {
		t.Errorf("%d replies still hang after Close", n)
	}
	resp.Body.Close()

	f := &Gemini{Turns: GeminiFlood(1 << 20)}
	fsrv := httptest.NewServer(f)
	defer fsrv.Close()
	resp = geminiPost(t, fsrv.URL, streamPath, "k", geminiConversation(0))
	n := 0
	lines := map[string]bool{}
	for _, ev := range geminiSSE(t, resp.Body) {
		for _, p := range ev["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any) {
			s, _ := p.(map[string]any)["text"].(string)
			n += len(s)
			for _, l := range strings.Split(s, "\n") {
				if len(l) > 20 && lines[l] {
					t.Fatalf("a line repeats (the CLI would stop it as a loop): %q", l)
				}
				lines[l] = true
			}
		}
	}
	resp.Body.Close()
	if want := len("Here is a lot of output:\n") + 1<<20; n != want {
		t.Errorf("flood of %d bytes, want %d", n, want)
	}
}
