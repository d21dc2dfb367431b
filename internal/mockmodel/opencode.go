package mockmodel

// OpenCode's model endpoint. OpenCode (opencode-ai 1.18.33) is pointed at
// it as a custom provider whose npm package is "@ai-sdk/openai-compatible"
// (bundled in its binary, so nothing is installed at run time): the SDK
// POSTs {model, messages, tools, tool_choice, stream: true, stream_options:
// {include_usage: true}} to <baseURL>/chat/completions with "Authorization:
// Bearer <apiKey>", and reads "data: <chunk>" lines until "data: [DONE]".
// Each chunk is a chat.completion.chunk whose choices[0].delta carries
// content, reasoning_content or tool_calls; the last one carries
// finish_reason and usage (prompt_tokens, completion_tokens,
// prompt_tokens_details.cached_tokens,
// completion_tokens_details.reasoning_tokens). An error is a non-2xx status
// with {"error": {"message", "type", "code"}}; OpenCode retries statuses
// 408, 409, 429 and ≥ 500 itself, waiting retry-after-ms or retry-after
// when the response has them.
//
// OpenCode also asks the same model for the session's title, in a request
// with no tools; that request is answered with a short title and is not a
// turn of the script.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// OpenCodeCall is one tool call of a scripted turn: the tool's name as
// OpenCode declares it (read, edit, write, bash, …) and its arguments.
// In Args, "{dir}" stands for the working directory OpenCode reports in
// its system prompt.
type OpenCodeCall struct {
	Name string
	Args map[string]any
}

// OpenCodeError is one HTTP error response: status, headers and body.
type OpenCodeError struct {
	Status  int
	Header  map[string]string
	Message string // the body's error.message
	Type    string // the body's error.type
	Code    string // the body's error.code
}

// OpenCodeTurn is the model's answer to one request of the conversation.
type OpenCodeTurn struct {
	// Errors are answered, one per attempt, before the turn succeeds:
	// a retried request (same conversation) gets the next one.
	Errors []OpenCodeError
	// Fail ends the turn with this error once Errors are spent (every
	// further attempt gets it too).
	Fail *OpenCodeError
	// Hang: the stream starts (role chunk) and then sends nothing until
	// the client goes away.
	Hang      bool
	Reasoning string
	Text      string
	// Flood appends this many bytes of text, in 16 KiB chunks.
	Flood int
	Calls []OpenCodeCall
	// Usage reported on the last chunk (zero: a small default).
	PromptTokens, CompletionTokens, CachedTokens, ReasoningTokens int
}

// OpenCode is the handler. Turn i of the script answers the request whose
// conversation holds i assistant messages.
type OpenCode struct {
	script []OpenCodeTurn
	logf   func(format string, args ...any)

	mu       sync.Mutex
	attempts map[int]int // turn → requests seen
	requests []string    // one line per request: "turn 2 attempt 1", "title", …
	silent               // Hanging: the Hang replies waiting now
}

// NewOpenCode returns a handler answering from script; logf (nil: none)
// is told of every request, and of unknown paths.
func NewOpenCode(script []OpenCodeTurn, logf func(format string, args ...any)) *OpenCode {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &OpenCode{script: script, logf: logf, attempts: map[int]int{}}
}

// Requests returns what was asked so far, one line per request.
func (o *OpenCode) Requests() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.requests...)
}

func (o *OpenCode) note(s string) {
	o.mu.Lock()
	o.requests = append(o.requests, s)
	o.mu.Unlock()
	o.logf("mockmodel opencode: %s", s)
}

type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

var workDirRE = regexp.MustCompile(`Working directory: (\S+)`)

