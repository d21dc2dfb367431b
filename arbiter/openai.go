package arbiter

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ralphloop/ralph/config"
)

// DefaultOpenAIBaseURL is the API root used when model.base_url and
// OPENAI_BASE_URL are both empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// Defaults for the openai provider.
const (
	DefaultRequestTimeout   = 5 * time.Minute // one request, streamed or not
	DefaultMaxResponseBytes = 1 << 20         // completion text kept from one answer
)

// OpenAIOptions tune the openai provider; the zero value is ready to use.
type OpenAIOptions struct {
	// HTTPClient sends the requests; nil uses a client on a clone of
	// http.DefaultTransport. Its Timeout should be zero: model.timeout
	// bounds each request instead.
	HTTPClient *http.Client
	// Retry says how transient failures are waited out.
	Retry RetryPolicy
	// MaxResponseBytes bounds the completion text of one answer (default
	// 1 MiB); a longer answer is an error, not a truncated plan.
	MaxResponseBytes int
	// Now is the clock for rate-limit deadlines; nil means time.Now.
	Now func() time.Time
}

// openAIModel is the openai provider: any server speaking OpenAI's
// chat-completions API (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp).
type openAIModel struct {
	cfg     config.Model
	key     string
	keyEnv  string
	baseURL string // as configured, for requests
	shown   string // baseURL with any credentials redacted, for messages
	client  *openai.Client
	timeout time.Duration
	retry   RetryPolicy
	maxResp int
	now     func() time.Time

	// Learned from the server's refusals, so later requests do not ask
	// again for what it rejected.
	noJSONMode    atomic.Bool
	noStreamUsage atomic.Bool
	noStream      atomic.Bool // the server answers plain JSON to stream requests
}

