package mockmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Gemini serves the Gemini API's generateContent and
// streamGenerateContent (`?alt=sse`) as Gemini CLI calls them through the
// genai SDK: POST /v1beta/models/{model}:{method}, the key in the
// x-goog-api-key header. Point the CLI at it with GOOGLE_GEMINI_BASE_URL
// (and GEMINI_API_KEY with security.auth.selectedType "gemini-api-key").
//
// A streaming request is answered from Turns: turn i answers a request
// whose conversation already holds i model turns, so a retried request
// gets the same turn again. Non-streaming requests are the CLI's own side
// calls (model routing, next-speaker checks): they are answered with JSON
// that fits the schema they ask for. Any other path is a 404, logged.
type Gemini struct {
	Turns []GeminiTurn
	// Logf, when set, logs each request and every path the mock does not
	// serve (t.Logf in tests).
	Logf func(format string, args ...any)

	mu       sync.Mutex
	attempts map[int]int // streaming requests seen per turn
	requests []string    // "POST <path>" of every request
	bodies   [][]byte    // the body of every streaming request
	done     chan struct{}
	once     sync.Once
	silent   // Hanging: the Hang replies waiting now
}

// GeminiTurn is one model turn. Its first len(Errors) attempts are
// answered with those errors, in order; later attempts with the reply:
// Thought (a thought part), Text (streamed in fragments of Fragment
// bytes, default 12), FloodBytes more bytes of text, then Calls. Hang
// sends the first chunk and then nothing until the client leaves or the
// mock is closed.
type GeminiTurn struct {
	Errors     []GeminiError
	Thought    string
	Text       string
	Fragment   int
	FloodBytes int
	Calls      []GeminiCall
	Hang       bool
	// CachedTokens and ThoughtTokens are reported in the turn's
	// usageMetadata (cachedContentTokenCount, thoughtsTokenCount).
	CachedTokens, ThoughtTokens int
	// Delay is slept before the reply (not before errors).
	Delay time.Duration
}

// GeminiCall is a functionCall part: a tool the model calls.
type GeminiCall struct {
	Name string
	Args map[string]any
}

// GeminiError is an error response as the API sends it: HTTP Status and
// the body {"error": {"code", "message", "status", "details"}}; the
// details are built from RetryDelay (google.rpc.RetryInfo), QuotaID
// (google.rpc.QuotaFailure) and Reason (google.rpc.ErrorInfo). Midstream
// sends it as an SSE event after the first chunk instead, with status 200.
type GeminiError struct {
	Status     int
	StatusText string // e.g. RESOURCE_EXHAUSTED, UNAVAILABLE, INVALID_ARGUMENT
	Message    string
	RetryDelay string // "2s", "34.5s"
	QuotaID    string // "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
	Reason     string // ErrorInfo reason, e.g. RATE_LIMIT_EXCEEDED
}

// GeminiInvalidKey is an API key the mock rejects as the API rejects a
// wrong one (400 INVALID_ARGUMENT, reason API_KEY_INVALID).
const GeminiInvalidKey = "invalid-key"

// Close ends every hanging reply.
func (g *Gemini) Close() {
	g.init()
	g.once.Do(func() { close(g.done) })
}

func (g *Gemini) init() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
		g.attempts = map[int]int{}
	}
}

// Requests returns "POST <path>" for each request served so far.
func (g *Gemini) Requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.requests...)
}

// Attempts returns how many streaming requests turn i has received.
func (g *Gemini) Attempts(i int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.attempts[i]
}

// StreamBodies returns the bodies of the streaming requests so far.
func (g *Gemini) StreamBodies() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]byte(nil), g.bodies...)
}

func (g *Gemini) logf(format string, args ...any) {
	if g.Logf != nil {
		g.Logf(format, args...)
	}
}

