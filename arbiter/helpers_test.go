package arbiter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/rtfs"
)

// memKV lets kv.* register; tests never execute plans.
type memKV struct{}

func (memKV) Get(context.Context, string) (rtfs.Value, bool, error) { return rtfs.Nil, false, nil }
func (memKV) Put(context.Context, string, rtfs.Value) error         { return nil }

// testRegistry has every built-in capability; shell.exec may run go and git.
func testRegistry(t testing.TB) *capability.Registry {
	t.Helper()
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Workdir: t.TempDir(), ShellAllow: []string{"go", "git"}, KV: memKV{}}); err != nil {
		t.Fatal(err)
	}
	return reg
}

func testChecker(t testing.TB, c governance.Constitution) *checker {
	reg := testRegistry(t)
	if c.ShellAllow == nil {
		c.ShellAllow = []string{"go", "git"}
	}
	return &checker{reg: reg, gov: governance.New(c, reg, nil)}
}

// answer is one scripted model reply.
type answer struct {
	text  string
	err   error
	usage Usage
}

// scriptModel answers from a list, in order, and keeps every request.
type scriptModel struct {
	mu       sync.Mutex
	answers  []answer
	requests []Completion
}

func (m *scriptModel) Name() string { return "test/model" }

func (m *scriptModel) Complete(ctx context.Context, c Completion, obs Observer) (Reply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, c)
	if len(m.answers) == 0 {
		return Reply{}, errors.New("script exhausted")
	}
	a := m.answers[0]
	m.answers = m.answers[1:]
	if obs != nil {
		obs.Token(a.text)
	}
	return Reply{Text: a.text, Model: "model", Usage: a.usage}, a.err
}

func script(texts ...string) *scriptModel {
	m := &scriptModel{}
	for _, t := range texts {
		m.answers = append(m.answers, answer{text: t, usage: Usage{PromptTokens: 10, CompletionTokens: 5, CostUSD: 0.001}})
	}
	return m
}

// recorder is an Observer that keeps what it hears.
type recorder struct {
	mu            sync.Mutex
	consultations []Consultation
	tokens        int
	waits         int
}

func (r *recorder) Consulted(c Consultation) {
	r.mu.Lock()
	r.consultations = append(r.consultations, c)
	r.mu.Unlock()
}
func (r *recorder) Waiting(string, time.Time) { r.mu.Lock(); r.waits++; r.mu.Unlock() }
func (r *recorder) Token(string)              { r.mu.Lock(); r.tokens++; r.mu.Unlock() }

func decodeJSONValue(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func printNode(n *rtfs.Node) string { return rtfs.PrintNode(n) }