func (o *OpenCode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		o.note(fmt.Sprintf("unknown %s %s: 404", r.Method, r.URL.Path))
		writeChatError(w, OpenCodeError{Status: 404, Message: "unknown path " + r.URL.Path, Type: "invalid_request_error"})
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		o.note("no bearer token: 401")
		writeChatError(w, OpenCodeError{Status: 401, Type: "invalid_request_error",
			Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth."})
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		o.note("bad request body: " + err.Error())
		writeChatError(w, OpenCodeError{Status: 400, Message: "bad request body: " + err.Error(), Type: "invalid_request_error"})
		return
	}
	if !req.Stream {
		o.note("not streamed: 400")
		writeChatError(w, OpenCodeError{Status: 400, Type: "invalid_request_error", Message: "this mock only streams; set stream: true"})
		return
	}
	if len(req.Tools) == 0 { // the session title
		o.note("title")
		o.stream(w, r, req.Model, OpenCodeTurn{Text: "Fix Add"}, "")
		return
	}
	dir := ""
	assistants := 0
	for _, m := range req.Messages {
		switch m.Role {
		case "assistant":
			assistants++
		case "system":
			var s string
			if json.Unmarshal(m.Content, &s) == nil {
				if mm := workDirRE.FindStringSubmatch(s); mm != nil && dir == "" {
					dir = mm[1]
				}
			}
		}
	}
	o.mu.Lock()
	o.attempts[assistants]++
	attempt := o.attempts[assistants]
	o.mu.Unlock()
	o.note(fmt.Sprintf("turn %d attempt %d", assistants, attempt))
	if assistants >= len(o.script) {
		o.stream(w, r, req.Model, OpenCodeTurn{Text: "Done."}, dir)
		return
	}
	t := o.script[assistants]
	if attempt <= len(t.Errors) {
		writeChatError(w, t.Errors[attempt-1])
		return
	}
	if t.Fail != nil {
		writeChatError(w, *t.Fail)
		return
	}
	o.stream(w, r, req.Model, t, dir)
}

func writeChatError(w http.ResponseWriter, e OpenCodeError) {
	for k, v := range e.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	body := map[string]any{"message": e.Message, "type": e.Type, "code": nil}
	if e.Code != "" {
		body["code"] = e.Code
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": body})
}

// stream answers t as chat.completion.chunk events.
func (o *OpenCode) stream(w http.ResponseWriter, r *http.Request, model string, t OpenCodeTurn, dir string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	c := &chunkWriter{w: w, bw: bufio.NewWriterSize(w, 64<<10), model: model,
		id: fmt.Sprintf("chatcmpl-mock-%d", time.Now().UnixNano())}
	c.send(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	c.flush()
	if t.Hang {
		defer o.enter()()
		<-r.Context().Done()
		return
	}
	if t.Reasoning != "" {
		c.send(map[string]any{"reasoning_content": t.Reasoning}, nil, nil)
	}
	if t.Text != "" {
		c.send(map[string]any{"content": t.Text}, nil, nil)
	}
	if t.Flood > 0 && !c.flood(r.Context(), t.Flood) {
		return
	}
	for i, call := range t.Calls {
		args, _ := json.Marshal(call.Args)
		a := strings.ReplaceAll(string(args), "{dir}", dir)
		c.send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%s", i, call.Name),
			"type": "function", "function": map[string]any{"name": call.Name, "arguments": a}}}}, nil, nil)
	}
	finish := "stop"
	if len(t.Calls) > 0 {
		finish = "tool_calls"
	}
	c.send(map[string]any{}, finish, openCodeUsage(t))
	_, _ = c.bw.WriteString("data: [DONE]\n\n")
	c.flush()
}

// chunkWriter writes the chat.completion.chunk events of one answer.
type chunkWriter struct {
	w         http.ResponseWriter
	bw        *bufio.Writer
	id, model string
}

