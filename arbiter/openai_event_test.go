package arbiter_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
)

// eventServer answers every chat completion with HTTP 200 and an SSE
// stream holding events (each a JSON object); after the first `fail`
// requests it streams one text chunk instead, so a retried request can
// succeed. It counts the requests.
func eventServer(t *testing.T, event string, fail int64) (*httptest.Server, *atomic.Int64) {
	return framedEventServer(t, event, fail, false)
}

// framedEventServer is eventServer that, when framed, also sends what
// SSE allows around the events: comments (as OpenRouter does while a
// model thinks, 400 of them before the answer), id: and retry: fields,
// and "event: error" before an error's data.
func framedEventServer(t *testing.T, event string, fail int64, framed bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		i := n.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if i <= fail {
			if framed {
				fmt.Fprint(w, ": OPENROUTER PROCESSING\n\nid: 7\nretry: 1000\nevent: error\n")
			}
			fmt.Fprintf(w, "data: %s\n\n", event)
			return
		}
		if framed {
			for range 400 { // more than go-openai's limit of 300 empty messages
				fmt.Fprint(w, ": OPENROUTER PROCESSING\n\n")
			}
		}
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"(do)"},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func eventModel(t *testing.T, srv *httptest.Server) arbiter.Model {
	t.Helper()
	cfg := config.Model{Provider: "openai", Model: "gpt-4o-mini", BaseURL: srv.URL + "/v1", APIKeyEnv: "RALPH_TEST_KEY"}
	m, err := arbiter.NewOpenAI(cfg, testKey, arbiter.OpenAIOptions{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOpenAIStreamErrorEventsAreClassified: a server that answers a
// streamed request with 200 and then an error event is classified by the
// event's code and type as the HTTP status would be: a bad key, an
// unserved model and an empty account fail at once with their fix, a
// prompt over the context length is ErrContextLength, a rate limit waits
// and tries again.
func TestOpenAIStreamErrorEventsAreClassified(t *testing.T) {
	t.Parallel()
	fatal := []struct {
		name, event string
		want        []string
	}{
		{"invalid_api_key", `{"error":{"message":"Incorrect API key provided: sk-test-***6a. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			[]string{"refused the API key", "set RALPH_TEST_KEY to a valid key", "invalid_api_key"}},
		{"authentication_error type", `{"error":{"message":"Invalid API key provided.","type":"authentication_error","code":null}}`,
			[]string{"refused the API key", "set RALPH_TEST_KEY"}},
		{"openrouter 401", `{"error":{"code":401,"message":"No auth credentials found"}}`,
			[]string{"refused the API key", "set RALPH_TEST_KEY"}},
		{"permission", `{"error":{"message":"not allowed","type":"permission_error"}}`,
			[]string{"denied access", "RALPH_TEST_KEY"}},
		{"model_not_found", `{"error":{"message":"The model ` + "`gpt-4o-mini`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			[]string{"model gpt-4o-mini is not served at"}},
		{"insufficient_quota", `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			[]string{"out of quota", "billing"}},
		{"openrouter 402", `{"error":{"code":402,"message":"Insufficient credits"}}`,
			[]string{"out of quota"}},
	}
	for _, tc := range fatal {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, n := eventServer(t, tc.event, 100)
			_, err := eventModel(t, srv).Complete(context.Background(), prompt, &recorder{})
			if !errors.Is(err, arbiter.ErrFatal) {
				t.Fatalf("err = %v, want ErrFatal", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the key: %v", err)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("%d requests, want 1: a fatal error event is not retried", got)
			}
		})
	}
	t.Run("context_length_exceeded", func(t *testing.T) {
		t.Parallel()
		srv, n := eventServer(t, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, 100)
		_, err := eventModel(t, srv).Complete(context.Background(), prompt, &recorder{})
		if !errors.Is(err, arbiter.ErrContextLength) || n.Load() != 1 {
			t.Fatalf("err = %v after %d requests, want ErrContextLength after 1", err, n.Load())
		}
	})
	for name, ev := range map[string]string{
		"rate_limit_exceeded": `{"error":{"message":"Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		"openrouter 429":      `{"error":{"code":429,"message":"Rate limit exceeded"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, n := eventServer(t, ev, 2)
			rec := &recorder{}
			reply, err := eventModel(t, srv).Complete(context.Background(), prompt, rec)
			if err != nil || reply.Text != "(do)" {
				t.Fatalf("reply %q, err %v; want the answer after waiting", reply.Text, err)
			}
			if n.Load() != 3 || len(rec.waits) != 2 || !strings.Contains(rec.waits[0].reason, "rate limited") {
				t.Errorf("%d requests, waits %+v; want 3 requests after 2 rate-limit waits", n.Load(), rec.waits)
			}
		})
	}
	t.Run("server_error retried", func(t *testing.T) {
		t.Parallel()
		srv, n := eventServer(t, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":null}}`, 1)
		reply, err := eventModel(t, srv).Complete(context.Background(), prompt, &recorder{})
		if err != nil || reply.Text != "(do)" || n.Load() != 2 {
			t.Fatalf("reply %q, err %v after %d requests; want the answer on the retry", reply.Text, err, n.Load())
		}
	})
	t.Run("event: error framing and comments", func(t *testing.T) {
		t.Parallel()
		srv, n := framedEventServer(t, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, 100, true)
		_, err := eventModel(t, srv).Complete(context.Background(), prompt, &recorder{})
		if !errors.Is(err, arbiter.ErrFatal) || !strings.Contains(err.Error(), "refused the API key") || n.Load() != 1 {
			t.Fatalf("err = %v after %d requests, want the bad key at once", err, n.Load())
		}
		srv, n = framedEventServer(t, `{"error":{"code":429,"message":"Rate limit exceeded"}}`, 1, true)
		reply, err := eventModel(t, srv).Complete(context.Background(), prompt, &recorder{})
		if err != nil || reply.Text != "(do)" || n.Load() != 2 {
			t.Fatalf("reply %q, err %v after %d requests; want the answer after the comments", reply.Text, err, n.Load())
		}
	})
}
