package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Anthropic is an http.Handler speaking the Anthropic Messages API as
// Claude Code uses it: POST /v1/messages with stream true, answered as
// server-sent events (message_start, content_block_start, ping,
// content_block_delta with text_delta or input_json_delta,
// content_block_stop, message_delta with the usage and stop_reason,
// message_stop), errors as {"type":"error","error":{"type","message"}}
// with the API's statuses, and the unified rate-limit headers
// (anthropic-ratelimit-unified-*) a subscription's limits are read from.
//
// Each request of the agent's loop (one that offers tools) is answered by
// the turn of Script at its step: the number of assistant messages in the
// conversation it carries, so a retried request gets the same turn. Other
// requests (Claude Code's side calls: titles, quota checks) get a short
// text. Scripts:
//
//   - "fix": Read calc.go, Edit it so Add returns a + b, run Test with
//     Bash, then a final text;
//   - "denied": the same turns (run without permission to see the denial);
//   - "limit": the first turn is refused with a usage limit (429, unified
//     status rejected, reset at Reset, exactly, and in the message as a
//     time of day) until Reset, then "fix";
//   - "retry": the first turn fails once with each status of Transient
//     (default 429, 503, 529: rate limit, overloaded), then "fix";
//   - "retry-fatal": the first turn fails with a 429, then with a 400
//     invalid_request_error;
//   - "overloaded": the first turn's stream starts, then ends with an
//     error event (overloaded_error), as the API does when it is
//     overloaded mid-stream; then "fix";
//   - "hang": the stream starts and then goes silent until the client
//     leaves (or Hang passes);
//   - "sleep": Bash runs `timeout 301 sleep 300`, which prints nothing
//     for five minutes (Claude Code 2.1.332 refuses a standalone `sleep
//     N` as a way to wait; a sleep under timeout is a command);
//   - "flood": a final text of Flood bytes.
//
// Paths it does not know get a 404 and are reported to Logf.
type Anthropic struct {
	Script    string
	Transient []int         // retry: the statuses of the failures before success
	Reset     time.Time     // limit: when it lifts (zero: two seconds after the first request)
	Flood     int           // flood: bytes of text (zero: 1 MiB)
	Test      string        // the test command "fix" runs (zero: go test ./...)
	Hang      time.Duration // hang: the longest the stream stays silent (zero: two minutes)
	Logf      func(format string, args ...any)

	mu       sync.Mutex
	attempts map[int]int // the tries of each step so far
	requests int
	silent   // Hanging: the hang replies waiting now
}

// Requests is how many requests to /v1/messages the server has answered.
func (a *Anthropic) Requests() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests
}

func (a *Anthropic) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// SleepCommand is the "sleep" script's Bash command.
const SleepCommand = "timeout 301 sleep 300"

// InvalidKey is an API key the server refuses as the API refuses a wrong
// one: 401 authentication_error.
const InvalidKey = "sk-ant-mock-invalid"

// anthropicRequest is what the server reads of a request body.
type anthropicRequest struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	System   json.RawMessage   `json:"system"`
	Messages []json.RawMessage `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type anthropicMessage struct {
	Role string `json:"role"`
}

func (a *Anthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		a.messages(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"input_tokens":100}`)
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && r.URL.Path == "/"):
		w.WriteHeader(http.StatusOK)
	default:
		a.logf("mockmodel: anthropic: unknown %s %s", r.Method, r.URL.String())
		apiError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.URL.Path, nil)
	}
}

// apiError writes the API's error body with status.
func apiError(w http.ResponseWriter, status int, typ, msg string, h http.Header) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_mock")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	_, _ = w.Write(b)
}

var workingDir = regexp.MustCompile(`Primary working directory: ([^\n"\\]+)`)

// messages answers POST /v1/messages: it counts the step (the assistant
// turns so far) and its attempt, then answers as the script says.
func (a *Anthropic) messages(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("x-api-key") == InvalidKey {
		apiError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", nil)
		return
	}
	var req anthropicRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "body: "+err.Error(), nil)
		return
	}
	step := 0
	for _, m := range req.Messages {
		var msg anthropicMessage
		if json.Unmarshal(m, &msg) == nil && msg.Role == "assistant" {
			step++
		}
	}
	attempt, reset := a.count(step, len(req.Tools) > 0)

	s := &sse{w: w, model: req.Model, id: fmt.Sprintf("msg_mock_%s_%d_%d", a.Script, step, attempt)}
	if len(req.Tools) == 0 { // a side call
		s.reply(turn{text: "Mock"}, step)
		return
	}
	wd := requestWorkDir(&req)
	a.logf("mockmodel: anthropic: %s step %d attempt %d (%s)", a.Script, step, attempt, wd)
	if a.misbehave(w, r, s, step, attempt, reset) {
		return
	}
	s.reply(a.fixTurn(step, wd), step)
}

