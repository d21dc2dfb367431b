package mockmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OpenAI serves the OpenAI Responses API as Codex calls it: POST
// /v1/responses with "stream": true, answered with server-sent events
// (response.created, response.output_item.added, response.output_text.delta,
// response.output_item.done, response.completed with usage), or with the
// API's error statuses and bodies. Any other path is a 404, logged.
//
// Which script runs is named in the conversation: the first user message
// that contains "mock:NAME key=value …" (else Script). Which turn of it is
// the number of tool outputs the request carries, so a retried request gets
// the same turn again. The scripts:
//
//   - fix: read calc.go, patch Add to return a + b (apply_patch), run
//     `go test ./...`, then a final text.
//   - denied: the same patch, then a text saying what happened.
//   - limit reset=S text=1: a 429 usage_limit_reached whose resets_at is S
//     seconds (default 3) after the first request with that marker;
//     afterwards the fix script. text=1 leaves resets_at out.
//   - retry status=N n=K then=ok|400: K errors with status N (429, 500,
//     503 server_is_overloaded, 529) before each first turn, then the fix
//     script (then=ok) or a 400 invalid_request_error (then=400).
//   - hang: the stream starts and then says nothing until the client goes.
//   - sleep: a shell call to `sleep 300 & setsid sleep 300 & sleep 300` (one
//     in the background, one in a session of its own), then a final text.
//   - flood bytes=N: a final text of N bytes (default 1 MiB), streamed.
//   - codemode: for a model whose one tool is codex's JavaScript "exec"
//     (its default model's code mode): a script that runs `cat calc.go`
//     through tools.exec_command, then a final text.
//   - binary: a shell call that prints bytes that are not UTF-8 (and a NUL
//     and an escape sequence), then a final text.
type OpenAI struct {
	// Script runs when the conversation names none.
	Script string
	// Model is the model name reported in responses; "" echoes the request's.
	Model string
	// Logf, when set, reports every request and every unknown path.
	Logf func(format string, args ...any)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// APIKey, when set, is the only bearer token accepted; any other
	// gets the API's 401 invalid_api_key.
	APIKey string

	silent   // Hanging: the hang replies waiting now
	mu       sync.Mutex
	attempts map[string]int       // requests seen per script turn
	resets   map[string]time.Time // the limit script's reset, per conversation
	requests int
}

// Requests is the number of /v1/responses requests served so far.
func (s *OpenAI) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *OpenAI) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

func (s *OpenAI) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// responsesRequest is what the handler reads of a request.
type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  []json.RawMessage `json:"input"`
}

type inputItem struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Output json.RawMessage `json:"output"`
	CallID string          `json:"call_id"`
}

// script is a script's name and parameters, and the turn a request is at.
type script struct {
	name   string
	params map[string]string
	turn   int
	// outputs are the tool outputs the request carries, in order.
	outputs []string
	// conv identifies the conversation's first user message.
	conv string
	// marker is the script's marker as written ("" when none).
	marker string
}

func (sc script) param(k, def string) string {
	if v, ok := sc.params[k]; ok {
		return v
	}
	return def
}

func (sc script) intParam(k string, def int) int {
	if v, err := strconv.Atoi(sc.param(k, "")); err == nil {
		return v
	}
	return def
}

var scriptMarker = regexp.MustCompile(`mock:([a-z]+)((?:[ \t]+[a-z]+=[^\s]+)*)`)

