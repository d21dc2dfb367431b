package stop

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The in-process kinds: budgets, signals and composition. Each is a pure
// function of Input (composites: of their children).

type maxIterations struct{ max int }

func (c maxIterations) check(_ context.Context, in *Input) outcome {
	o := outcome{met: in.Iteration >= c.max, progress: ratio(float64(in.Iteration), float64(c.max)),
		detail: fmt.Sprintf("%d/%d", in.Iteration, c.max), evidence: fmt.Sprintf("iteration %d", in.Iteration)}
	o.reason = fmt.Sprintf("iteration %d of at most %d", in.Iteration, c.max)
	if o.met {
		o.reason = fmt.Sprintf("reached max_iterations %d", c.max)
	}
	return o
}
func (c maxIterations) fingerprint(in *Input, f *fp) bool { f.i64(int64(in.Iteration)); return false }
func (c maxIterations) inputs(in *Input) string {
	return fmt.Sprintf("iteration=%d max=%d", in.Iteration, c.max)
}

type maxDuration struct{ max time.Duration }

func (c maxDuration) check(_ context.Context, in *Input) outcome {
	el := in.Now.Sub(in.Started)
	o := outcome{met: el >= c.max, progress: ratio(float64(el), float64(c.max)),
		detail: fmt.Sprintf("%s/%s", el.Round(time.Second), c.max), evidence: "started " + in.Started.Format(time.RFC3339)}
	o.reason = fmt.Sprintf("%s elapsed of %s", el.Round(time.Second), c.max)
	if o.met {
		o.reason = fmt.Sprintf("ran for %s, max_duration is %s", el.Round(time.Second), c.max)
	}
	return o
}
func (c maxDuration) fingerprint(in *Input, f *fp) bool {
	f.time(in.Started)
	f.time(in.Now)
	return false
}
func (c maxDuration) inputs(in *Input) string {
	return fmt.Sprintf("started=%s now=%s max=%s", in.Started.Format(time.RFC3339), in.Now.Format(time.RFC3339), c.max)
}

type maxCost struct{ usd float64 }

func (c maxCost) check(_ context.Context, in *Input) outcome {
	o := outcome{met: in.CostUSD >= c.usd, progress: ratio(in.CostUSD, c.usd),
		detail: fmt.Sprintf("$%.2f/$%.2f", in.CostUSD, c.usd), evidence: fmt.Sprintf("cost $%.4f", in.CostUSD)}
	o.reason = fmt.Sprintf("spent $%.2f of $%.2f", in.CostUSD, c.usd)
	if o.met {
		o.reason = fmt.Sprintf("spent $%.2f, max_cost is $%.2f", in.CostUSD, c.usd)
	}
	return o
}
func (c maxCost) fingerprint(in *Input, f *fp) bool { f.f64(in.CostUSD); return false }
func (c maxCost) inputs(in *Input) string           { return fmt.Sprintf("cost=%g usd=%g", in.CostUSD, c.usd) }

type maxTokens struct{ max int64 }

func (c maxTokens) check(_ context.Context, in *Input) outcome {
	o := outcome{met: in.Tokens >= c.max, progress: ratio(float64(in.Tokens), float64(c.max)),
		detail: fmt.Sprintf("%d/%d", in.Tokens, c.max), evidence: fmt.Sprintf("%d tokens", in.Tokens)}
	o.reason = fmt.Sprintf("used %d of %d tokens", in.Tokens, c.max)
	if o.met {
		o.reason = fmt.Sprintf("used %d tokens, max_tokens is %d", in.Tokens, c.max)
	}
	return o
}
func (c maxTokens) fingerprint(in *Input, f *fp) bool { f.i64(in.Tokens); return false }
func (c maxTokens) inputs(in *Input) string           { return fmt.Sprintf("tokens=%d max=%d", in.Tokens, c.max) }

type consecutiveFailures struct{ n int }

func (c consecutiveFailures) check(_ context.Context, in *Input) outcome {
	o := outcome{met: in.ConsecutiveFailures >= c.n, progress: ratio(float64(in.ConsecutiveFailures), float64(c.n)),
		detail:   fmt.Sprintf("%d/%d failures", in.ConsecutiveFailures, c.n),
		evidence: fmt.Sprintf("%d failed iterations in a row", in.ConsecutiveFailures)}
	o.reason = fmt.Sprintf("%d of %d consecutive failures", in.ConsecutiveFailures, c.n)
	if o.met {
		o.reason = fmt.Sprintf("%d iterations failed in a row", in.ConsecutiveFailures)
	}
	return o
}
func (c consecutiveFailures) fingerprint(in *Input, f *fp) bool {
	f.i64(int64(in.ConsecutiveFailures))
	return false
}
func (c consecutiveFailures) inputs(in *Input) string {
	return fmt.Sprintf("consecutive_failures=%d count=%d", in.ConsecutiveFailures, c.n)
}

