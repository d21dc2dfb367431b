// Package oaitest is a fake OpenAI-compatible server for tests: it speaks
// the real chat-completions protocol over HTTP (httptest), so the code under
// test runs its real client path, not a mock interface.
//
// The server answers POST /v1/chat/completions from a script of Answers, in
// order: each request takes the next one. An answer is either content (sent
// as one JSON response, or as SSE chunks when the request says
// "stream": true) or an HTTP error with a status, a body and headers such
// as Retry-After. Every request is recorded — method, path, headers
// (Authorization included), the decoded body and the raw bytes — so tests
// can assert what was sent. GET /v1/models lists Options.Models.
//
// Some behaviour needs no script entry, because real servers do it before
// looking at the prompt: with Options.APIKey set, a request with another
// bearer token gets 401; with Options.Models set, a request for another
// model gets 404 model_not_found; with Options.RejectJSONMode, a request
// carrying response_format gets 400. Such requests are recorded but consume
// no answer. When the script is exhausted the server answers 400 with code
// "oaitest_exhausted" (see Unserved), which no client retries.
//
//	srv := oaitest.New(t, oaitest.Options{},
//		oaitest.RateLimit("1"),
//		oaitest.Text(`(do (call :ccos.echo {:message "hi"}))`).WithUsage(120, 14))
//	// point the client at srv.BaseURL ("http://127.0.0.1:PORT/v1")
//	reqs := srv.Requests()
package oaitest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// Answer is one scripted response to a chat-completions request.
type Answer struct {
	// Content is the assistant message text, for a successful answer.
	Content string
	// Chunks, when set, are the SSE deltas of a streamed answer (their
	// concatenation should equal Content); by default Content is split
	// into word-sized pieces.
	Chunks []string
	// PromptTokens and CompletionTokens are the usage reported. When both
	// are zero the server estimates them: one token per whitespace-separated
	// word of the request's messages and of Content.
	PromptTokens, CompletionTokens int
	// Model is the model the response names; empty means the request's.
	Model string
	// FinishReason defaults to "stop".
	FinishReason string

	// Status, when non-zero, makes this answer an HTTP error with Body
	// (sent as application/json) and Header.
	Status int
	Body   string
	Header http.Header

	// Delay holds the answer back (until the client gives up, whichever is
	// first), to exercise timeouts.
	Delay time.Duration
	// StreamError, for a streamed answer, is sent as a data: {"error": …}
	// event after the chunks instead of finishing the stream normally.
	StreamError string
	// Cut, for a streamed answer, drops the connection after the chunks,
	// without finish_reason or [DONE].
	Cut bool
}

// Text is a successful answer with content.
func Text(content string) Answer { return Answer{Content: content} }

// WithUsage sets the token counts the answer reports.
func (a Answer) WithUsage(prompt, completion int) Answer {
	a.PromptTokens, a.CompletionTokens = prompt, completion
	return a
}

// WithHeader adds a response header (e.g. "Retry-After").
func (a Answer) WithHeader(key, value string) Answer {
	h := a.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	a.Header = h
	return a
}

// WithDelay holds the answer back for d.
func (a Answer) WithDelay(d time.Duration) Answer {
	a.Delay = d
	return a
}

// Error is an HTTP error answer with an OpenAI-style body:
// {"error": {"message": …, "type": …, "param": null, "code": code}}. The
// type follows the status (invalid_request_error, authentication_error,
// rate_limit_error, server_error …); code may be empty (sent as null).
func Error(status int, code, message string) Answer {
	return Answer{Status: status, Body: ErrorBody(errorType(status), code, message)}
}

// Raw is an HTTP error answer with a body sent as it is, for servers whose
// errors are not OpenAI-shaped ("upstream connect error", HTML pages).
func Raw(status int, body string) Answer { return Answer{Status: status, Body: body} }

// RateLimit is a 429 with the given Retry-After header (seconds or an HTTP
// date); an empty retryAfter sends no header.
func RateLimit(retryAfter string) Answer {
	a := Error(http.StatusTooManyRequests, "rate_limit_exceeded",
		"Rate limit reached for requests. Please try again later.")
	if retryAfter != "" {
		a = a.WithHeader("Retry-After", retryAfter)
	}
	return a
}

// ServerError is a 500 as OpenAI sends it.
func ServerError() Answer {
	return Error(http.StatusInternalServerError, "",
		"The server had an error while processing your request. Sorry about that!")
}

// Unauthorized is a 401 as OpenAI sends it for a bad key.
func Unauthorized() Answer {
	return Error(http.StatusUnauthorized, "invalid_api_key",
		"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
}

// ContextLength is a 400 context_length_exceeded as OpenAI sends it.
func ContextLength() Answer {
	return Error(http.StatusBadRequest, "context_length_exceeded",
		"This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.")
}

// ModelNotFound is a 404 model_not_found as OpenAI sends it.
func ModelNotFound(model string) Answer {
	return Error(http.StatusNotFound, "model_not_found",
		fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model))
}

