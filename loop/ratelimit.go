package loop

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// limitWait is an account limit the last iteration stopped at.
type limitWait struct {
	limit  capability.Limit
	parent string    // the IterationStarted it happened in
	until  time.Time // resume: the wait a dead process had recorded
}

// Waits for a limit whose reset the agent did not say: the first wait,
// doubled at each consecutive limit, up to the cap. An overloaded API is a
// transient: its backoff is short.
const (
	limitBackoff         = time.Minute
	limitBackoffCap      = 30 * time.Minute
	overloadBackoff      = 15 * time.Second
	overloadBackoffCap   = 5 * time.Minute
	limitBackoffMaxShift = 5
)

// resetJustPassed is how far behind now a limit's reset may be and still
// be taken as "it has just lifted" (the call and its recording took that
// long); one further back (the clock behind the service's, a stale
// message) is no reason to call the agent again at once.
const resetJustPassed = 5 * time.Second

// limitUntil is when the loop tries again after the waits-th consecutive
// limit l, seen at now: l's reset when the agent said one (at once when it
// has just passed), else a backoff (short for an overloaded API, longer
// for an account limit).
func limitUntil(l capability.Limit, now time.Time, waits int) time.Time {
	if !l.Reset.IsZero() && l.Reset.After(now.Add(-resetJustPassed)) {
		return l.Reset
	}
	base, ceiling := limitBackoff, limitBackoffCap
	if l.Kind == agent.LimitOverloaded {
		base, ceiling = overloadBackoff, overloadBackoffCap
	}
	shift := min(max(waits-1, 0), limitBackoffMaxShift)
	return now.Add(min(base<<shift, ceiling))
}

// WaitUntilText is a wait's end as the console and the UI show it: the
// time of day, with the date when it is not today's ("2026-11-26
// 21:59:00"), in the local time zone.
func WaitUntilText(until, now time.Time) string {
	u, n := until.Local(), now.Local()
	if u.YearDay() != n.YearDay() || u.Year() != n.Year() {
		return u.Format(time.DateTime)
	}
	return u.Format(time.TimeOnly)
}

// streamAgent publishes what running calls stream on the bus: an agent's
// events become EventAgent, for the UI's output pane and the headless
// printer. Other payloads have no consumer and are dropped here.
func (r *Runner) streamAgent(iteration int) func(CallStream) {
	redact := r.o.Orchestrator.Redact
	return func(cs CallStream) {
		if ev, ok := cs.Event.(*agent.Event); ok {
			if len(ev.Text) > MaxStreamText || !utf8.ValidString(ev.Text) { // the bus's queue holds thousands: each stays small
				c := *ev
				c.Text = strings.ToValidUTF8(streamCut(c.Text), "\uFFFD") // an agent printing binary is shown readable
				ev = &c
			}
			// Printed and shown like the chain's records: without the secrets.
			text, input := redact(ev.Text), redact(ev.Input)
			var retry *agent.Retry
			if ev.Retry != nil { // a retry notice quotes the CLI's error line
				if m := redact(ev.Retry.Message); m != ev.Retry.Message {
					rt := *ev.Retry
					rt.Message = m
					retry = &rt
				}
			}
			if text != ev.Text || input != ev.Input || retry != nil {
				c := *ev
				c.Text, c.Input = text, input
				if retry != nil {
					c.Retry = retry
				}
				ev = &c
			}
			r.bus.publish(Event{Kind: EventAgent, Iteration: iteration, Agent: ev, CallID: cs.CallID, Time: r.o.Now()})
		}
	}
}

