package arbiter_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/arbiter/oaitest"
	"github.com/ralphloop/ralph/config"
)

const testKey = "sk-test-7f3a9c2e51b84d6a"

// fastRetry keeps backoffs to milliseconds; rate-limit waits still honour
// the server's Retry-After.
var fastRetry = arbiter.RetryPolicy{Base: time.Millisecond, Max: 4 * time.Millisecond}

func newModel(t *testing.T, srv *oaitest.Server, edit func(*config.Model)) arbiter.Model {
	t.Helper()
	temp := 0.2
	cfg := config.Model{Provider: "openai", Model: "gpt-4o-mini", BaseURL: srv.BaseURL, APIKeyEnv: "RALPH_TEST_KEY",
		Temperature: &temp, MaxTokens: 512, Price: config.Price{InputPerMTok: 0.15, OutputPerMTok: 0.60}}
	if edit != nil {
		edit(&cfg)
	}
	m, err := arbiter.NewOpenAI(cfg, testKey, arbiter.OpenAIOptions{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var prompt = arbiter.Completion{Messages: []arbiter.Message{
	{Role: "system", Content: "You write RTFS plans."},
	{Role: "user", Content: "Goal: say hello."},
}}

// recorder is an Observer that keeps what it hears.
type recorder struct {
	mu     sync.Mutex
	tokens []string
	waits  []wait
}

type wait struct {
	reason string
	until  time.Time
	at     time.Time
}

func (r *recorder) Consulted(arbiter.Consultation) {}
func (r *recorder) Waiting(reason string, until time.Time) {
	r.mu.Lock()
	r.waits = append(r.waits, wait{reason, until, time.Now()})
	r.mu.Unlock()
}
func (r *recorder) Token(text string) {
	r.mu.Lock()
	r.tokens = append(r.tokens, text)
	r.mu.Unlock()
}

func TestOpenAIPlainAnswer(t *testing.T) {
	t.Parallel()
	plan := `(do (call :ccos.echo {:message "hello"}))`
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text(plan).WithUsage(1200, 300))
	m := newModel(t, srv, nil)
	if m.Name() != "openai/gpt-4o-mini" {
		t.Errorf("Name = %q", m.Name())
	}
	reply, err := m.Complete(context.Background(), prompt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != plan || reply.Model != "gpt-4o-mini" {
		t.Errorf("reply = %+v", reply)
	}
	wantCost := (1200*0.15 + 300*0.60) / 1e6
	if reply.Usage.PromptTokens != 1200 || reply.Usage.CompletionTokens != 300 || !near(reply.Usage.CostUSD, wantCost) {
		t.Errorf("usage = %+v, want cost %g", reply.Usage, wantCost)
	}
	reqs := srv.Completions()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "gpt-4o-mini" || r.Stream || r.ResponseFormat != "" || r.MaxTokens != 512 || r.Authorization() != testKey {
		t.Errorf("request = %+v", r)
	}
	if r.Temperature == nil || !near(*r.Temperature, 0.2) {
		t.Errorf("temperature = %v", r.Temperature)
	}
	want := []oaitest.Message{{Role: "system", Content: "You write RTFS plans."}, {Role: "user", Content: "Goal: say hello."}}
	if !slices.Equal(r.Messages, want) {
		t.Errorf("messages = %+v", r.Messages)
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

func TestOpenAIStreaming(t *testing.T) {
	t.Parallel()
	plan := "(do\n  (step \"Greet\" (call :ccos.echo {:message \"hello world\"})))"
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text(plan).WithUsage(900, 40))
	m := newModel(t, srv, nil)
	obs := &recorder{}
	reply, err := m.Complete(context.Background(), prompt, obs)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != plan {
		t.Errorf("text = %q", reply.Text)
	}
	if got := strings.Join(obs.tokens, ""); got != plan || len(obs.tokens) < 4 {
		t.Errorf("tokens %q (%d) do not spell the plan", got, len(obs.tokens))
	}
	if reply.Usage.PromptTokens != 900 || reply.Usage.CompletionTokens != 40 || !near(reply.Usage.CostUSD, (900*0.15+40*0.6)/1e6) {
		t.Errorf("usage = %+v", reply.Usage)
	}
	r := srv.Completions()[0]
	if !r.Stream || !r.IncludeUsage {
		t.Errorf("stream %v include_usage %v", r.Stream, r.IncludeUsage)
	}
}

func TestOpenAIStreamWithoutUsageIsEstimated(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{IgnoreIncludeUsage: true}, oaitest.Text(strings.Repeat("word ", 40)))
	reply, err := newModel(t, srv, nil).Complete(context.Background(), prompt, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Usage.CompletionTokens != 50 || reply.Usage.PromptTokens == 0 || reply.Usage.CostUSD <= 0 {
		t.Errorf("estimated usage = %+v", reply.Usage)
	}
}

func TestOpenAIStreamOptionsRejectedFallsBack(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{},
		oaitest.Error(400, "", "Unrecognized request argument supplied: stream_options"), oaitest.Text("a"), oaitest.Text("b"))
	m := newModel(t, srv, nil)
	for _, want := range []string{"a", "b"} {
		reply, err := m.Complete(context.Background(), prompt, &recorder{})
		if err != nil || reply.Text != want {
			t.Fatalf("reply %+v, %v", reply, err)
		}
	}
	reqs := srv.Completions()
	if len(reqs) != 3 || !reqs[0].IncludeUsage || reqs[1].IncludeUsage || reqs[2].IncludeUsage {
		t.Errorf("include_usage per request: %v", includeUsage(reqs))
	}
}

func includeUsage(reqs []oaitest.Request) []bool {
	var out []bool
	for _, r := range reqs {
		out = append(out, r.IncludeUsage)
	}
	return out
}

func TestOpenAIJSONMode(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text(`{"steps": []}`))
	c := prompt
	c.JSON = true
	if _, err := newModel(t, srv, nil).Complete(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	if r := srv.Completions()[0]; r.ResponseFormat != "json_object" {
		t.Errorf("response_format = %q", r.ResponseFormat)
	}
}

func TestOpenAIJSONModeRejectedFallsBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts oaitest.Options
		pre  []oaitest.Answer
	}{
		{name: "server refuses response_format", opts: oaitest.Options{RejectJSONMode: true}},
		{name: "scripted 400 naming response_format", pre: []oaitest.Answer{oaitest.JSONModeRejected()}},
		{name: "422 from a vLLM-style server", pre: []oaitest.Answer{oaitest.Error(422, "", "response_format json_object is not supported by this server")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := oaitest.New(t, tc.opts, append(tc.pre, oaitest.Text(`{"steps": []}`), oaitest.Text(`{"steps": [1]}`))...)
			m := newModel(t, srv, nil)
			c := prompt
			c.JSON = true
			for _, want := range []string{`{"steps": []}`, `{"steps": [1]}`} {
				reply, err := m.Complete(context.Background(), c, &recorder{})
				if err != nil || reply.Text != want {
					t.Fatalf("reply %+v, %v", reply, err)
				}
			}
			var formats []string
			for _, r := range srv.Completions() {
				formats = append(formats, r.ResponseFormat)
			}
			// Asked once, then never again: the model remembers the refusal.
			if !slices.Equal(formats, []string{"json_object", "", ""}) {
				t.Errorf("response_format per request = %q", formats)
			}
		})
	}
}

func TestOpenAIRateLimitWaitsForRetryAfter(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.RateLimit("1"), oaitest.Text("(do 1)"))
	m := newModel(t, srv, func(c *config.Model) { c.Model = "gpt-4o" })
	obs := &recorder{}
	start := time.Now()
	reply, err := m.Complete(context.Background(), prompt, obs)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "(do 1)" {
		t.Errorf("text = %q", reply.Text)
	}
	if len(obs.waits) != 1 {
		t.Fatalf("waits = %+v", obs.waits)
	}
	w := obs.waits[0]
	if d := w.until.Sub(w.at); d < 900*time.Millisecond || d > 1100*time.Millisecond {
		t.Errorf("until is %s after the wait was announced, want ≈1s", d)
	}
	if !strings.Contains(w.reason, "429") || !strings.Contains(w.reason, "rate limited") {
		t.Errorf("reason = %q", w.reason)
	}
	if !srv.Completions()[1].At.After(start.Add(900 * time.Millisecond)) {
		t.Errorf("the retry came before Retry-After elapsed")
	}
}