func (s *OpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		s.logf("mockmodel/openai: unknown %s %s: 404", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotFound, openaiError("invalid_request_error", "", "Unknown request URL: "+r.Method+" "+r.URL.Path+"."))
		return
	}
	if s.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.logf("mockmodel/openai: POST /v1/responses with a wrong API key: 401")
		writeJSON(w, http.StatusUnauthorized, openaiError("invalid_request_error", "invalid_api_key",
			"Incorrect API key provided: "+key+". You can find your API key at https://platform.openai.com/account/api-keys."))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, openaiError("invalid_request_error", "", "could not read the body: "+err.Error()))
		return
	}
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, openaiError("invalid_request_error", "", "We could not parse the JSON body of your request."))
		return
	}
	if !req.Stream {
		writeJSON(w, http.StatusBadRequest, openaiError("invalid_request_error", "", "this mock answers only streamed requests"))
		return
	}
	sc := s.scriptOf(&req)
	key := sc.conv + "/" + sc.name + "/" + strconv.Itoa(sc.turn)
	s.mu.Lock()
	s.requests++
	if s.attempts == nil {
		s.attempts = map[string]int{}
	}
	s.attempts[key]++
	attempt := s.attempts[key]
	s.mu.Unlock()
	s.logf("mockmodel/openai: POST /v1/responses script %s turn %d attempt %d", sc.name, sc.turn, attempt)
	if n := len(sc.outputs); n > 0 {
		s.logf("mockmodel/openai: last tool output: %.300q", sc.outputs[n-1])
	}
	model := s.Model
	if model == "" {
		model = req.Model
	}
	t := &turnWriter{w: w, model: model, id: "resp_" + key2id(key, attempt)}
	s.serve(r, t, sc, attempt)
}

// scriptOf reads which script and turn the request is at.
func (s *OpenAI) scriptOf(req *responsesRequest) script {
	sc := script{name: s.Script, params: map[string]string{}}
	named := false
	for _, raw := range req.Input {
		var it inputItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it.Type {
		case "function_call_output", "custom_tool_call_output":
			sc.turn++
			sc.outputs = append(sc.outputs, outputText(it.Output))
		case "message":
			if it.Role != "user" {
				continue
			}
			for _, c := range it.Content {
				if strings.HasPrefix(c.Text, "<environment_context>") {
					continue
				}
				if sc.conv == "" {
					sum := sha256.Sum256([]byte(c.Text))
					sc.conv = hex.EncodeToString(sum[:6])
				}
				if m := scriptMarker.FindStringSubmatch(c.Text); m != nil && !named {
					named = true
					sc.name, sc.marker = m[1], m[0]
					for _, kv := range strings.Fields(m[2]) {
						k, v, _ := strings.Cut(kv, "=")
						sc.params[k] = v
					}
				}
			}
		}
	}
	return sc
}

// outputText is a tool output's text: a string, or the text parts of a
// content list.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

const calcPatch = `*** Begin Patch
*** Update File: calc.go
@@
 func Add(a, b int) int {
-	return a - b
+	return a + b
 }
*** End Patch
`

func (s *OpenAI) serve(r *http.Request, t *turnWriter, sc script, attempt int) {
	switch sc.name {
	case "fix", "":
		s.fix(t, sc)
	case "denied":
		switch sc.turn {
		case 0:
			t.respond(reasoning("Fixing Add in calc.go"), patchCall("call_patch", calcPatch))
		default:
			t.respond(message("I could not edit calc.go: " + firstLine(sc.outputs[len(sc.outputs)-1])))
		}
	case "limit":
		s.limit(t, sc)
	case "retry":
		n := sc.intParam("n", 1)
		if sc.turn == 0 && attempt <= n {
			t.transient(sc.intParam("status", 429))
			return
		}
		if sc.turn == 0 && sc.param("then", "ok") == "400" {
			writeJSON(t.w, http.StatusBadRequest, openaiError("invalid_request_error", "invalid_value",
				"Invalid 'input[2].content': the request is malformed."))
			return
		}
		s.fix(t, sc)
	case "hang":
		defer s.enter()()
		t.hang(r)
	case "sleep":
		switch sc.turn {
		case 0:
			t.respond(reasoning("Waiting on slow commands"), execCall("call_sleep", "sleep 300 & setsid sleep 300 & sleep 300"))
		default:
			t.respond(message("The command returned."))
		}
	case "flood":
		t.flood(sc.intParam("bytes", 1<<20))
	case "codemode":
		switch sc.turn {
		case 0:
			t.respond(map[string]any{"type": "custom_tool_call", "id": "ctc_js", "call_id": "call_js", "name": "exec",
				"input": "await tools.exec_command({cmd: \"cat calc.go\"});", "status": "completed"})
		default:
			t.respond(message("Read calc.go through code mode."))
		}
	case "binary":
		switch sc.turn {
		case 0:
			t.respond(execCall("call_binary", `printf 'bin\377\376\000\200\033[31mred\n'`))
		default:
			t.respond(message("The command printed binary."))
		}
	default:
		writeJSON(t.w, http.StatusBadRequest, openaiError("invalid_request_error", "", "mockmodel: unknown script "+sc.name))
	}
}