// JSONModeRejected is a 400 naming response_format, as servers without
// JSON mode send it.
func JSONModeRejected() Answer {
	return Answer{Status: http.StatusBadRequest, Body: fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error","param":"response_format","code":null}}`,
		"'response_format' of type 'json_object' is not supported with this model.")}
}

// ErrorBody renders an OpenAI-style error object.
func ErrorBody(typ, code, message string) string {
	var c any
	if code != "" {
		c = code
	}
	b, err := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
	if err != nil { // a map of strings and nil always marshals
		panic(err)
	}
	return string(b)
}

func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "invalid_request_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// Message is one chat message as the client sent it.
type Message struct {
	Role    string
	Content string // text parts joined when the client sent an array
}

// Request is one request the server received.
type Request struct {
	At     time.Time // when it arrived
	Method string
	Path   string
	Header http.Header // Authorization included
	Body   []byte      // the raw body

	// Decoded chat-completions fields (zero for other endpoints).
	Model          string
	Messages       []Message
	ResponseFormat string // "json_object", "json_schema", or "" when absent
	Stream         bool
	IncludeUsage   bool     // stream_options.include_usage
	Temperature    *float64 // nil when absent
	MaxTokens      int      // max_tokens, or max_completion_tokens
	// Fields lists every top-level key of the body, sorted.
	Fields []string

	// Answered says how the server answered: the script index it used
	// (0-based), or -1 when it answered without the script (401, 404,
	// JSON mode rejected, exhausted, other endpoints).
	Answered int
	Status   int // the HTTP status sent
}

// Authorization is the bearer token the request carried ("" for none).
func (r Request) Authorization() string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// Options configure the server.
type Options struct {
	// APIKey, when set, is the only bearer token accepted; any other gets
	// a 401 whose message echoes the token presented, as some proxies do,
	// so tests can check a client never repeats it.
	APIKey string
	// Models lists the served models (GET /v1/models). When set, a request
	// for any other model gets 404 model_not_found.
	Models []string
	// RejectJSONMode answers 400 to any request carrying response_format.
	RejectJSONMode bool
	// IgnoreIncludeUsage streams without the usage chunk even when
	// stream_options.include_usage asks for it, as some servers do.
	IgnoreIncludeUsage bool
	// IgnoreStream answers "stream": true with a plain JSON response, as
	// some proxies do.
	IgnoreStream bool
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	// BaseURL is the API root to give a client, ending in /v1.
	BaseURL string

	srv  *httptest.Server
	opts Options

	mu       sync.Mutex
	answers  []Answer
	next     int
	requests []Request
	unserved int
}

// New starts a server answering with answers in order; it is closed when
// the test ends.
func New(t testing.TB, opts Options, answers ...Answer) *Server {
	t.Helper()
	s := Start(opts, answers...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a server answering with answers in order; Close it.
func Start(opts Options, answers ...Answer) *Server {
	s := &Server{opts: opts, answers: slices.Clone(answers)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.BaseURL = s.srv.URL + "/v1"
	return s
}

// Close shuts the server down, waiting for requests in flight.
func (s *Server) Close() { s.srv.Close() }

// URL is the server's root URL (without /v1).
func (s *Server) URL() string { return s.srv.URL }

// Add appends answers to the script.
func (s *Server) Add(answers ...Answer) {
	s.mu.Lock()
	s.answers = append(s.answers, answers...)
	s.mu.Unlock()
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Completions returns the chat-completions requests received so far.
func (s *Server) Completions() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Path == "/v1/chat/completions" {
			out = append(out, r)
		}
	}
	return out
}

// Remaining is the number of scripted answers not yet used.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.answers) - s.next
}

// Unserved counts chat-completions requests that arrived after the script
// was exhausted.
func (s *Server) Unserved() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unserved
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20)) // a short read shows up as a decode error below
	req := Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Answered: -1}
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		req.Status = s.serveModels(w, r)
		s.record(req)
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.serveChat(w, r, req)
	default:
		req.Status = http.StatusNotFound
		s.record(req)
		writeJSON(w, http.StatusNotFound, nil, ErrorBody("invalid_request_error", "unknown_url",
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)))
	}
}

func (s *Server) authorized(r *http.Request) (string, bool) {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return got, s.opts.APIKey == "" || got == s.opts.APIKey
}

func unauthorized(w http.ResponseWriter, presented string) int {
	msg := "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth."
	if presented != "" {
		msg = "Incorrect API key provided: " + presented + ". You can find your API key at https://platform.openai.com/account/api-keys."
	}
	writeJSON(w, http.StatusUnauthorized, nil, ErrorBody("invalid_request_error", "invalid_api_key", msg))
	return http.StatusUnauthorized
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) int {
	if key, ok := s.authorized(r); !ok {
		return unauthorized(w, key)
	}
	models := s.opts.Models
	if models == nil {
		models = []string{"oaitest"}
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range models {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: 1700000000, OwnedBy: "oaitest"})
	}
	b, _ := json.Marshal(list) // plain structs of strings always marshal
	writeJSON(w, http.StatusOK, nil, string(b))
	return http.StatusOK
}