// Rate limits that mention quotas in passing are rate limits: Azure links
// "aka.ms/oai/quotaincrease" and Gemini says "check quota" on every
// per-minute 429. Only an exhausted account (insufficient_quota) is fatal.
func TestOpenAIRateLimitMentioningQuotaWaits(t *testing.T) {
	t.Parallel()
	for _, first := range []oaitest.Answer{
		oaitest.Error(429, "429", "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 1 second. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.").WithHeader("Retry-After", "0"),
		oaitest.Error(429, "", "Resource has been exhausted (e.g. check quota)."),
	} {
		srv := oaitest.New(t, oaitest.Options{}, first, oaitest.Text("(do 1)"))
		obs := &recorder{}
		reply, err := newModel(t, srv, nil).Complete(context.Background(), prompt, obs)
		if err != nil || reply.Text != "(do 1)" {
			t.Fatalf("reply %+v, %v: a rate limit must be waited out", reply, err)
		}
		if len(obs.waits) != 1 || len(srv.Completions()) != 2 {
			t.Errorf("%d waits, %d requests", len(obs.waits), len(srv.Completions()))
		}
	}
}

func TestOpenAIRateLimitHTTPDateAndBudget(t *testing.T) {
	t.Parallel()
	answers := []oaitest.Answer{oaitest.RateLimit(time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat))} // a past date: go at once
	for range 40 {
		answers = append(answers, oaitest.RateLimit("")) // no header: back off
	}
	srv := oaitest.New(t, oaitest.Options{}, answers...)
	p := fastRetry
	p.RateLimitBudget = 10 * time.Millisecond
	m, err := arbiter.NewOpenAI(config.Model{Model: "m", BaseURL: srv.BaseURL}, testKey, arbiter.OpenAIOptions{Retry: p})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recorder{}
	_, err = m.Complete(context.Background(), prompt, obs)
	if err == nil || !strings.Contains(err.Error(), "kept rate-limiting") || errors.Is(err, arbiter.ErrFatal) {
		t.Fatalf("err = %v", err)
	}
	if len(obs.waits) < 3 || len(obs.waits) != len(srv.Completions())-1 {
		t.Errorf("%d waits for %d requests, want one per 429 until the budget ran out", len(obs.waits), len(srv.Completions()))
	}
	if srv.Unserved() != 0 {
		t.Errorf("the budget did not stop the retries")
	}
}

