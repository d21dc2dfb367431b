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

// TestLookupModelPrice: a model the table does not name is priced as the
// nearest version of its family, and says so; one of no known family has
// no price.
func TestLookupModelPrice(t *testing.T) {
	for _, c := range []struct {
		model, as, match string
	}{
		{"claude-opus-4-7", "claude-opus-4-7", PriceExact},
		{"claude-opus-4-8[1m]", "claude-opus-4-7", PriceFamily}, // Claude Code 2.1.197 with a 1M context
		{"claude-opus-4-8", "claude-opus-4-7", PriceFamily},
		{"claude-sonnet-4-7-20261001", "claude-sonnet-4-6", PriceFamily},
		{"claude-haiku-4-9", "claude-haiku-4-5", PriceFamily},
		{"claude-3-7-haiku", "claude-3-5-haiku", PriceFamily},
		{"claude-sonnet-4-5[1m]", "claude-sonnet-4-5", PriceExact},
		{"gemini-3.8-flash", "gemini-3.5-flash", PriceFamily}, // Gemini CLI 0.61's main model against the mock
		{"gemini-3.5-flash-lite", "gemini-3.1-flash-lite", PriceFamily},
		{"gemini-3.1-pro-preview-customtools", "gemini-3.1-pro-preview", PriceFamily},
		{"gemini-3.2-flash", "gemini-3-flash-preview", PriceFamily},
		{"gemini-2.7-pro", "gemini-2.5-pro", PriceFamily},
		{"gemini-3.0-pro", "gemini-3-pro-preview", PriceFamily},
		{"claude-haiku-4-1", "claude-haiku-4-5", PriceFamily}, // older than any of its family: the oldest known
		{"gemini-1.5-flash", "", ""},                          // a family is a major version: no Gemini 1 is priced
		{"auto-gemini-3", "gemini-3-pro-preview", PriceAlias},
		{"gpt-5.7", "gpt-5.6", PriceFamily},
		{"gpt-5.4-codex", "gpt-5.3-codex", PriceFamily},
		{"gpt-5.2-codex-mini", "gpt-5.1-codex-mini", PriceFamily},
		{"gpt-5.6-sol", "gpt-5.6-sol", PriceExact},
		{"claude-opus-5-5", "", ""}, // Claude Code 2.1.332's default: no Opus 5 is priced
		{"gemini-4-ultra", "", ""},
		{"my-local-model", "", ""},
	} {
		t.Run(c.model, func(t *testing.T) {
			got, ok := LookupModelPrice(c.model)
			if ok != (c.as != "") || got.Model != c.as || got.Match != c.match || ok && got.Price != prices[c.as] {
				t.Errorf("LookupModelPrice(%q) = %+v, %v; want %s by %s", c.model, got, ok, c.as, c.match)
			}
		})
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

// TestTablePriceByModel: a call's tokens are priced by the models that
// used them, as the CLI reports them (Gemini CLI splits its totals by
// model), each by the nearest price of its family when the table does not
// name it, and the result says which; never as the CLI's default model.
func TestTablePriceByModel(t *testing.T) {
	t.Parallel()
	lite, main := Usage{Input: 10, Output: 5}, Usage{Input: 46967, Output: 46, CacheRead: 64, Reasoning: 12}
	for _, c := range []struct {
		name     string
		o        Options
		evs      []Event
		cost     float64
		model    string
		pricedAs string
	}{
		{"gemini split by model", Options{CLI: "gemini"}, []Event{{Kind: EventUsage, Total: true, Usage: lite.add(main), Model: "gemini-3.8-flash",
			Models: []ModelUsage{{"gemini-3.5-flash-lite", lite}, {"gemini-3.8-flash", main}}}},
			prices["gemini-3.1-flash-lite"].Cost(lite) + prices["gemini-3.5-flash"].Cost(main), "gemini-3.8-flash",
			"gemini-3.5-flash-lite as gemini-3.1-flash-lite (family), gemini-3.8-flash as gemini-3.5-flash (family)"},
		{"exact", Options{CLI: "codex", Args: []string{"--model", "gpt-5.5"}}, []Event{{Kind: EventUsage, Total: true, Usage: main}},
			prices["gpt-5.5"].Cost(main), "gpt-5.5", ""},
		{"claude 1m", Options{CLI: "opencode"}, []Event{{Kind: EventSession, SessionID: "s", Model: "claude-opus-4-8[1m]"},
			{Kind: EventUsage, Total: true, Usage: main}},
			prices["claude-opus-4-7"].Cost(main), "claude-opus-4-8[1m]", "claude-opus-4-8[1m] as claude-opus-4-7 (family)"},
		{"unknown model, configured one priced", Options{CLI: "codex", Args: []string{"-m", "gpt-5.5"}},
			[]Event{{Kind: EventSession, SessionID: "s", Model: "mystery-1"}, {Kind: EventUsage, Total: true, Usage: main}},
			prices["gpt-5.5"].Cost(main), "mystery-1", "mystery-1 as gpt-5.5 (configured)"},
		{"nothing priced", Options{CLI: "codex"}, []Event{{Kind: EventSession, SessionID: "s", Model: "mystery-1"},
			{Kind: EventUsage, Total: true, Usage: main}}, 0, "mystery-1", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &accumulator{o: &c.o}
			for _, e := range c.evs {
				a.add(e)
			}
			var r Result
			a.result(&r)
			if math.Abs(r.CostUSD-c.cost) > 1e-12 || r.Model != c.model || r.PricedAs != c.pricedAs || (c.cost > 0) != (r.CostSource == "table") {
				t.Errorf("cost %v (%s), model %q, priced as %q; want %v, %q, %q", r.CostUSD, r.CostSource, r.Model, r.PricedAs, c.cost, c.model, c.pricedAs)
			}
		})
	}
}