// geminiRequest is what the mock reads of a GenerateContentRequest.
type geminiRequest struct {
	Contents []struct {
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	} `json:"contents"`
	GenerationConfig struct {
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

func (g *Gemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.init()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	g.requests = append(g.requests, r.Method+" "+r.URL.Path)
	g.mu.Unlock()
	model, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") || !ok {
		g.logf("mockmodel gemini: unknown request %s %s", r.Method, r.URL)
		writeGeminiError(w, GeminiError{Status: http.StatusNotFound, StatusText: "NOT_FOUND",
			Message: fmt.Sprintf("%s %s is not served by the mock", r.Method, r.URL.Path)})
		return
	}
	if r.Header.Get("x-goog-api-key") == "" {
		writeGeminiError(w, GeminiError{Status: http.StatusForbidden, StatusText: "PERMISSION_DENIED",
			Message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."})
		return
	}
	if r.Header.Get("x-goog-api-key") == GeminiInvalidKey {
		writeGeminiError(w, GeminiError{Status: http.StatusBadRequest, StatusText: "INVALID_ARGUMENT",
			Message: "API key not valid. Please pass a valid API key.", Reason: "API_KEY_INVALID"})
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeGeminiError(w, GeminiError{Status: http.StatusBadRequest, StatusText: "INVALID_ARGUMENT",
			Message: "Invalid JSON payload received: " + err.Error()})
		return
	}
	switch method {
	case "streamGenerateContent":
		g.stream(w, r, model, &req, body)
	case "generateContent":
		g.side(w, model, &req)
	case "countTokens":
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": len(body) / 4})
	default:
		g.logf("mockmodel gemini: unknown method %s (%s)", method, r.URL.Path)
		writeGeminiError(w, GeminiError{Status: http.StatusNotFound, StatusText: "NOT_FOUND",
			Message: fmt.Sprintf("method %s is not served by the mock", method)})
	}
}

// turnOf is the index of the turn a conversation asks for: the number of
// model turns it already holds.
func turnOf(req *geminiRequest) int {
	n := 0
	for _, c := range req.Contents {
		if c.Role == "model" {
			n++
		}
	}
	return n
}

// stream answers a streamGenerateContent request with the script's turn
// for it: its errors first, then its chunks as server-sent events.
func (g *Gemini) stream(w http.ResponseWriter, r *http.Request, model string, req *geminiRequest, body []byte) {
	i := turnOf(req)
	g.mu.Lock()
	g.attempts[i]++
	attempt := g.attempts[i]
	g.bodies = append(g.bodies, body)
	g.mu.Unlock()
	g.logf("mockmodel gemini: stream %s turn %d attempt %d", model, i, attempt)
	if i >= len(g.Turns) {
		writeGeminiError(w, GeminiError{Status: http.StatusBadRequest, StatusText: "INVALID_ARGUMENT",
			Message: fmt.Sprintf("the mock's script has %d turns; this request asks for turn %d", len(g.Turns), i+1)})
		return
	}
	t := g.Turns[i]
	if attempt <= len(t.Errors) {
		writeGeminiError(w, t.Errors[attempt-1])
		return
	}
	if t.Delay > 0 {
		select {
		case <-time.After(t.Delay):
		case <-r.Context().Done():
			return
		case <-g.done:
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	gs := &geminiStream{w: w, flusher: flusher, model: model, respID: fmt.Sprintf("mock-%d-%d", i, attempt),
		prompt: len(body) / 4, t: &t}
	chunks := turnChunks(&t)
	for k, parts := range chunks {
		for _, p := range parts {
			if s, ok := p["text"].(string); ok {
				gs.out += (len(s) + 3) / 4
			}
		}
		last := k == len(chunks)-1 && !t.Hang
		if !gs.send(parts, last) {
			return
		}
		if t.Hang {
			defer g.enter()()
			select {
			case <-r.Context().Done():
			case <-g.done:
			}
			return
		}
	}
}

// geminiStream is one streamed reply: where it goes, what it is called,
// and the tokens it has counted so far.
type geminiStream struct {
	w       http.ResponseWriter
	flusher http.Flusher
	model   string
	respID  string
	prompt  int // the prompt's tokens
	out     int // the reply's tokens so far
	t       *GeminiTurn
}

// send writes one chunk of parts with the usage so far, the last with its
// finish reason; false when the client is gone.
func (gs *geminiStream) send(parts []map[string]any, finish bool) bool {
	t := gs.t
	c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	usage := map[string]any{"promptTokenCount": gs.prompt, "candidatesTokenCount": gs.out,
		"totalTokenCount": gs.prompt + gs.out + t.ThoughtTokens}
	if t.CachedTokens > 0 {
		usage["cachedContentTokenCount"] = t.CachedTokens
	}
	if t.ThoughtTokens > 0 {
		usage["thoughtsTokenCount"] = t.ThoughtTokens
	}
	if finish {
		c["finishReason"] = "STOP"
	}
	b, _ := json.Marshal(map[string]any{"candidates": []any{c}, "usageMetadata": usage,
		"modelVersion": gs.model, "responseId": gs.respID})
	if _, err := fmt.Fprintf(gs.w, "data: %s\r\n\r\n", b); err != nil {
		return false
	}
	if gs.flusher != nil {
		gs.flusher.Flush()
	}
	return true
}

// turnChunks cuts a turn into the parts of its chunks: the thought, the
// text in fragments, the flood, then the function calls together.
func turnChunks(t *GeminiTurn) [][]map[string]any {
	var chunks [][]map[string]any
	if t.Thought != "" {
		chunks = append(chunks, []map[string]any{{"text": t.Thought, "thought": true}})
	}
	frag := t.Fragment
	if frag <= 0 {
		frag = 12
	}
	for s := t.Text; s != ""; {
		n := min(frag, len(s))
		chunks = append(chunks, []map[string]any{{"text": s[:n]}})
		s = s[n:]
	}
	const floodChunk = 32 << 10
	for k, left := 0, t.FloodBytes; left > 0; k, left = k+1, left-floodChunk {
		chunks = append(chunks, []map[string]any{{"text": floodText(k, min(left, floodChunk))}})
	}
	var calls []map[string]any
	for _, c := range t.Calls {
		calls = append(calls, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": c.Args}})
	}
	if len(calls) > 0 {
		chunks = append(chunks, calls)
	}
	if len(chunks) == 0 {
		chunks = append(chunks, []map[string]any{{"text": ""}})
	}
	return chunks
}

// floodText is n bytes of numbered lines of pseudo-random words, the
// k-th of a flood of chunks (no two lines alike: the CLI stops a reply
// that repeats itself as a loop).
func floodText(k, n int) string {
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
		"juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"}
	var b strings.Builder
	x := uint32(k)*2654435761 + 1
	for line := 0; b.Len() < n; line++ {
		fmt.Fprintf(&b, "%d.%d", k, line)
		for range 8 {
			x = x*1664525 + 1013904223
			b.WriteString(" " + words[x>>16%uint32(len(words))])
		}
		b.WriteString("\n")
	}
	return b.String()[:n]
}

// side answers a non-streaming generateContent: the CLI's routing and
// next-speaker checks ask for JSON of a schema, which the mock fills.
func (g *Gemini) side(w http.ResponseWriter, model string, req *geminiRequest) {
	schema := req.GenerationConfig.ResponseJSONSchema
	if len(schema) == 0 {
		schema = req.GenerationConfig.ResponseSchema
	}
	text := "OK"
	if len(schema) > 0 {
		var s map[string]any
		if json.Unmarshal(schema, &s) == nil {
			b, _ := json.Marshal(fill(s))
			text = string(b)
		}
	}
	g.logf("mockmodel gemini: generateContent %s -> %s", model, text)
	writeJSON(w, http.StatusOK, map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model",
			"parts": []any{map[string]any{"text": text}}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  model,
	})
}

// fill makes a value of a JSON schema: the first enum value ("user"
// preferred, so that a next-speaker check hands the turn back), 10 for
// numbers, "mock" for strings, every property of an object.
func fill(s map[string]any) any {
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		for _, v := range e {
			if v == "user" {
				return v
			}
		}
		return e[0]
	}
	typ, _ := s["type"].(string)
	switch strings.ToLower(typ) {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			if m, ok := v.(map[string]any); ok {
				out[k] = fill(m)
			}
		}
		return out
	case "array":
		if m, ok := s["items"].(map[string]any); ok {
			return []any{fill(m)}
		}
		return []any{}
	case "integer", "number":
		return 10
	case "boolean":
		return false
	}
	return "mock"
}

// writeGeminiError writes e as the API does: its status and a JSON body
// {"error": {"code", "message", "status", "details"}}.
func writeGeminiError(w http.ResponseWriter, e GeminiError) {
	details := []any{}
	if e.QuotaID != "" {
		details = append(details, map[string]any{
			"@type": "type.googleapis.com/google.rpc.QuotaFailure",
			"violations": []any{map[string]any{
				"quotaMetric":     "generativelanguage.googleapis.com/generate_content_free_tier_requests",
				"quotaId":         e.QuotaID,
				"quotaDimensions": map[string]any{"location": "global", "model": "gemini-2.5-pro"},
				"quotaValue":      "50",
			}},
		})
		details = append(details, map[string]any{
			"@type": "type.googleapis.com/google.rpc.Help",
			"links": []any{map[string]any{"description": "Learn more about Gemini API quotas",
				"url": "https://ai.google.dev/gemini-api/docs/rate-limits"}},
		})
	}
	if e.Reason != "" {
		details = append(details, map[string]any{
			"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": e.Reason, "domain": "generativelanguage.googleapis.com",
		})
	}
	if e.RetryDelay != "" {
		details = append(details, map[string]any{
			"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": e.RetryDelay,
		})
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": e.Status, "message": e.Message, "status": e.StatusText, "details": details,
	}})
}