func TestOpenAIServerErrorsAreRetried(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.ServerError(), oaitest.Raw(502, "<html>Bad Gateway</html>"), oaitest.Text("ok"))
	obs := &recorder{}
	reply, err := newModel(t, srv, nil).Complete(context.Background(), prompt, obs)
	if err != nil || reply.Text != "ok" {
		t.Fatalf("reply %+v, %v", reply, err)
	}
	if len(srv.Completions()) != 3 || len(obs.waits) != 2 {
		t.Fatalf("%d requests, %d waits", len(srv.Completions()), len(obs.waits))
	}
	if r := obs.waits[0].reason; !strings.Contains(r, "500") || !strings.Contains(r, "retry 1 of 5") {
		t.Errorf("first wait reason = %q", r)
	}
	if r := obs.waits[1].reason; !strings.Contains(r, "502") || !strings.Contains(r, "retry 2 of 5") {
		t.Errorf("second wait reason = %q", r)
	}
}

func TestOpenAIGivesUpAfterFiveRetries(t *testing.T) {
	t.Parallel()
	var answers []oaitest.Answer
	for range 7 {
		answers = append(answers, oaitest.Error(503, "", "The engine is currently overloaded, please try again later."))
	}
	srv := oaitest.New(t, oaitest.Options{}, answers...)
	_, err := newModel(t, srv, nil).Complete(context.Background(), prompt, nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{srv.BaseURL, "failed 6 times", "503", "overloaded"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if errors.Is(err, arbiter.ErrFatal) || errors.Is(err, arbiter.ErrContextLength) {
		t.Errorf("transient exhaustion classed as %v", err)
	}
	if n := len(srv.Completions()); n != 6 {
		t.Errorf("%d requests, want 1 + 5 retries", n)
	}
}

func TestOpenAITimeoutsAndDropsAreRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		first  oaitest.Answer
		stream bool
		reason string
	}{
		{name: "timeout", first: oaitest.Text("late").WithDelay(5 * time.Second), reason: "model.timeout"},
		{name: "streamed timeout", first: oaitest.Text("late").WithDelay(5 * time.Second), stream: true, reason: "model.timeout"},
		{name: "dropped stream", first: oaitest.Answer{Content: "(do (call", Cut: true}, stream: true, reason: "dropped the connection"},
		{name: "error event mid-stream", first: oaitest.Answer{Content: "(do", StreamError: "The server had an error processing your request."},
			stream: true, reason: "mid-answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := oaitest.New(t, oaitest.Options{}, tc.first, oaitest.Text("(do 1)"))
			m := newModel(t, srv, func(c *config.Model) { c.Timeout.Duration = 200 * time.Millisecond })
			obs := &recorder{}
			var o arbiter.Observer
			if tc.stream {
				o = obs
			}
			reply, err := m.Complete(context.Background(), prompt, o)
			if err != nil || reply.Text != "(do 1)" {
				t.Fatalf("reply %+v, %v", reply, err)
			}
			if tc.stream && (len(obs.waits) != 1 || !strings.Contains(obs.waits[0].reason, tc.reason)) {
				t.Errorf("waits = %+v, want one mentioning %q", obs.waits, tc.reason)
			}
			if len(srv.Completions()) != 2 {
				t.Errorf("%d requests", len(srv.Completions()))
			}
		})
	}
}

func TestOpenAIFatalErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  oaitest.Options
		first oaitest.Answer
		base  string // appended to the server root instead of /v1
		want  []string
	}{
		{name: "401 echoing the key", opts: oaitest.Options{APIKey: "sk-the-right-one-123456"},
			want: []string{"refused the API key", "401", "set RALPH_TEST_KEY to a valid key"}},
		{name: "401 scripted", first: oaitest.Unauthorized(), want: []string{"set RALPH_TEST_KEY"}},
		{name: "403", first: oaitest.Error(403, "unsupported_country_region_territory", "Country, region, or territory not supported"),
			want: []string{"denied access", "403", "RALPH_TEST_KEY", "gpt-4o-mini"}},
		{name: "model not served", opts: oaitest.Options{Models: []string{"llama3.1:8b", "qwen2.5-coder"}},
			want: []string{"model gpt-4o-mini is not served at", "/v1", "set model.model to one it serves: llama3.1:8b, qwen2.5-coder"}},
		{name: "404 model scripted", first: oaitest.ModelNotFound("gpt-4o-mini"), want: []string{"model gpt-4o-mini is not served at"}},
		{name: "base_url without /v1", base: "/", want: []string{"/chat/completions does not exist", "ends in /v1"}},
		{name: "quota", first: oaitest.Error(429, "insufficient_quota", "You exceeded your current quota, please check your plan and billing details."),
			want: []string{"out of quota", "billing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var answers []oaitest.Answer
			if tc.first.Status != 0 {
				answers = append(answers, tc.first)
			}
			srv := oaitest.New(t, tc.opts, append(answers, oaitest.Text("never"))...)
			m := newModel(t, srv, func(c *config.Model) {
				if tc.base != "" {
					c.BaseURL = srv.URL() + tc.base
				}
			})
			_, err := m.Complete(context.Background(), prompt, &recorder{})
			if !errors.Is(err, arbiter.ErrFatal) {
				t.Fatalf("err = %v, want ErrFatal", err)
			}
			msg := err.Error()
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			if strings.Contains(msg, testKey) || strings.Contains(msg, "sk-test") {
				t.Errorf("error leaks the API key: %q", msg)
			}
			var posts int
			for _, r := range srv.Requests() {
				if r.Method == http.MethodPost {
					posts++
				}
			}
			if posts != 1 {
				t.Errorf("%d requests, want 1: fatal errors are not retried", posts)
			}
		})
	}
}

