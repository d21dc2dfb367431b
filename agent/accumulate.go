package agent

import "strings"

// accumulator sums a call's events into its Result. The readers of
// standard output and standard error both emit events: Run serialises
// them (add is not safe for concurrent use).
type accumulator struct {
	o         *Options
	final     *string
	texts     textTail
	tokens    Usage
	cost      float64
	costSeen  bool
	session   string
	turns     int
	toolUses  int
	limit     *Limit
	isError   bool
	errorText string
	denials   []Denial
	retries   []Retry
	model     string
	models    []ModelUsage // the last usage totals' split by model
}

func (a *accumulator) add(e Event) {
	if e.Model != "" {
		a.model = e.Model
	}
	switch e.Kind {
	case EventText:
		a.texts.add(e.Text)
	case EventToolUse:
		a.toolUses++
	case EventUsage:
		if e.Total {
			a.tokens, a.models = e.Usage, e.Models
		} else {
			a.tokens = a.tokens.add(e.Usage)
		}
	case EventCost:
		a.costSeen = true
		if e.Total {
			a.cost = e.CostUSD
		} else {
			a.cost += e.CostUSD
		}
	case EventSession:
		a.session = e.SessionID
	case EventFinal:
		t := e.Text
		a.final = &t
		a.limit = nil // the call went on past any limit it met
		a.isError = false
		a.turns = max(a.turns, e.Turns)
	case EventRetry: // a notice: never a limit, never the call's error
		a.retries = append(a.retries, *e.Retry)
	case EventDenied:
		a.denials = append(a.denials, *e.Denial)
	case EventError:
		a.isError = true
		a.errorText = e.Text
		a.limit = laterLimit(a.limit, e.Limit)
		a.turns = max(a.turns, e.Turns)
	}
}

// laterLimit is the call's limit after an error that reported next (nil:
// an error that is no limit). The last error is the call's: a limit
// followed by another error (a 429 retried, then a 400) is that error.
// An exact reset beats a later one read from text: Claude's
// rate_limit_event gives resetsAt to the second and its closing text
// "resets 9:59pm" only the minute. An exact limit is kept through a later
// error that names none: the account said it is limited until then.
func laterLimit(prev, next *Limit) *Limit {
	switch {
	case prev == nil || !prev.Exact:
		return next
	case next == nil:
		return prev
	case !next.Exact:
		l := *next
		l.Reset, l.Exact = prev.Reset, true
		return &l
	}
	return next
}

// result fills r from what was accumulated.
func (a *accumulator) result(r *Result) {
	switch {
	case a.final != nil:
		r.Text, r.TextCut = tailString(*a.final)
	case a.texts.lines > 0:
		r.Text, r.TextCut = a.texts.text()
	default:
		r.Text, r.TextCut = tailString(a.errorText)
	}
	r.Tokens, r.SessionID, r.Turns, r.ToolUses = a.tokens, a.session, a.turns, a.toolUses
	r.IsError, r.Limit = a.isError, a.limit
	r.Denials, r.Retries = a.denials, a.retries
	r.Model = a.model
	if r.Model == "" {
		r.Model = ConfiguredModel(a.o.CLI, a.o.Args)
	}
	switch {
	// A CLI that reports $0 for tokens it spent does not know the model's
	// price (OpenCode with a provider it has no prices for): priced below.
	case a.costSeen && (a.cost != 0 || a.tokens.IsZero()):
		r.CostUSD, r.CostSource = a.cost, "reported"
	case a.tokens.IsZero():
	case a.o.Price != nil:
		r.CostUSD, r.CostSource = a.o.Price.Cost(a.tokens), "price"
	default:
		a.tablePrice(r)
	}
}

// tablePrice prices the call's tokens by the built-in table: each model's
// own when the CLI split them by model, else the call's model. A model
// the table does not name exactly is priced as the nearest of its family,
// and r.PricedAs says so; a model of no known family as the configured
// one. Nothing is priced when no price is found.
func (a *accumulator) tablePrice(r *Result) {
	parts := a.models
	if len(parts) == 0 {
		parts = []ModelUsage{{Model: r.Model, Usage: a.tokens}}
	}
	var cost float64
	var notes []string
	for _, m := range parts {
		p, ok := LookupModelPrice(m.Model)
		if !ok {
			conf := ConfiguredModel(a.o.CLI, a.o.Args)
			if p, ok = LookupModelPrice(conf); !ok || conf == m.Model {
				return
			}
			p.Match = "configured"
		}
		cost += p.Price.Cost(m.Usage)
		if p.Match != PriceExact {
			notes = append(notes, m.Model+" as "+p.Model+" ("+p.Match+")")
		}
	}
	r.CostUSD, r.CostSource, r.PricedAs = cost, "table", strings.Join(notes, ", ")
}
