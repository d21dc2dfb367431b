package oaitest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ralphloop/ralph/arbiter/oaitest"
)

func client(srv *oaitest.Server, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = srv.BaseURL
	return openai.NewClientWithConfig(cfg)
}

func TestPlainAnswerAndRecording(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text("(do 1)").WithUsage(11, 3))
	resp, err := client(srv, "sk-test").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		//lint:ignore SA1019 the fake server must record max_tokens, the field compatible servers read
		Model: "gpt-4o-mini", Temperature: 0.25, MaxTokens: 64,
		Messages:       []openai.ChatCompletionMessage{{Role: "system", Content: "rules"}, {Role: "user", Content: "plan"}},
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "(do 1)" {
		t.Errorf("content = %q", got)
	}
	if resp.Usage.PromptTokens != 11 || resp.Usage.CompletionTokens != 3 || resp.Usage.TotalTokens != 14 {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.Model != "gpt-4o-mini" {
		t.Errorf("model = %q", resp.Model)
	}
	reqs := srv.Completions()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Model != "gpt-4o-mini" || r.ResponseFormat != "json_object" || r.Stream || r.MaxTokens != 64 ||
		r.Temperature == nil || *r.Temperature != 0.25 || r.Authorization() != "sk-test" || r.Answered != 0 || r.Status != 200 {
		t.Errorf("recorded %+v", r)
	}
	if len(r.Messages) != 2 || r.Messages[0] != (oaitest.Message{Role: "system", Content: "rules"}) || r.Messages[1].Content != "plan" {
		t.Errorf("messages = %+v", r.Messages)
	}
	if srv.Remaining() != 0 || srv.Unserved() != 0 {
		t.Errorf("remaining %d unserved %d", srv.Remaining(), srv.Unserved())
	}
}

func TestStreamingWithUsage(t *testing.T) {
	t.Parallel()
	text := "(do (call :ccos.echo {:message \"hi there\"}))"
	srv := oaitest.New(t, oaitest.Options{}, oaitest.Text(text).WithUsage(40, 9), oaitest.Text("no usage"))
	c := client(srv, "k")
	for i, includeUsage := range []bool{true, false} {
		req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "go"}}}
		if includeUsage {
			req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
		}
		stream, err := c.CreateChatCompletionStream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		var chunks int
		var usage *openai.Usage
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != nil {
				usage = resp.Usage
			}
			for _, ch := range resp.Choices {
				if ch.Delta.Content != "" {
					chunks++
				}
				got.WriteString(ch.Delta.Content)
			}
		}
		stream.Close()
		switch {
		case i == 0 && (got.String() != text || chunks != len(oaitest.Split(text)) || chunks < 3):
			t.Errorf("streamed %q in %d chunks", got.String(), chunks)
		case i == 0 && (usage == nil || usage.PromptTokens != 40 || usage.CompletionTokens != 9):
			t.Errorf("usage = %+v", usage)
		case i == 1 && (got.String() != "no usage" || usage != nil):
			t.Errorf("without include_usage: %q, usage %+v", got.String(), usage)
		}
	}
	if r := srv.Completions(); !r[0].Stream || !r[0].IncludeUsage || r[1].IncludeUsage {
		t.Errorf("recorded stream flags %+v", r)
	}
}

func TestErrorsAndHeaders(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{}, oaitest.RateLimit("7"), oaitest.Raw(502, "<html>bad gateway</html>"), oaitest.ContextLength())
	c := client(srv, "k")
	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}}

	resp, err := http.Post(srv.BaseURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("429: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	_, err = c.CreateChatCompletion(context.Background(), req)
	var reqErr *openai.RequestError
	if !errors.As(err, &reqErr) || reqErr.HTTPStatusCode != 502 {
		t.Errorf("502: %v", err)
	}
	_, err = c.CreateChatCompletion(context.Background(), req)
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Code != "context_length_exceeded" {
		t.Errorf("context length: %v", err)
	}
	_, err = c.CreateChatCompletion(context.Background(), req)
	if !errors.As(err, &apiErr) || apiErr.Code != "oaitest_exhausted" || srv.Unserved() != 1 {
		t.Errorf("exhausted: %v (unserved %d)", err, srv.Unserved())
	}
}

func TestBuiltInRefusals(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{APIKey: "sk-right", Models: []string{"served"}, RejectJSONMode: true}, oaitest.Text("ok"))
	req := openai.ChatCompletionRequest{Model: "served", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}}
	var apiErr *openai.APIError

	_, err := client(srv, "sk-wrong").CreateChatCompletion(context.Background(), req)
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || !strings.Contains(apiErr.Message, "sk-wrong") {
		t.Errorf("wrong key: %v", err)
	}
	other := req
	other.Model = "missing"
	_, err = client(srv, "sk-right").CreateChatCompletion(context.Background(), other)
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}
	jsonReq := req
	jsonReq.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	_, err = client(srv, "sk-right").CreateChatCompletion(context.Background(), jsonReq)
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Param == nil || *apiErr.Param != "response_format" {
		t.Errorf("JSON mode: %v", err)
	}
	if srv.Remaining() != 1 {
		t.Errorf("refusals consumed script answers: %d left", srv.Remaining())
	}
	resp, err := client(srv, "sk-right").CreateChatCompletion(context.Background(), req)
	if err != nil || resp.Choices[0].Message.Content != "ok" {
		t.Errorf("served: %v %+v", err, resp)
	}
	models, err := client(srv, "sk-right").ListModels(context.Background())
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "served" {
		t.Errorf("models: %v %+v", err, models)
	}
	for i, r := range srv.Requests()[:3] {
		if r.Answered != -1 {
			t.Errorf("request %d answered from the script", i)
		}
	}
}

func TestStreamFailures(t *testing.T) {
	t.Parallel()
	srv := oaitest.New(t, oaitest.Options{},
		oaitest.Answer{Content: "partial", StreamError: "The server had an error while processing your request."},
		oaitest.Answer{Content: "cut off", Cut: true})
	c := client(srv, "k")
	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}}
	for i := range 2 {
		stream, err := c.CreateChatCompletionStream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var last error
		for {
			if _, err := stream.Recv(); err != nil {
				last = err
				break
			}
		}
		stream.Close()
		if i == 0 && (last == nil || !strings.Contains(last.Error(), "server had an error")) {
			t.Errorf("stream error: %v", last)
		}
		if i == 1 && !errors.Is(last, io.ErrUnexpectedEOF) {
			t.Errorf("cut stream: %v", last)
		}
	}
}

func TestSplitJoinsBack(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "  lead", "a b  c\n", "(do\n  (x))"} {
		if got := strings.Join(oaitest.Split(s), ""); got != s {
			t.Errorf("Split(%q) joins to %q", s, got)
		}
	}
}