func TestOpenAIContextLength(t *testing.T) {
	t.Parallel()
	for _, a := range []oaitest.Answer{
		oaitest.ContextLength(),
		oaitest.Error(400, "", "the request exceeds the available context size, try increasing it"), // llama.cpp
		oaitest.Raw(413, "Request Entity Too Large"),
	} {
		srv := oaitest.New(t, oaitest.Options{}, a, oaitest.Text("never"))
		_, err := newModel(t, srv, nil).Complete(context.Background(), prompt, nil)
		if !errors.Is(err, arbiter.ErrContextLength) || errors.Is(err, arbiter.ErrFatal) {
			t.Errorf("%d %s: err = %v, want ErrContextLength", a.Status, a.Body, err)
		}
		if n := len(srv.Completions()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	}
}

func TestOpenAIRejectedRequestIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Error(400, "invalid_value", "Invalid value for 'messages[0].role'"), oaitest.Text("never"))
	_, err := newModel(t, srv, nil).Complete(context.Background(), prompt, nil)
	if err == nil || errors.Is(err, arbiter.ErrFatal) || !strings.Contains(err.Error(), "rejected the request") ||
		!strings.Contains(err.Error(), "messages[0].role") {
		t.Errorf("err = %v", err)
	}
	if n := len(srv.Completions()); n != 1 {
		t.Errorf("%d requests", n)
	}
}

func TestOpenAINewRequiresKeyAndModel(t *testing.T) {
	t.Parallel()
	_, err := arbiter.NewOpenAI(config.Model{Model: "gpt-4o-mini"}, "", arbiter.OpenAIOptions{})
	if !errors.Is(err, arbiter.ErrFatal) || !strings.Contains(err.Error(), "set OPENAI_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	_, err = arbiter.NewOpenAI(config.Model{Model: "gpt-4o-mini", APIKeyEnv: "OPENROUTER_API_KEY"}, "", arbiter.OpenAIOptions{})
	if err == nil || !strings.Contains(err.Error(), "set OPENROUTER_API_KEY") {
		t.Errorf("no key, custom env: %v", err)
	}
	_, err = arbiter.NewOpenAI(config.Model{}, testKey, arbiter.OpenAIOptions{})
	if !errors.Is(err, arbiter.ErrFatal) || !strings.Contains(err.Error(), "model.model") {
		t.Errorf("no model: %v", err)
	}
	_, err = arbiter.NewOpenAI(config.Model{Model: "m", BaseURL: "ftp://x"}, testKey, arbiter.OpenAIOptions{})
	if err == nil || !strings.Contains(err.Error(), "base_url") {
		t.Errorf("bad base_url: %v", err)
	}
}

func TestOpenAIRequestSettings(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text("a"), oaitest.Text("b"), oaitest.Text("c"))
	zero := 0.0
	// temperature = 0 must reach the server (go-openai drops a plain zero).
	if _, err := newModel(t, srv, func(c *config.Model) { c.Temperature = &zero }).Complete(context.Background(), prompt, nil); err != nil {
		t.Fatal(err)
	}
	// No temperature and no max_tokens configured: neither is sent.
	if _, err := newModel(t, srv, func(c *config.Model) { c.Temperature, c.MaxTokens = nil, 0 }).Complete(context.Background(), prompt, nil); err != nil {
		t.Fatal(err)
	}
	// Reasoning models take max_completion_tokens.
	if _, err := newModel(t, srv, func(c *config.Model) { c.Model, c.Temperature = "o3-mini", nil }).Complete(context.Background(), prompt, nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Completions()
	if tp := reqs[0].Temperature; tp == nil || *tp > 1e-6 || !slices.Contains(reqs[0].Fields, "temperature") {
		t.Errorf("temperature 0 sent as %v (fields %v)", tp, reqs[0].Fields)
	}
	if slices.Contains(reqs[1].Fields, "temperature") || slices.Contains(reqs[1].Fields, "max_tokens") {
		t.Errorf("unset settings were sent: %v", reqs[1].Fields)
	}
	if !slices.Contains(reqs[2].Fields, "max_completion_tokens") || slices.Contains(reqs[2].Fields, "max_tokens") || reqs[2].MaxTokens != 512 {
		t.Errorf("reasoning model fields %v", reqs[2].Fields)
	}
}

func TestOpenAIReasoningModelTemperatureIsFatal(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text("never"))
	_, err := newModel(t, srv, func(c *config.Model) { c.Model = "o3-mini" }).Complete(context.Background(), prompt, nil)
	if !errors.Is(err, arbiter.ErrFatal) || !strings.Contains(err.Error(), "model.temperature") {
		t.Errorf("err = %v", err)
	}
	if len(srv.Completions()) != 0 {
		t.Errorf("a request was sent")
	}
}

