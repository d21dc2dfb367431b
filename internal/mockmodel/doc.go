// Package mockmodel is a model server for tests: it speaks the vendors'
// real streaming protocols over HTTP (Anthropic Messages SSE, OpenAI
// Responses SSE, Gemini streamGenerateContent SSE), so that the real agent
// CLIs can run against it with no account and no network. Each vendor's
// handler replies from a script of turns (text, tool calls, errors, limits,
// retries, hangs, floods), chosen from the conversation it is sent.
//
// It is a test helper: nothing in ralph's binary imports it.
package mockmodel
