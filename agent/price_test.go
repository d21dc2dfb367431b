package agent

import (
	"math"
	"testing"
)

func TestLookupPrice(t *testing.T) {
	cases := []struct {
		model string
		want  Price
		ok    bool
	}{
		{"claude-sonnet-4-5-20250929", prices["claude-sonnet-4-5"], true},
		{"anthropic/claude-haiku-4-5", prices["claude-haiku-4-5"], true},
		{"gpt-5-codex", prices["gpt-5-codex"], true},
		{"claude-4-sonnet-20250514", prices["claude-sonnet-4"], true},
		{"gpt-5.6-sol", prices["gpt-5.6-sol"], true},
		{"openai/GPT-5.1-Codex-Max", prices["gpt-5.1-codex-max"], true},
		{"gpt-5-2025-08-07", prices["gpt-5"], true},
		{"models/gemini-2.5-flash", prices["gemini-2.5-flash"], true},
		{"auto-gemini-2.5", prices["gemini-2.5-pro"], true},
		{"gemini-2.5-pro-latest", prices["gemini-2.5-pro"], true},
		{"my-local-model", Price{}, false},
		{"", Price{}, false},
	}
	for _, c := range cases {
		got, ok := LookupPrice(c.model)
		if ok != c.ok || got != c.want {
			t.Errorf("LookupPrice(%q) = %+v, %v; want %+v, %v", c.model, got, ok, c.want, c.ok)
		}
	}
	for name, p := range prices {
		if p.Input <= 0 || p.Output <= 0 || p.CacheRead < 0 || p.CacheWrite < 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
}

func TestArgsModel(t *testing.T) {
	cases := map[string][]string{
		"":                 {"--sandbox", "workspace-write"},
		"gpt-5-codex":      {"-m", "gpt-5-codex"},
		"claude-opus-4-5":  {"--model=claude-opus-4-5"},
		"gemini-2.5-flash": {"--model", "x", "-m=gemini-2.5-flash"},
		"anthropic/claude": {"--model", "anthropic/claude"},
	}
	for want, args := range cases {
		if got := ArgsModel(args); got != want {
			t.Errorf("ArgsModel(%q) = %q, want %q", args, got, want)
		}
	}
	if got := ArgsModel([]string{"--model"}); got != "" {
		t.Errorf("a trailing --model: %q", got)
	}
}

// The cost of a call whose CLI reports none: [agent.price] first, else the
// table by the reported model, else by --model in the args; reasoning
// priced as output unless its own price is set.
func TestAccumulatedCost(t *testing.T) {
	u := Usage{Input: 1_000_000, Output: 100_000, CacheRead: 2_000_000, Reasoning: 50_000}
	cost := func(o *Options, evs ...Event) Result {
		a := &accumulator{o: o}
		for _, e := range evs {
			a.add(e)
		}
		a.add(Event{Kind: EventUsage, Usage: u, Total: true})
		var r Result
		a.result(&r)
		return r
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

	// Reported model (gpt-5-codex: 1.25 in, 10 out, 0.125 cached).
	r := cost(&Options{CLI: "codex"}, Event{Kind: EventSession, SessionID: "s", Model: "gpt-5-codex"})
	if want := 1.25 + 1.0 + 0.25 + 0.5; r.CostSource != "table" || !near(r.CostUSD, want) || r.Model != "gpt-5-codex" {
		t.Errorf("reported model: %+v, want $%v from the table", r, want)
	}
	// The args' model when the CLI names none.
	r = cost(&Options{CLI: "codex", Args: []string{"-m", "gpt-5-mini"}})
	if want := 0.25 + 0.2 + 0.05 + 0.1; r.CostSource != "table" || !near(r.CostUSD, want) {
		t.Errorf("args model: %+v, want $%v", r, want)
	}
	// Gemini's default model when nothing names one.
	r = cost(&Options{CLI: "gemini"})
	if r.Model != "auto-gemini-2.5" || r.CostSource != "table" {
		t.Errorf("gemini default: %+v", r)
	}
	// [agent.price] overrides the table; its reasoning price is used.
	p := &Price{Input: 1, Output: 2, CacheRead: 0.5, Reasoning: 20}
	r = cost(&Options{CLI: "codex", Price: p}, Event{Kind: EventSession, Model: "gpt-5-codex"})
	if want := 1 + 0.2 + 1 + 1.0; r.CostSource != "price" || !near(r.CostUSD, want) {
		t.Errorf("override: %+v, want $%v", r, want)
	}
	// No price anywhere: no cost, said so.
	r = cost(&Options{CLI: "codex"})
	if r.CostSource != "" || r.CostUSD != 0 {
		t.Errorf("unpriced: %+v", r)
	}
	// A reported $0 for tokens spent is no cost: the table prices it.
	r = cost(&Options{CLI: "opencode"}, Event{Kind: EventSession, Model: "anthropic/claude-sonnet-4-5"}, Event{Kind: EventCost, CostUSD: 0, Total: true})
	if r.CostSource != "table" || r.CostUSD == 0 {
		t.Errorf("reported $0: %+v", r)
	}
	// A reported cost wins over every price.
	r = cost(&Options{CLI: "claude", Price: p}, Event{Kind: EventCost, CostUSD: 0.42, Total: true})
	if r.CostSource != "reported" || r.CostUSD != 0.42 {
		t.Errorf("reported: %+v", r)
	}
}