func TestOpenAIAnswerTooLarge(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("(", 2<<20)
	for _, stream := range []bool{false, true} {
		srv := oaitest.New(t, oaitest.Options{}, oaitest.Text(huge).WithUsage(1, 1), oaitest.Text("never"))
		m, err := arbiter.NewOpenAI(config.Model{Model: "m", BaseURL: srv.BaseURL}, testKey,
			arbiter.OpenAIOptions{Retry: fastRetry, MaxResponseBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var obs arbiter.Observer
		if stream {
			obs = &recorder{}
		}
		_, err = m.Complete(context.Background(), prompt, obs)
		if err == nil || !strings.Contains(err.Error(), "exceeded") {
			t.Errorf("stream=%v: err = %v", stream, err)
		}
		if n := len(srv.Completions()); n != 1 {
			t.Errorf("stream=%v: %d requests", stream, n)
		}
	}
}

func TestOpenAICancelDuringWait(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.RateLimit("30"), oaitest.Text("never"))
	ctx, cancel := context.WithCancel(context.Background())
	obs := &waitCanceller{cancel: cancel}
	_, err := newModel(t, srv, nil).Complete(ctx, prompt, obs)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// waitCanceller cancels the completion as soon as it starts to wait.
type waitCanceller struct {
	recorder
	cancel context.CancelFunc
}

func (w *waitCanceller) Waiting(string, time.Time) { w.cancel() }

func TestOpenAIUnreachableServer(t *testing.T) {
	t.Parallel()
	srv := oaitest.Start(oaitest.Options{})
	base := srv.BaseURL
	srv.Close()
	p := fastRetry
	p.Retries = 2
	m, err := arbiter.NewOpenAI(config.Model{Model: "m", BaseURL: base}, testKey, arbiter.OpenAIOptions{Retry: p})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(context.Background(), prompt, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), "failed 3 times") {
		t.Errorf("err = %v", err)
	}
}

func TestOpenAIBaseURLCredentialsStayHidden(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Unauthorized())
	withCreds := strings.Replace(srv.BaseURL, "http://", "http://user:hunter2@", 1)
	m, err := arbiter.NewOpenAI(config.Model{Model: "m", BaseURL: withCreds}, testKey, arbiter.OpenAIOptions{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(context.Background(), prompt, nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "REDACTED") {
		t.Errorf("err = %v", err)
	}
}

func TestOpenAIServerThatIgnoresStream(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{IgnoreStream: true}, oaitest.Text("(do 1)").WithUsage(5, 3), oaitest.Text("(do 2)"))
	m := newModel(t, srv, nil)
	for _, want := range []string{"(do 1)", "(do 2)"} {
		reply, err := m.Complete(context.Background(), prompt, &recorder{})
		if err != nil || reply.Text != want {
			t.Fatalf("reply %+v, %v", reply, err)
		}
	}
	var streams []bool
	for _, r := range srv.Completions() {
		streams = append(streams, r.Stream)
	}
	// Asked to stream once; the plain answer to that is used as it is, and
	// later questions are asked plainly.
	if !slices.Equal(streams, []bool{true, false}) {
		t.Errorf("stream per request = %v", streams)
	}
}

func TestOpenAIRetryAfterZeroForeverEnds(t *testing.T) {
	t.Parallel()
	var answers []oaitest.Answer
	for range 200 {
		answers = append(answers, oaitest.RateLimit("0"))
	}
	srv := oaitest.New(t, oaitest.Options{}, answers...)
	p := fastRetry
	p.RateLimitBudget = 20 * time.Millisecond
	m, err := arbiter.NewOpenAI(config.Model{Model: "m", BaseURL: srv.BaseURL}, testKey, arbiter.OpenAIOptions{Retry: p})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(context.Background(), prompt, nil); err == nil || !strings.Contains(err.Error(), "kept rate-limiting") {
		t.Errorf("err = %v", err)
	}
	if srv.Remaining() == 0 {
		t.Errorf("every answer was used: the waits did not add up")
	}
}