// The scripts the tests run. Each is a fresh value: the mock counts
// attempts per turn.

// GeminiFix reads calc.go, replaces `return a - b` with `return a + b`,
// runs test (e.g. "go test ./...") with the shell tool, and answers.
func GeminiFix(test string) []GeminiTurn {
	return []GeminiTurn{
		{Thought: "The test fails because Add subtracts.", ThoughtTokens: 7,
			Text:  "I will read calc.go first.\n",
			Calls: []GeminiCall{{Name: "read_file", Args: map[string]any{"file_path": "calc.go"}}}},
		{Text: "Add subtracts; fixing it.\n",
			Calls: []GeminiCall{{Name: "replace", Args: map[string]any{
				"file_path": "calc.go", "instruction": "Make Add return the sum of a and b.",
				"old_string": "return a - b", "new_string": "return a + b"}}}},
		{Text: "Running the tests.\n",
			Calls: []GeminiCall{{Name: "run_shell_command", Args: map[string]any{
				"command": test, "description": "Run the tests."}}}},
		{Thought: "The tests pass.", ThoughtTokens: 5, CachedTokens: 64,
			Text: "Add now returns a + b; " + test + " passes.\nDone."},
	}
}

// GeminiLimit answers the first attempt with the API's 429 for a spent
// daily quota (QuotaFailure PerDay, RetryInfo retryDelay reset), then
// works as GeminiFix.
func GeminiLimit(test string, reset time.Duration) []GeminiTurn {
	turns := GeminiFix(test)
	turns[0].Errors = []GeminiError{{Status: http.StatusTooManyRequests, StatusText: "RESOURCE_EXHAUSTED",
		Message: "You exceeded your current quota, please check your plan and billing details. " +
			"For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n" +
			"* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 50, model: gemini-2.5-pro\n" +
			fmt.Sprintf("Please retry in %.1fs.", reset.Seconds()),
		QuotaID:    "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
		RetryDelay: fmt.Sprintf("%ds", int(reset.Seconds()))}}
	return turns
}