// count counts a request and, for a call with tools, the attempt at its
// step; it returns that attempt and when the "limit" script's limit lifts.
func (a *Anthropic) count(step int, tools bool) (attempt int, reset time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests++
	if a.attempts == nil {
		a.attempts = map[int]int{}
	}
	attempt = a.attempts[step]
	if tools {
		a.attempts[step]++
	}
	if a.Script == "limit" && a.Reset.IsZero() {
		a.Reset = time.Now().Add(2 * time.Second)
	}
	return attempt, a.Reset
}

// requestWorkDir is the working directory Claude Code names in the system
// prompt or, failing that, in a message.
func requestWorkDir(req *anthropicRequest) string {
	wd := ""
	if m := workingDir.FindSubmatch(req.System); m != nil {
		wd = strings.TrimRight(string(m[1]), " ")
	}
	for _, msg := range req.Messages { // 2.1.197 names it in the first message, 2.1.332 in a later one
		if m := workingDir.FindSubmatch(msg); m != nil && wd == "" {
			wd = string(m[1])
		}
	}
	return wd
}

// misbehave answers as the script says when it is not the plain fix (a
// limit, transient errors, a stream that breaks or hangs, a sleep, a
// flood) and reports whether it answered; the scripts that fail only at
// first go on as "fix" afterwards.
func (a *Anthropic) misbehave(w http.ResponseWriter, r *http.Request, s *sse, step, attempt int, reset time.Time) bool {
	switch a.Script {
	case "limit":
		if step == 0 && time.Now().Before(reset) {
			a.usageLimit(w, reset)
			return true
		}
	case "retry":
		statuses := a.Transient
		if len(statuses) == 0 {
			statuses = []int{429, 503, 529}
		}
		if step == 0 && attempt < len(statuses) {
			transient(w, statuses[attempt])
			return true
		}
	case "retry-fatal":
		if step == 0 {
			if attempt == 0 {
				transient(w, 429)
			} else {
				apiError(w, http.StatusBadRequest, "invalid_request_error", "messages.0.content: the mock model rejects this request", nil)
			}
			return true
		}
	case "overloaded":
		if step == 0 && attempt == 0 {
			s.start(step)
			s.event("ping", `{"type": "ping"}`)
			s.event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return true
		}
	case "hang":
		a.hang(r, s, step)
		return true
	case "sleep":
		if step == 0 {
			s.reply(turn{tool: "Bash", input: map[string]any{"command": SleepCommand, "description": "Wait"}}, step)
		} else {
			s.reply(turn{text: "Slept."}, step)
		}
		return true
	case "flood":
		n := a.Flood
		if n <= 0 {
			n = 1 << 20
		}
		s.reply(turn{text: flood(n)}, step)
		return true
	}
	return false
}

// hang starts a reply and then sends nothing more until the client leaves
// or Hang (two minutes by default) has passed.
func (a *Anthropic) hang(r *http.Request, s *sse, step int) {
	s.start(step)
	s.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	s.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Thinking"}}`)
	hang := a.Hang
	if hang <= 0 {
		hang = 2 * time.Minute
	}
	defer a.enter()()
	select { // bounded, so that a client that never leaves cannot block the server's Close
	case <-r.Context().Done():
	case <-time.After(hang):
	}
}

// fixTurn is the fix script's turn at step: read calc.go, edit it, run
// the tests, say it is done.
func (a *Anthropic) fixTurn(step int, wd string) turn {
	test := a.Test
	if test == "" {
		test = "go test ./..."
	}
	file := "calc.go"
	if wd != "" {
		file = strings.TrimSuffix(wd, "/") + "/calc.go"
	}
	switch step {
	case 0:
		return turn{text: "I'll read calc.go.", tool: "Read", input: map[string]any{"file_path": file}}
	case 1:
		return turn{tool: "Edit", input: map[string]any{"file_path": file, "old_string": "return a - b", "new_string": "return a + b", "replace_all": false}}
	case 2:
		return turn{tool: "Bash", input: map[string]any{"command": test, "description": "Run the tests"}}
	default:
		return turn{text: "Add now returns a + b; go test passes."}
	}
}