func (s *OpenAI) fix(t *turnWriter, sc script) {
	switch sc.turn {
	case 0:
		t.respond(reasoning("Reading calc.go"), message("I'll read calc.go first."), execCall("call_read", "cat calc.go"))
	case 1:
		t.respond(reasoning("Add subtracts; it must add"), patchCall("call_patch", calcPatch))
	case 2:
		t.respond(execCall("call_test", "go test ./..."))
	default:
		t.respond(message("Add now returns a + b; `go test ./...` passes."))
	}
}

func (s *OpenAI) limit(t *turnWriter, sc script) {
	s.mu.Lock()
	if s.resets == nil {
		s.resets = map[string]time.Time{}
	}
	// One reset per marker: the loop's next prompt (with ralph's feedback)
	// is another conversation but the same account.
	reset, ok := s.resets[sc.marker]
	if !ok {
		reset = s.now().Add(time.Duration(sc.intParam("reset", 3)) * time.Second).Truncate(time.Second)
		s.resets[sc.marker] = reset
	}
	s.mu.Unlock()
	if !s.now().Before(reset) {
		s.fix(t, sc)
		return
	}
	e := map[string]any{
		"type":      "usage_limit_reached",
		"message":   "The usage limit has been reached",
		"plan_type": "plus",
	}
	if sc.param("text", "0") != "1" {
		e["resets_at"] = reset.Unix()
	}
	h := t.w.Header()
	h.Set("x-codex-primary-used-percent", "100.0")
	h.Set("x-codex-primary-window-minutes", "300")
	h.Set("x-codex-primary-reset-at", strconv.FormatInt(reset.Unix(), 10))
	writeJSON(t.w, http.StatusTooManyRequests, map[string]any{"error": e})
}

// turnWriter writes one response's events.
type turnWriter struct {
	w     http.ResponseWriter
	model string
	id    string
	seq   int
}

func key2id(key string, attempt int) string {
	sum := sha256.Sum256([]byte(key + "#" + strconv.Itoa(attempt)))
	return hex.EncodeToString(sum[:8])
}

// transient answers with a retryable error of status code.
func (t *turnWriter) transient(code int) {
	switch code {
	case http.StatusTooManyRequests:
		t.w.Header().Set("retry-after", "1")
		writeJSON(t.w, code, openaiError("requests", "rate_limit_exceeded",
			"Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 1s."))
	case http.StatusServiceUnavailable:
		writeJSON(t.w, code, openaiError("server_error", "server_is_overloaded",
			"The server is overloaded, please try again later."))
	case 529:
		writeJSON(t.w, code, openaiError("server_error", "", "Overloaded"))
	default:
		writeJSON(t.w, code, openaiError("server_error", "",
			"The server had an error while processing your request. Sorry about that!"))
	}
}

func (t *turnWriter) start() {
	h := t.w.Header()
	h.Set("content-type", "text/event-stream")
	h.Set("cache-control", "no-cache")
	h.Set("x-request-id", "req_"+t.id)
	t.w.WriteHeader(http.StatusOK)
	t.event("response.created", map[string]any{"response": t.response("in_progress", nil, nil)})
}

func (t *turnWriter) response(status string, output []map[string]any, usage map[string]any) map[string]any {
	r := map[string]any{"id": t.id, "object": "response", "created_at": 1764028800, "status": status,
		"model": t.model, "output": output}
	if output == nil {
		r["output"] = []any{}
	}
	if usage != nil {
		r["usage"] = usage
	}
	return r
}