// wireRequest is the part of a chat-completions body the server reads.
type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
	Stream              bool     `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

func decode(body []byte, req *Request) error {
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return err
	}
	for k := range fields {
		req.Fields = append(req.Fields, k)
	}
	slices.Sort(req.Fields)
	req.Model, req.Temperature, req.Stream = wr.Model, wr.Temperature, wr.Stream
	req.MaxTokens = max(wr.MaxTokens, wr.MaxCompletionTokens)
	req.IncludeUsage = wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage
	if wr.ResponseFormat != nil {
		req.ResponseFormat = wr.ResponseFormat.Type
	}
	for _, m := range wr.Messages {
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: contentText(m.Content)})
	}
	return nil
}

// contentText reads a message's content: a string, or an array of parts
// whose text parts are joined.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, req Request) {
	if err := decode(req.Body, &req); err != nil {
		req.Status = http.StatusBadRequest
		s.record(req)
		writeJSON(w, req.Status, nil, ErrorBody("invalid_request_error", "", "We could not parse the JSON body of your request: "+err.Error()))
		return
	}
	if key, ok := s.authorized(r); !ok {
		req.Status = unauthorized(w, key)
		s.record(req)
		return
	}
	if s.opts.Models != nil && !slices.Contains(s.opts.Models, req.Model) {
		a := ModelNotFound(req.Model)
		req.Status = a.Status
		s.record(req)
		writeJSON(w, a.Status, nil, a.Body)
		return
	}
	if s.opts.RejectJSONMode && req.ResponseFormat != "" {
		a := JSONModeRejected()
		req.Status = a.Status
		s.record(req)
		writeJSON(w, a.Status, nil, a.Body)
		return
	}
	s.mu.Lock()
	i := s.next
	var a Answer
	if i < len(s.answers) {
		a = s.answers[i]
		s.next++
		req.Answered = i
	} else {
		s.unserved++
		a = Error(http.StatusBadRequest, "oaitest_exhausted",
			fmt.Sprintf("oaitest: no scripted answer left for request %d (the script had %d)", len(s.requests)+1, len(s.answers)))
	}
	req.Status = cmp.Or(a.Status, http.StatusOK)
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	if a.Delay > 0 {
		select {
		case <-time.After(a.Delay):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case a.Status != 0:
		writeJSON(w, a.Status, a.Header, a.Body)
	case req.Stream && !s.opts.IgnoreStream:
		s.stream(w, r, req, a)
	default:
		writeJSON(w, http.StatusOK, a.Header, completionBody(req, a))
	}
}

func writeJSON(w http.ResponseWriter, status int, h http.Header, body string) {
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// A client that went away cannot be answered; nothing to do.
	_, _ = io.WriteString(w, body)
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usageOf(req Request, a Answer) usage {
	p, c := a.PromptTokens, a.CompletionTokens
	if p == 0 && c == 0 {
		for _, m := range req.Messages {
			p += len(strings.Fields(m.Content))
		}
		c = len(strings.Fields(a.Content))
	}
	return usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

func completionBody(req Request, a Answer) string {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	resp := struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   usage    `json:"usage"`
	}{ID: "chatcmpl-oaitest", Object: "chat.completion", Created: time.Now().Unix(), Model: cmp.Or(a.Model, req.Model),
		Choices: []choice{{Message: message{Role: "assistant", Content: a.Content}, FinishReason: cmp.Or(a.FinishReason, "stop")}},
		Usage:   usageOf(req, a)}
	b, _ := json.Marshal(resp) // strings and ints always marshal
	return string(b)
}

// Split cuts text into word-sized pieces, each word with the whitespace
// after it, as a tokenizer-driven stream does; the pieces join back to text.
func Split(text string) []string {
	var out []string
	start, inSpace := 0, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if inSpace && !space {
			out = append(out, text[start:i])
			start = i
		}
		inSpace = space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, a Answer) {
	flusher, _ := w.(http.Flusher)
	for k, vs := range a.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	model, created := cmp.Or(a.Model, req.Model), time.Now().Unix()
	send := func(v any) bool {
		b, _ := json.Marshal(v) // maps of strings, ints and nil always marshal
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return r.Context().Err() == nil
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-oaitest", "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	pieces := a.Chunks
	if pieces == nil {
		pieces = Split(a.Content)
	}
	for _, p := range pieces {
		if !send(chunk(map[string]any{"content": p}, nil)) {
			return
		}
	}
	switch {
	case a.Cut:
		panic(http.ErrAbortHandler) // drops the connection mid-body; net/http logs nothing for it
	case a.StreamError != "":
		var e map[string]any
		_ = json.Unmarshal([]byte(ErrorBody("server_error", "", a.StreamError)), &e) // ErrorBody is valid JSON
		send(e)
		return
	}
	if !send(chunk(map[string]any{}, cmp.Or(a.FinishReason, "stop"))) {
		return
	}
	if req.IncludeUsage && !s.opts.IgnoreIncludeUsage {
		if !send(map[string]any{"id": "chatcmpl-oaitest", "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": usageOf(req, a)}) {
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n") // the stream is over either way
	if flusher != nil {
		flusher.Flush()
	}
}