// send writes one event: its delta, finish reason and usage (nil: none).
func (c *chunkWriter) send(delta map[string]any, finish any, usage any) {
	chunk := map[string]any{"id": c.id, "object": "chat.completion.chunk", "created": 1764115200, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	if usage != nil {
		chunk["usage"] = usage
	}
	b, _ := json.Marshal(chunk)
	_, _ = c.bw.WriteString("data: ")
	_, _ = c.bw.Write(b)
	_, _ = c.bw.WriteString("\n\n")
}

// flush sends the events written so far to the client.
func (c *chunkWriter) flush() {
	_ = c.bw.Flush()
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
}

// flood writes size bytes of text in chunks of about 16 KiB; false if the
// request ended first.
func (c *chunkWriter) flood(ctx context.Context, size int) bool {
	line := strings.Repeat("flood text, line after line. ", 2) + "\n"
	chunk := strings.Repeat(line, 16<<10/len(line))
	for left := size; left > 0; left -= len(chunk) {
		if left < len(chunk) {
			chunk = chunk[:left]
		}
		c.send(map[string]any{"content": chunk}, nil, nil)
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// openCodeUsage is the usage of t's answer; a turn that gives no token
// counts used 1200 prompt and 40 completion tokens.
func openCodeUsage(t OpenCodeTurn) map[string]any {
	prompt, completion := t.PromptTokens, t.CompletionTokens
	if prompt == 0 && completion == 0 {
		prompt, completion = 1200, 40
	}
	return map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
		"prompt_tokens_details":     map[string]any{"cached_tokens": t.CachedTokens},
		"completion_tokens_details": map[string]any{"reasoning_tokens": t.ReasoningTokens}}
}

// OpenCodeScript returns the named script for a Go module whose Add
// subtracts (calc.go) and whose test command is `go test ./...`:
//
//   - fix: read calc.go, edit Add to return a + b, run the tests with the
//     shell tool, then a final answer;
//   - denied: the same edit, then a final answer (run without the
//     permission to edit, it is refused);
//   - limit: a 429 whose body says the usage limit is reached until a time
//     and whose retry-after-ms header gives the wait exactly (wait), then fix;
//   - limit-final: eight such 429s (the text names no time), more than
//     OpenCode retries;
//   - retry: two 429s and a 503 "overloaded", then fix;
//   - retry-fail: a 429, then a 400 every attempt after;
//   - unauth: every request is refused with 401 "Invalid API key";
//   - hang: the stream starts and goes silent;
//   - sleep: the shell tool runs `sleep 300`;
//   - flood: a text answer of size bytes.
//
// nil for an unknown name.
func OpenCodeScript(name string, wait time.Duration, size int) []OpenCodeTurn {
	fix := openCodeFix()
	if failFirst := openCodeFailFirst(name, wait); failFirst != nil {
		s := append([]OpenCodeTurn(nil), fix...)
		failFirst(&s[0])
		return s
	}
	switch name {
	case "fix":
		return fix
	case "denied":
		return []OpenCodeTurn{fix[0], fix[1],
			{Text: "I could not edit calc.go: permission was refused.", PromptTokens: 11500, CompletionTokens: 20}}
	case "unauth":
		return []OpenCodeTurn{{Fail: &OpenCodeError{Status: 401, Type: "authentication_error",
			Message: "Invalid API key"}}}
	case "hang":
		return []OpenCodeTurn{{Hang: true}}
	case "sleep":
		return []OpenCodeTurn{
			{Text: "Running a long command.", Calls: []OpenCodeCall{{Name: "bash",
				Args: map[string]any{"command": "sleep 300", "description": "Wait"}}}},
			{Text: "Done waiting."},
		}
	case "flood":
		return []OpenCodeTurn{{Flood: size}}
	}
	return nil
}

// openCodeFix is the fix script: read calc.go, edit it, run the tests,
// answer.
func openCodeFix() []OpenCodeTurn {
	return []OpenCodeTurn{
		{Reasoning: "Read calc.go first.", Text: "Let me look at calc.go.",
			Calls:        []OpenCodeCall{{Name: "read", Args: map[string]any{"filePath": "{dir}/calc.go"}}},
			PromptTokens: 11000, CompletionTokens: 60, CachedTokens: 9000, ReasoningTokens: 12},
		{Text: "Add subtracts; it should add.",
			Calls: []OpenCodeCall{{Name: "edit", Args: map[string]any{"filePath": "{dir}/calc.go",
				"oldString": "return a - b", "newString": "return a + b"}}},
			PromptTokens: 11400, CompletionTokens: 80, CachedTokens: 11000},
		{Calls: []OpenCodeCall{{Name: "bash", Args: map[string]any{"command": "go test ./...",
			"description": "Run the tests"}}},
			PromptTokens: 11600, CompletionTokens: 30, CachedTokens: 11400},
		{Text: "Add now returns a + b and the tests pass.\n<promise>COMPLETE</promise>",
			PromptTokens: 11800, CompletionTokens: 25, CachedTokens: 11600},
	}
}

// openCodeFailFirst is what the script name (limit, limit-final, retry,
// retry-fail: the fix script whose first request fails first) sets on the
// fix script's first turn, or nil for another name.
func openCodeFailFirst(name string, wait time.Duration) func(*OpenCodeTurn) {
	switch name {
	case "limit":
		reset := time.Now().Add(wait).UTC()
		return func(t *OpenCodeTurn) {
			t.Errors = []OpenCodeError{{Status: 429, Type: "usage_limit_reached",
				Header:  map[string]string{"retry-after-ms": fmt.Sprint(wait.Milliseconds())},
				Message: "You have reached your usage limit. It resets at " + reset.Format(time.RFC3339) + "."}}
		}
	case "limit-final":
		// More 429s than OpenCode retries (5): it gives up, and its error
		// event carries the response's headers.
		return func(t *OpenCodeTurn) {
			for i := 0; i < 8; i++ {
				t.Errors = append(t.Errors, OpenCodeError{Status: 429, Type: "usage_limit_reached",
					Header:  map[string]string{"retry-after-ms": fmt.Sprint(wait.Milliseconds())},
					Message: "You have reached your usage limit. Try again later."})
			}
		}
	case "retry":
		return func(t *OpenCodeTurn) {
			t.Errors = []OpenCodeError{
				{Status: 429, Type: "rate_limit_error", Message: "Too Many Requests", Header: map[string]string{"retry-after-ms": "300"}},
				{Status: 429, Type: "rate_limit_error", Message: "Too Many Requests", Header: map[string]string{"retry-after-ms": "300"}},
				{Status: 503, Type: "overloaded_error", Message: "The model is overloaded. Please try again later.",
					Header: map[string]string{"retry-after-ms": "300"}},
			}
		}
	case "retry-fail":
		return func(t *OpenCodeTurn) {
			t.Errors = []OpenCodeError{{Status: 429, Type: "rate_limit_error", Message: "Too Many Requests",
				Header: map[string]string{"retry-after-ms": "300"}}}
			t.Fail = &OpenCodeError{Status: 400, Type: "invalid_request_error",
				Message: "messages: the request is malformed (mock)"}
		}
	}
	return nil
}