// respond streams a whole turn: each item added, its text deltas, done,
// then response.completed with usage.
func (t *turnWriter) respond(items ...map[string]any) {
	t.start()
	outTokens := 0
	for i, it := range items {
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		if it["type"] == "message" {
			added["content"] = []any{}
			added["status"] = "in_progress"
		}
		t.event("response.output_item.added", map[string]any{"output_index": i, "item": added})
		if it["type"] == "message" {
			text := it["content"].([]map[string]any)[0]["text"].(string)
			outTokens += len(text) / 4
			for _, chunk := range chunks(text, 24) {
				t.event("response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i,
					"content_index": 0, "delta": chunk})
			}
		} else {
			outTokens += 40
			if args, ok := it["arguments"].(string); ok {
				t.event("response.function_call_arguments.delta", map[string]any{"item_id": it["id"], "output_index": i,
					"delta": args})
			}
		}
		t.event("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	t.complete(items, outTokens)
}

func (t *turnWriter) complete(items []map[string]any, outTokens int) {
	usage := map[string]any{
		"input_tokens":          12000 + 800*t.seq,
		"input_tokens_details":  map[string]any{"cached_tokens": 11264, "cache_write_tokens": 512},
		"output_tokens":         outTokens + 64,
		"output_tokens_details": map[string]any{"reasoning_tokens": 64},
		"total_tokens":          12000 + 800*t.seq + outTokens + 64,
	}
	t.event("response.completed", map[string]any{"response": t.response("completed", items, usage)})
}

// hang starts the stream and then says nothing until the client leaves.
func (t *turnWriter) hang(r *http.Request) {
	t.start()
	<-r.Context().Done()
}

// flood streams a final text of n bytes.
func (t *turnWriter) flood(n int) {
	t.start()
	id := "msg_flood"
	t.event("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
		"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}})
	line := "flood line: the quick brown fox jumps over the lazy dog 0123456789\n"
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(line[:min(len(line), n-b.Len())])
	}
	text := b.String()
	for _, chunk := range chunks(text, 16<<10) {
		t.event("response.output_text.delta", map[string]any{"item_id": id, "output_index": 0, "content_index": 0,
			"delta": chunk})
	}
	msg := message(text)
	msg["id"] = id
	t.event("response.output_item.done", map[string]any{"output_index": 0, "item": msg})
	t.complete([]map[string]any{msg}, n/4)
}

func (t *turnWriter) event(name string, data map[string]any) {
	data["type"] = name
	data["sequence_number"] = t.seq
	t.seq++
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("mockmodel: marshal %s: %v", name, err)) // the handler builds only marshalable values
	}
	fmt.Fprintf(t.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}

func reasoning(summary string) map[string]any {
	return map[string]any{"type": "reasoning", "id": "rs_" + slug(summary),
		"summary": []map[string]any{{"type": "summary_text", "text": "**" + summary + "**"}}}
}

func message(text string) map[string]any {
	return map[string]any{"type": "message", "id": "msg_" + slug(text), "role": "assistant", "status": "completed",
		"content": []map[string]any{{"type": "output_text", "text": text, "annotations": []any{}}}}
}

func execCall(callID, cmd string) map[string]any {
	args, _ := json.Marshal(map[string]any{"cmd": cmd, "yield_time_ms": 30000, "login": false}) // strings always marshal
	return map[string]any{"type": "function_call", "id": "fc_" + callID, "call_id": callID, "name": "exec_command",
		"arguments": string(args), "status": "completed"}
}

func patchCall(callID, patch string) map[string]any {
	return map[string]any{"type": "custom_tool_call", "id": "ctc_" + callID, "call_id": callID, "name": "apply_patch",
		"input": patch, "status": "completed"}
}

func openaiError(typ, code, msg string) map[string]any {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	return map[string]any{"error": e}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("mockmodel: marshal error body: %v", err)) // the handler builds only marshalable values
	}
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b) // a client that left does not need its error
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func slug(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