// Gemini503 and Gemini429 are the transient errors the API sends when a
// model is overloaded and when a per-minute quota is spent.
var (
	Gemini503 = GeminiError{Status: http.StatusServiceUnavailable, StatusText: "UNAVAILABLE",
		Message: "The model is overloaded. Please try again later."}
	Gemini429 = GeminiError{Status: http.StatusTooManyRequests, StatusText: "RESOURCE_EXHAUSTED",
		Message: "You exceeded your current quota, please check your plan and billing details.\n" +
			"* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-pro\n" +
			"Please retry in 1s.",
		QuotaID: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", RetryDelay: "1s"}
	Gemini400 = GeminiError{Status: http.StatusBadRequest, StatusText: "INVALID_ARGUMENT",
		Message: "Request contains an invalid argument."}
)

// GeminiRetry answers the first turn with errs before it works as
// GeminiFix.
func GeminiRetry(test string, errs ...GeminiError) []GeminiTurn {
	turns := GeminiFix(test)
	turns[0].Errors = errs
	return turns
}

// GeminiRetryFail: a transient 429, then a final 400 on every later
// attempt.
func GeminiRetryFail() []GeminiTurn {
	errs := []GeminiError{Gemini429}
	for range 20 {
		errs = append(errs, Gemini400)
	}
	return []GeminiTurn{{Errors: errs, Text: "never reached"}}
}

// GeminiHang starts a reply and goes silent.
func GeminiHang() []GeminiTurn {
	return []GeminiTurn{{Text: "Let me think about this", Fragment: 64, Hang: true}}
}

// GeminiShell runs command with the shell tool (e.g. "sleep 300"), then
// answers.
func GeminiShell(command string) []GeminiTurn {
	return []GeminiTurn{
		{Text: "Running it.\n", Calls: []GeminiCall{{Name: "run_shell_command", Args: map[string]any{
			"command": command, "description": "Run a command."}}}},
		{Text: "It finished."},
	}
}

// GeminiFlood answers with n bytes of text.
func GeminiFlood(n int) []GeminiTurn {
	return []GeminiTurn{{Text: "Here is a lot of output:\n", FloodBytes: n}}
}

// GeminiWriteFile writes content to path with the write_file tool, then
// answers.
func GeminiWriteFile(path, content string) []GeminiTurn {
	return []GeminiTurn{
		{Text: "Writing it.\n", Calls: []GeminiCall{{Name: "write_file", Args: map[string]any{
			"file_path": path, "content": content}}}},
		{Text: "Written."},
	}
}