// waitLimit waits for the account limit the last iteration stopped at to
// lift, then lets the loop run that iteration again under the same number.
// The wait is recorded as a RateLimitWait and shown as a countdown
// (EventWait). It uses no iteration and no spend; max_duration stays a
// wall-clock deadline: a limit that lifts after it ends the run at once
// rather than sleeping to the deadline, and a reset further off than
// [agent] max_rate_limit_wait ends the run as a limit (exit 3). Pause and
// abort work during the wait.
func (r *Runner) waitLimit(runCtx, ctx context.Context, st *runState) (*Outcome, error) {
	lw := st.limited
	st.limited = nil
	now := r.o.Now()
	until := lw.until
	if until.IsZero() {
		st.limitWaits++
		until = limitUntil(lw.limit, now, st.limitWaits)
	}
	// A reset further off than max_rate_limit_wait ends the run as a limit,
	// before a wait is recorded: nobody waits a day for a loop.
	if most := r.o.Config.MaxRateLimitWait(); until.Sub(now) > most {
		return &Outcome{Class: stop.ClassLimit, TriggeredBy: "max_rate_limit_wait",
			Reason: fmt.Sprintf("the agent's %s lifts at %s, %s from now, longer than [agent] max_rate_limit_wait %s; raise max_rate_limit_wait to wait for it, or run again after the reset",
				lw.limit.Kind, until.Local().Format("2006-01-02 15:04:05 MST"), until.Sub(now).Round(time.Minute), most),
			Evidence: lw.limit.Message}, nil
	}
	if lw.until.IsZero() {
		reason := lw.limit.Message
		if reason == "" {
			reason = "the agent hit its account's " + lw.limit.Kind
		}
		a := &ledger.Action{Type: ledger.RateLimitWait, ParentActionID: lw.parent, FunctionName: lw.limit.Kind, Success: true,
			DurationMS: max(until.Sub(now), 0).Milliseconds(), Metadata: map[string]rtfs.Value{
				"kind": rtfs.String(lw.limit.Kind), "until": rtfs.String(until.UTC().Format(time.RFC3339Nano)),
				"message": rtfs.String(reason), "reset_known": rtfs.Bool(!lw.limit.Reset.IsZero()),
				"iteration": rtfs.Int(int64(st.iteration + 1)),
			}}
		if _, err := r.record(ctx, st, a); err != nil {
			return nil, err
		}
	}
	if d := r.maxDuration(); d > 0 && until.After(st.started.Add(d)) {
		out := r.durationOutcome()
		out.Reason = fmt.Sprintf("the agent's %s lifts at %s, after max_duration %s ends at %s", lw.limit.Kind,
			until.Local().Format(time.DateTime), d, st.started.Add(d).Local().Format(time.DateTime))
		return out, nil
	}
	if wait := until.Sub(now); wait > 0 {
		what := "agent " + lw.limit.Kind
		if lw.limit.Kind == agent.LimitOverloaded {
			what = "agent API overloaded (a transient)"
		}
		r.bus.publish(Event{Kind: EventWait, Iteration: st.iteration + 1, Until: until, Time: now,
			Text: fmt.Sprintf("%s; iteration %d runs again when it lifts", what, st.iteration+1)})
		if err := r.delay(runCtx, st, wait); err != nil {
			return nil, err
		}
	}
	switch {
	case ctx.Err() != nil:
		return abortOutcome(ctx), nil
	case runCtx.Err() != nil:
		return r.durationOutcome(), nil
	}
	return nil, r.saveState(ctx, st, StateRunning, nil)
}

// limitedOnResume is the limit wait a dead process left unfinished: its
// last iteration stopped at a limit, recorded a RateLimitWait, and no
// iteration has started since. The resumed run waits out what is left.
func limitedOnResume(acts []ledger.Action) *limitWait {
	for i := len(acts) - 1; i >= 0; i-- {
		a := &acts[i]
		switch a.Type {
		case ledger.IterationStarted:
			return nil
		case ledger.RateLimitWait:
			until, err := time.Parse(time.RFC3339Nano, a.Metadata["until"].Str())
			if err != nil {
				return nil
			}
			return &limitWait{limit: capability.Limit{Kind: a.FunctionName, Message: a.Metadata["message"].Str()},
				parent: a.ParentActionID, until: until}
		}
	}
	return nil
}