// NewOpenAI returns the openai provider for cfg, authenticating with
// apiKey. A missing key or model is an error wrapping ErrFatal that names
// the fix. Servers that need no key (a local Ollama) still take any
// non-empty one.
func NewOpenAI(cfg config.Model, apiKey string, opts OpenAIOptions) (Model, error) {
	keyEnv := cmp.Or(cfg.APIKeyEnv, "OPENAI_API_KEY")
	if cfg.Model == "" {
		return nil, &transportError{kind: ErrFatal, msg: `provider "openai" needs model.model, e.g. "gpt-4o-mini"`}
	}
	if apiKey == "" {
		return nil, &transportError{kind: ErrFatal, msg: fmt.Sprintf(
			"provider \"openai\" has no API key: set %s (any non-empty value for a local server that needs none, such as Ollama)", keyEnv)}
	}
	base := strings.TrimRight(cmp.Or(cfg.BaseURL, DefaultOpenAIBaseURL), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &transportError{kind: ErrFatal, msg: fmt.Sprintf("model.base_url %q is not an http(s) URL", redactBaseURL(base))}
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	oc := openai.DefaultConfig(apiKey)
	oc.BaseURL = base
	oc.HTTPClient = recordingDoer{c: hc}
	m := &openAIModel{cfg: cfg, key: apiKey, keyEnv: keyEnv, baseURL: base, shown: redactBaseURL(base),
		client: openai.NewClientWithConfig(oc), timeout: cfg.Timeout.Duration, retry: opts.Retry.withDefaults(),
		maxResp: opts.MaxResponseBytes, now: opts.Now}
	if m.timeout <= 0 {
		m.timeout = DefaultRequestTimeout
	}
	if m.maxResp <= 0 {
		m.maxResp = DefaultMaxResponseBytes
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// Name is "openai/<model>".
func (m *openAIModel) Name() string { return "openai/" + m.cfg.Model }

// Complete sends c and returns the answer. It streams when obs is non-nil
// (each piece of text goes to obs.Token; a server that ignores "stream" is
// asked without it from then on), asks for JSON mode when c.JSON
// (dropping it for good when the server rejects it), waits out 429s as the
// server asks (obs.Waiting, not counted as retries), retries 5xx, timeouts
// and dropped connections with backoff, and fails at once on a bad key,
// an unserved model or a prompt over the context length.
func (m *openAIModel) Complete(ctx context.Context, c Completion, obs Observer) (Reply, error) {
	stream := obs != nil && !m.noStream.Load()
	if obs == nil {
		obs = silentObserver{}
	}
	var retries, rateLimits int
	var rateWaited time.Duration
	for {
		jsonMode := c.JSON && !m.noJSONMode.Load()
		reply, err := m.attempt(ctx, c, jsonMode, stream, obs)
		if err == nil {
			return reply, nil
		}
		if ctx.Err() != nil {
			return Reply{}, fmt.Errorf("openai %s: %w", m.shown, context.Cause(ctx))
		}
		f := m.classify(err)
		switch f.class {
		case failJSONMode:
			if jsonMode {
				m.noJSONMode.Store(true)
				continue
			}
		case failNotStreamed:
			if stream {
				m.noStream.Store(true)
				stream = false
				continue
			}
		case failStreamOptions:
			if stream && !m.noStreamUsage.Load() {
				m.noStreamUsage.Store(true)
				continue
			}
		case failRateLimited:
			rateLimits++
			wait := f.wait
			if !f.hasWait {
				wait = m.retry.Backoff(rateLimits)
			}
			// Never hammer: "Retry-After: 0" still waits a little, so the
			// budget ends a server that says it forever.
			wait = max(min(wait, m.retry.MaxRetryAfter), m.retry.Base/2)
			if rateWaited+wait > m.retry.RateLimitBudget {
				return Reply{}, &transportError{msg: fmt.Sprintf("%s kept rate-limiting requests for %s: wait, or lower the request rate (%s)",
					m.shown, rateWaited.Round(time.Millisecond), cmp.Or(f.brief, f.detail))}
			}
			if err := m.wait(ctx, obs, wait, fmt.Sprintf("rate limited by %s (429)", m.host())); err != nil {
				return Reply{}, err
			}
			rateWaited += wait
			continue
		case failTransient:
			retries++
			if retries > m.retry.Retries {
				return Reply{}, &transportError{msg: fmt.Sprintf("%s failed %d times in a row, giving up: %s", m.shown, retries, f.detail)}
			}
			wait := m.retry.Backoff(retries)
			if f.hasWait { // a 503 that says when to come back
				wait = max(wait, min(f.wait, m.retry.MaxRetryAfter))
			}
			reason := fmt.Sprintf("%s; retry %d of %d", f.detail, retries, m.retry.Retries)
			if err := m.wait(ctx, obs, wait, reason); err != nil {
				return Reply{}, err
			}
			continue
		}
		return Reply{}, m.final(ctx, f)
	}
}

// wait tells obs about a pause and takes it.
func (m *openAIModel) wait(ctx context.Context, obs Observer, d time.Duration, reason string) error {
	obs.Waiting(reason, m.now().Add(d))
	if err := sleepCtx(ctx, d); err != nil {
		return fmt.Errorf("openai %s: %w", m.shown, err)
	}
	return nil
}

func (m *openAIModel) host() string {
	if u, err := url.Parse(m.baseURL); err == nil {
		return u.Host
	}
	return m.shown
}

var errRequestTimeout = errors.New("request timed out")

// attempt makes one request.
func (m *openAIModel) attempt(ctx context.Context, c Completion, jsonMode, stream bool, obs Observer) (Reply, error) {
	actx, cancel := context.WithTimeoutCause(ctx, m.timeout, errRequestTimeout)
	defer cancel()
	info := &responseInfo{}
	actx = context.WithValue(actx, responseInfoKey{}, info)
	req := m.request(c, jsonMode, stream)
	var reply Reply
	var err error
	if stream {
		reply, err = m.streamed(actx, req, obs)
	} else {
		reply, err = m.plain(actx, req)
	}
	if err != nil {
		return Reply{}, &attemptError{err: err, status: info.status, header: info.header,
			timedOut: errors.Is(context.Cause(actx), errRequestTimeout) && ctx.Err() == nil}
	}
	reply.Usage.CostUSD = priced(m.cfg.Price, reply.Usage)
	if reply.Model == "" {
		reply.Model = m.cfg.Model
	}
	return reply, nil
}

func (m *openAIModel) request(c Completion, jsonMode, stream bool) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: m.cfg.Model, Messages: make([]openai.ChatCompletionMessage, len(c.Messages))}
	for i, msg := range c.Messages {
		req.Messages[i] = openai.ChatCompletionMessage{Role: msg.Role, Content: msg.Content}
	}
	if t := m.cfg.Temperature; t != nil {
		req.Temperature = float32(*t)
		if *t == 0 {
			// go-openai omits a zero temperature (omitempty), which servers
			// read as their default of 1; the smallest float32 is sent
			// instead and means 0 in effect.
			req.Temperature = math.SmallestNonzeroFloat32
		}
	}
	if n := m.cfg.MaxTokens; n > 0 {
		if reasoningModel(m.cfg.Model) {
			req.MaxCompletionTokens = n // these models refuse max_tokens
		} else {
			//lint:ignore SA1019 max_tokens is what Ollama, vLLM and llama.cpp understand; max_completion_tokens is OpenAI's newer name
			req.MaxTokens = n // what every compatible server understands
		}
	}
	if jsonMode {
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	if stream {
		req.Stream = true
		if !m.noStreamUsage.Load() {
			req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
		}
	}
	return req
}

// reasoningModel reports OpenAI's reasoning models, which take
// max_completion_tokens and no temperature.
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

var errAnswerTooLarge = errors.New("answer too large")

func (m *openAIModel) plain(ctx context.Context, req openai.ChatCompletionRequest) (Reply, error) {
	resp, err := m.client.CreateChatCompletion(ctx, req)
	if err != nil {
		return Reply{}, err
	}
	return m.replyOf(resp)
}

// replyOf reads the first choice of a plain (not streamed) answer.
func (m *openAIModel) replyOf(resp openai.ChatCompletionResponse) (Reply, error) {
	if len(resp.Choices) == 0 {
		return Reply{}, errNoChoices
	}
	text := resp.Choices[0].Message.Content
	if len(text) > m.maxResp {
		return Reply{}, errAnswerTooLarge
	}
	return Reply{Text: text, Model: resp.Model, Usage: Usage{PromptTokens: int64(resp.Usage.PromptTokens),
		CompletionTokens: int64(resp.Usage.CompletionTokens)}}, nil
}

var (
	errNoChoices   = errors.New("the answer had no choices")
	errNotStreamed = errors.New("the server sent no stream events")
)

func (m *openAIModel) streamed(ctx context.Context, req openai.ChatCompletionRequest, obs Observer) (Reply, error) {
	s, err := m.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return Reply{}, err
	}
	defer s.Close()
	var text strings.Builder
	var reply Reply
	var usage *openai.Usage
	for events := 0; ; events++ {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) && events == 0 {
			return m.unstreamed(ctx, obs)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Reply{}, err
		}
		if chunk.Model != "" {
			reply.Model = chunk.Model
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			d := ch.Delta.Content
			if ch.Index != 0 || d == "" {
				continue
			}
			if text.Len()+len(d) > m.maxResp {
				return Reply{}, errAnswerTooLarge
			}
			text.WriteString(d)
			obs.Token(d)
		}
	}
	reply.Text = text.String()
	if usage != nil {
		reply.Usage = Usage{PromptTokens: int64(usage.PromptTokens), CompletionTokens: int64(usage.CompletionTokens)}
	} else { // the server streamed no usage: estimate, so budgets still see the spend
		var prompt int
		for _, msg := range req.Messages {
			prompt += len(msg.Content)
		}
		reply.Usage = Usage{PromptTokens: roughTokens(prompt), CompletionTokens: roughTokens(text.Len())}
	}
	return reply, nil
}

