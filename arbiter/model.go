package arbiter

import (
	"context"
	"errors"
)

// Message is one chat message.
type Message struct {
	Role    string // "system", "user" or "assistant"
	Content string
}

// Completion asks a model for one answer.
type Completion struct {
	Messages []Message
	// JSON asks for a JSON object (response_format json_object). A server
	// that rejects the option is asked again without it.
	JSON bool
}

// Reply is a model's answer.
type Reply struct {
	Text  string
	Model string // the model that answered, as the server names it
	Usage Usage  // tokens, and cost from [model.price]
}

// Model is one chat-completion endpoint: the openai provider (HTTP, any
// OpenAI-compatible server) or the command provider (a local agent CLI).
// Implementations retry transient failures themselves (429 honouring
// Retry-After, 5xx and timeouts with backoff), telling obs about waits and
// streamed tokens; what they return is final.
type Model interface {
	Complete(ctx context.Context, c Completion, obs Observer) (Reply, error)
	// Name is "provider/model", e.g. "openai/gpt-4o-mini".
	Name() string
}

// ErrFatal marks a provider error that retrying cannot fix: a bad or
// missing API key, a model the server does not serve. The message names
// the fix. The run stops with exit status 2.
var ErrFatal = errors.New("provider cannot serve this run")

// ErrContextLength marks a request the model refused as too long; the
// pipeline shortens the feedback and tries once more.
var ErrContextLength = errors.New("prompt exceeds the model's context length")