type userSignal struct{}

func (userSignal) check(_ context.Context, in *Input) outcome {
	if in.UserSignal {
		return outcome{met: true, progress: 1, detail: "signalled", reason: "the user asked to stop", evidence: "user signal pending"}
	}
	return outcome{detail: "no signal", reason: "no stop signal from the user", evidence: "no user signal"}
}
func (userSignal) fingerprint(in *Input, f *fp) bool { f.boolean(in.UserSignal); return false }
func (userSignal) inputs(in *Input) string           { return fmt.Sprintf("user_signal=%t", in.UserSignal) }

type never struct{}

func (never) check(context.Context, *Input) outcome {
	return outcome{detail: "never", reason: "never stops on its own", evidence: "nothing"}
}
func (never) fingerprint(*Input, *fp) bool { return false }
func (never) inputs(*Input) string         { return "none" }

// composite is all, any or not over child conditions, checked in order.
// Children's classes and priorities are ignored: the composite's own apply.
type composite struct {
	op   string
	kids []*Condition
}

func (c *composite) check(ctx context.Context, in *Input) outcome {
	met, sum, maxP := 0, 0.0, 0.0
	parts := make([]string, len(c.kids))
	for i, k := range c.kids {
		o := checkChild(ctx, k, in)
		if o.err != nil {
			return outcome{err: fmt.Errorf("%s: %w", k.Name, o.err), reason: fmt.Sprintf("%s could not be checked: %v", k.Name, o.err)}
		}
		if o.met {
			met++
		}
		sum += o.progress
		maxP = max(maxP, o.progress)
		parts[i] = fmt.Sprintf("%s %s (%s)", k.Name, metWord(o.met), o.reason)
	}
	o := outcome{evidence: strings.Join(parts, "; ")}
	switch c.op {
	case KindAll:
		o.met, o.progress = met == len(c.kids), sum/float64(len(c.kids))
		o.detail = fmt.Sprintf("%d/%d met", met, len(c.kids))
	case KindAny:
		o.met, o.progress = met > 0, maxP
		o.detail = fmt.Sprintf("%d/%d met", met, len(c.kids))
	case KindNot:
		o.met = met == 0
		o.detail = "child " + metWord(!o.met)
		if o.met {
			o.progress = 1
		}
	}
	o.reason = fmt.Sprintf("%s: %s", c.op, o.evidence)
	return o
}

// ownTimeout is the bound c carries itself: its timeout, else its kind's
// default (a command's DefaultCommandTimeout), else 0 (in-process checks
// and composites, whose children bound themselves).
func ownTimeout(c *Condition) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return c.row().DefaultTimeout
}

// budget is the time the bounded children may take together, one after
// another, nested composites included.
func (c *composite) budget() time.Duration {
	var d time.Duration
	for _, k := range c.kids {
		if kc, ok := k.check.(*composite); ok && k.Timeout == 0 {
			d += kc.budget()
		} else {
			d += ownTimeout(k)
		}
	}
	return d
}

// checkChild checks k under its own timeout, if it has one; a child that
// times out is not met, or counts as its timeout_class says.
func checkChild(ctx context.Context, k *Condition, in *Input) outcome {
	d := ownTimeout(k)
	if d <= 0 {
		return k.check.check(ctx, in)
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	o := k.check.check(cctx, in)
	if cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		o = outcome{detail: "timed out", reason: fmt.Sprintf("timed out after %s", d)}
		if tc := Class(k.TimeoutClass); tc != "" && tc != "not_met" {
			o.met, o.reason = true, fmt.Sprintf("timed out after %s; counts as met (timeout_class %s)", d, tc)
		}
	}
	return o
}

func (c *composite) readsVerdicts() bool {
	for _, k := range c.kids {
		if readsVerdicts(k) {
			return true
		}
	}
	return false
}

func (c *composite) fingerprint(in *Input, f *fp) bool {
	external := false
	for _, k := range c.kids {
		f.str(k.Name)
		if k.check.fingerprint(in, f) {
			external = true
		}
	}
	return external
}

func (c *composite) inputs(in *Input) string {
	parts := make([]string, len(c.kids))
	for i, k := range c.kids {
		parts[i] = k.Name + "{" + k.check.inputs(in) + "}"
	}
	return c.op + "(" + strings.Join(parts, " ") + ")"
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

// ratio is a/b clamped to 0–1.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return min(max(a/b, 0), 1)
}