// unstreamed reads the plain JSON answer a server sent to a stream
// request (the transport kept it aside), and makes later requests plain.
func (m *openAIModel) unstreamed(ctx context.Context, obs Observer) (Reply, error) {
	info, _ := ctx.Value(responseInfoKey{}).(*responseInfo)
	if info == nil || info.plain == nil {
		return Reply{}, errNotStreamed
	}
	m.noStream.Store(true)
	var resp openai.ChatCompletionResponse
	if err := json.Unmarshal(info.plain, &resp); err != nil {
		return Reply{}, fmt.Errorf("%w: %v", errNotStreamed, err)
	}
	reply, err := m.replyOf(resp)
	if err != nil {
		return Reply{}, err
	}
	obs.Token(reply.Text)
	return reply, nil
}

// roughTokens is the usual rough count of four bytes a token.
func roughTokens(bytes int) int64 { return int64((bytes + 3) / 4) }

// priced is u's cost at [model.price] (USD per million tokens).
func priced(p config.Price, u Usage) float64 {
	return (float64(u.PromptTokens)*p.InputPerMTok + float64(u.CompletionTokens)*p.OutputPerMTok) / 1e6
}

// silentObserver is used when the caller passes none.
type silentObserver struct{}

func (silentObserver) Consulted(Consultation)    {}
func (silentObserver) Waiting(string, time.Time) {}
func (silentObserver) Token(string)              {}