// usageLimit refuses a request as the API refuses a subscription whose
// usage is spent: 429, the unified headers with the exact reset, and a
// rate_limit_error.
func (a *Anthropic) usageLimit(w http.ResponseWriter, reset time.Time) {
	// The headers name whole seconds: the second in which the limit has
	// lifted, never the one before it.
	secs := reset.Unix()
	if reset.After(time.Unix(secs, 0)) {
		secs++
	}
	h := http.Header{}
	h.Set("anthropic-ratelimit-unified-status", "rejected")
	h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(secs, 10))
	h.Set("anthropic-ratelimit-unified-representative-claim", "five_hour")
	h.Set("anthropic-ratelimit-unified-5h-status", "rejected")
	h.Set("anthropic-ratelimit-unified-5h-reset", strconv.FormatInt(secs, 10))
	h.Set("anthropic-ratelimit-unified-5h-utilization", "1.0")
	h.Set("retry-after", strconv.Itoa(max(1, int(time.Until(reset).Seconds()+0.5))))
	apiError(w, http.StatusTooManyRequests, "rate_limit_error",
		"This request would exceed your account's rate limit. Please try again later.", h)
}

// transient answers with a retryable error of status.
func transient(w http.ResponseWriter, status int) {
	h := http.Header{}
	h.Set("retry-after", "1")
	switch status {
	case 429:
		apiError(w, status, "rate_limit_error", "This request would exceed the rate limit for your organization. Please try again later.", h)
	case 529:
		apiError(w, status, "overloaded_error", "Overloaded", h)
	case 503:
		apiError(w, status, "api_error", "Service Unavailable: overloaded", h)
	default:
		apiError(w, status, "api_error", "Internal server error", h)
	}
}

func flood(n int) string {
	const line = "All work and no play makes the mock model a dull model. "
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		k := min(len(line), n-b.Len())
		b.WriteString(line[:k])
		if b.Len()%(len(line)*16) == 0 && b.Len() < n {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// turn is one assistant message: text, then at most one tool call.
type turn struct {
	text  string
	tool  string
	input map[string]any
}

// sse writes one streamed message.
type sse struct {
	w     http.ResponseWriter
	model string
	id    string
	out   int64
}

func (s *sse) event(name, data string) {
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// usage is the turn's token counts: deterministic, with cache reads and
// writes so that a client's totals can be checked.
func usage(step int, output int64) map[string]any {
	return map[string]any{
		"input_tokens":                int64(100 + 10*step),
		"cache_creation_input_tokens": int64(200),
		"cache_read_input_tokens":     int64(1000 * step),
		"output_tokens":               output,
	}
}

func (s *sse) start(step int) {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("request-id", "req_"+s.id)
	h.Set("anthropic-ratelimit-unified-status", "allowed")
	h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(time.Now().Add(5*time.Hour).Unix(), 10))
	s.w.WriteHeader(http.StatusOK)
	s.event("message_start", jsonString(map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.id, "type": "message", "role": "assistant", "model": s.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage(step, 1),
	}}))
}

func (s *sse) reply(t turn, step int) {
	s.start(step)
	s.event("ping", `{"type": "ping"}`)
	index := 0
	if t.text != "" {
		s.event("content_block_start", jsonString(map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}}))
		const chunk = 4096
		for i := 0; i < len(t.text); i += chunk {
			s.event("content_block_delta", jsonString(map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": t.text[i:min(i+chunk, len(t.text))]}}))
		}
		s.event("content_block_stop", jsonString(map[string]any{"type": "content_block_stop", "index": index}))
		s.out += int64(len(t.text)/4 + 1)
		index++
	}
	stop := "end_turn"
	if t.tool != "" {
		stop = "tool_use"
		s.event("content_block_start", jsonString(map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_mock_%d", step), "name": t.tool, "input": map[string]any{}}}))
		in := jsonString(t.input)
		half := len(in) / 2
		for _, part := range []string{in[:half], in[half:]} {
			s.event("content_block_delta", jsonString(map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}}))
		}
		s.event("content_block_stop", jsonString(map[string]any{"type": "content_block_stop", "index": index}))
		s.out += int64(len(in)/4 + 10)
	}
	u := usage(step, s.out)
	s.event("message_delta", jsonString(map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": u}))
	s.event("message_stop", `{"type":"message_stop"}`)
}
