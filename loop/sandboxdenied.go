package loop

import (
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// SandboxDeniedStreak is how many consecutive iterations must meet the
// same refusal of the run's sandbox for the run to end as failure
// sandbox_denied: the agent keeps trying what only the user can allow.
const SandboxDeniedStreak = 3

// MetaSandboxDenied is the metadata key of a call's (and an iteration's)
// refusals: a vector of {:what "connect evil.example:443" :allow
// "hosts = [\"evil.example\"]"}, with "sandbox_denied_more" counting
// those left out past sandbox.MaxRefusals.
const MetaSandboxDenied = "sandbox_denied"

// openRefusals starts gathering the refusals of the call c reports for, each
// shown live on the call's stream as it comes; ctx carries them to the
// handler. Without a sandbox (no sink) it gathers nothing.
func (r *run) openRefusals(c *callReporter) *sandbox.Refusals {
	if r.o.o.Denials == nil {
		return nil
	}
	return r.o.o.Denials.Open(func(d sandbox.Denial) {
		c.Stream(&agent.Event{Kind: agent.EventSandboxDenied, Refusal: &d})
	})
}

// closeRefusals ends the call's gathering and puts what it gathered on
// its action a and on the plan's tally.
func (r *run) closeRefusals(refs *sandbox.Refusals, a *ledger.Action) {
	ds, more := refs.Close()
	if len(ds) == 0 && more == 0 {
		return
	}
	putRefusals(a.Metadata, ds, more)
	r.stats.mu.Lock()
	for _, d := range ds { // the plan's tally is bounded as each call's is
		if len(r.stats.refused) < sandbox.MaxRefusals && !containsDenial(r.stats.refused, d) {
			r.stats.refused = append(r.stats.refused, d)
		}
	}
	r.stats.mu.Unlock()
}

// putRefusals writes ds (and the count left out) on meta.
func putRefusals(meta map[string]rtfs.Value, ds []sandbox.Denial, more int) {
	items := make([]rtfs.Value, len(ds))
	for i, d := range ds {
		items[i] = rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("what"), rtfs.String(d.What), rtfs.Keyword("allow"), rtfs.String(d.Allow)))
	}
	meta[MetaSandboxDenied] = rtfs.Vector(items)
	if more > 0 {
		meta[MetaSandboxDenied+"_more"] = rtfs.Int(int64(more))
	}
}

// RefusalsOf reads the refusals recorded on an action's metadata (a call
// or an iteration's closing action), in order.
func RefusalsOf(meta map[string]rtfs.Value) []sandbox.Denial {
	v, ok := meta[MetaSandboxDenied]
	if !ok {
		return nil
	}
	var ds []sandbox.Denial
	for _, it := range v.Items() {
		m := it.AsMap()
		if m == nil {
			continue
		}
		ds = append(ds, sandbox.Denial{What: m.GetKey("what").Str(), Allow: m.GetKey("allow").Str()})
	}
	return ds
}

func containsDenial(ds []sandbox.Denial, d sandbox.Denial) bool {
	for _, e := range ds {
		if e == d {
			return true
		}
	}
	return false
}

// refusalStreak counts, for each refusal, the consecutive iterations up
// to the last that met it.
type refusalStreak map[sandbox.Denial]int

// next is the streak after an iteration that met ds: a refusal it met
// counts one more, one it did not is forgotten.
func (s refusalStreak) next(ds []sandbox.Denial) refusalStreak {
	n := refusalStreak{}
	for _, d := range ds {
		n[d] = s[d] + 1
	}
	return n
}

// held is the refusal met in SandboxDeniedStreak consecutive iterations
// (the first in ds's order), if any.
func (s refusalStreak) held(ds []sandbox.Denial) (sandbox.Denial, bool) {
	for _, d := range ds {
		if s[d] >= SandboxDeniedStreak {
			return d, true
		}
	}
	return sandbox.Denial{}, false
}

// sandboxDeniedOutcome ends a run whose iterations kept meeting the same
// refusal: a failure (exit 1) whose reason names what was refused and the
// [sandbox] line that allows it. It is not "stuck": the agent was not
// short of ideas but of a permission only the user can give.
func sandboxDeniedOutcome(d sandbox.Denial) *Outcome {
	reason := fmt.Sprintf("the sandbox refused %s in %d consecutive iterations", d.What, SandboxDeniedStreak)
	if d.Allow != "" {
		reason += fmt.Sprintf("; add %s to [sandbox] if the agent should be allowed it", d.Allow)
	}
	return &Outcome{Class: stop.ClassFailure, TriggeredBy: "sandbox_denied", Reason: reason,
		Evidence: strings.TrimSpace(d.What + " (" + d.Allow + ")")}
}

// iterationRefusals are an iteration's refusals: its calls' (the plan's
// tally) and those that came while no call was in flight (its hooks, the
// provider, the last stop conditions' commands), with the count left out.
func (r *Runner) iterationRefusals(calls []sandbox.Denial) ([]sandbox.Denial, int) {
	loose, more := r.o.Orchestrator.LooseRefusals()
	all := append([]sandbox.Denial(nil), calls...)
	for _, d := range loose {
		switch {
		case containsDenial(all, d):
		case len(all) >= sandbox.MaxRefusals:
			more++
		default:
			all = append(all, d)
		}
	}
	return all, more
}

// LooseRefusals takes the refusals of the run's sandbox that came while
// no call was in flight (OrchestratorOptions.Denials' TakeLoose).
func (o *Orchestrator) LooseRefusals() ([]sandbox.Denial, int) { return o.o.Denials.TakeLoose() }
