package loop

import (
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/stop"
)

// deniedOutcome ends a run whose agent was refused a tool it needed for
// want of permission. Every later iteration would be refused the same, so
// the run stops after the first one, as a failure (exit 1) whose reason
// names the tool, what it would have touched, and the fix. Such an
// iteration is never progress, and never "stuck": nothing was decided.
func deniedOutcome(d *capability.Denial) *Outcome {
	what := d.Tool
	if d.Target != "" {
		what = strings.TrimSpace(what + " " + d.Target)
	}
	if what == "" {
		what = "a tool"
	}
	reason := "permission denied: the agent was refused " + what
	if d.Fix != "" {
		reason += "; " + d.Fix
	}
	return &Outcome{Class: stop.ClassFailure, TriggeredBy: "permission_denied", Reason: reason,
		Evidence: fmt.Sprintf("tool %q target %q", d.Tool, d.Target)}
}