// responseInfo carries the status and headers of the last response from
// the transport to the retry loop: go-openai's errors keep the status but
// not the headers, and Retry-After lives there.
type responseInfo struct {
	status int
	header http.Header
	plain  []byte // a JSON answer to a stream request, which go-openai cannot read
}

type responseInfoKey struct{}

// Bounds on what is read from a server.
const (
	maxErrorBody   = 64 << 10
	maxSuccessBody = 32 << 20 // a JSON answer or an SSE stream, envelope included
)

// recordingDoer sends requests for go-openai, noting each response's
// status and headers and bounding its body.
type recordingDoer struct{ c *http.Client }

func (d recordingDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req)
	if err != nil {
		return nil, err
	}
	limit := int64(maxSuccessBody)
	if resp.StatusCode >= 400 {
		limit = maxErrorBody
	}
	info, _ := req.Context().Value(responseInfoKey{}).(*responseInfo)
	if info == nil {
		resp.Body = &cappedBody{rc: resp.Body, left: limit, truncate: resp.StatusCode >= 400}
		return resp, nil
	}
	info.status, info.header = resp.StatusCode, resp.Header.Clone()
	if resp.StatusCode < 300 && req.Header.Get("Accept") == "text/event-stream" &&
		strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// A plain answer to a stream request: keep it for unstreamed, and
		// give go-openai's stream reader an empty stream.
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if int64(len(body)) > limit {
			return nil, errAnswerTooLarge
		}
		info.plain = body
		resp.Body = io.NopCloser(strings.NewReader(""))
		return resp, nil
	}
	resp.Body = &cappedBody{rc: resp.Body, left: limit, truncate: resp.StatusCode >= 400}
	if resp.StatusCode < 300 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &sseFields{rc: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10)}
	}
	return resp, nil
}

// sseFields drops the SSE lines go-openai's stream reader does not need:
// blank lines, comments (": OPENROUTER PROCESSING", sent while a model
// thinks) and the event:, id: and retry: fields. The reader keeps such
// lines with the data it reads next, so an error sent as "event: error"
// then "data: {"error":…}" would not parse, and counts each towards its
// limit of 300 empty messages, which a long think exceeds.
type sseFields struct {
	rc   io.ReadCloser
	r    *bufio.Reader
	line []byte // the rest of a kept line not yet returned
	mid  bool   // the last chunk read was the start or middle of a line longer than the buffer
	drop bool   // the line being read is dropped
}

func (s *sseFields) Read(p []byte) (int, error) {
	for len(s.line) == 0 {
		line, err := s.r.ReadSlice('\n')
		if !s.mid { // a new line: decide for all of it
			s.drop = len(line) > 0 && sseDropped(line)
		}
		s.mid = err == bufio.ErrBufferFull
		if !s.drop {
			s.line = line
		}
		if err != nil && err != bufio.ErrBufferFull && len(s.line) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, s.line)
	s.line = s.line[n:]
	return n, nil
}

func sseDropped(line []byte) bool {
	return len(bytes.TrimSpace(line)) == 0 || line[0] == ':' || bytes.HasPrefix(line, []byte("event:")) || bytes.HasPrefix(line, []byte("id:")) ||
		bytes.HasPrefix(line, []byte("retry:"))
}

func (s *sseFields) Close() error { return s.rc.Close() }

// cappedBody ends a body after a limit: error bodies are cut short quietly
// (only their message matters), others fail with errAnswerTooLarge.
type cappedBody struct {
	rc       io.ReadCloser
	left     int64
	truncate bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if b.truncate {
			return 0, io.EOF
		}
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// redactBaseURL hides credentials written into a URL: its user
// information and secret-looking query keys.
func redactBaseURL(s string) string { return config.RedactURL(s) }
