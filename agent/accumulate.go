package agent

// accumulator sums a call's events into its Result. Only the stdout
// reader uses it while the call runs.
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
}

func (a *accumulator) add(e Event) {
	switch e.Kind {
	case EventText:
		a.texts.add(e.Text)
	case EventToolUse:
		a.toolUses++
	case EventUsage:
		if e.Total {
			a.tokens = e.Usage
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
	case EventRetry:
		a.retries = append(a.retries, *e.Retry)
	case EventDenied:
		a.denials = append(a.denials, *e.Denial)
	case EventError:
		a.isError = true
		a.errorText = e.Text
		if e.Limit != nil {
			a.limit = e.Limit
		}
		a.turns = max(a.turns, e.Turns)
	}
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
	switch {
	case a.costSeen:
		r.CostUSD, r.CostSource = a.cost, "reported"
	case a.o.Price != nil && !a.tokens.IsZero():
		r.CostUSD, r.CostSource = a.o.Price.Cost(a.tokens), "price"
	}
}
