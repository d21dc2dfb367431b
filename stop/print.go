package stop

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// How a replay and an evaluation are printed as text (ralph replay, ralph
// history).

// ReplaySummary is the one-line answer: where the configuration would
// have stopped, beside where the run did.
func ReplaySummary(res *ReplayResult) string {
	var b strings.Builder
	if res.Stopped {
		d := res.Decision
		fmt.Fprintf(&b, "would have stopped after iteration %d by %s (%s)", res.Iteration, d.TriggeredBy, d.Class)
		if d.Before {
			fmt.Fprintf(&b, ", before iteration %d", res.Iteration+1)
		}
	} else {
		fmt.Fprintf(&b, "would not have stopped within the %d recorded iterations", len(res.Steps))
	}
	if r := res.Recorded; r.Stop {
		fmt.Fprintf(&b, " — the recorded run stopped after %d by %s (%s)", res.RecordedIterations, r.TriggeredBy, r.Class)
	} else {
		b.WriteString(" — the recorded run has not ended")
	}
	return b.String()
}

// WriteReplay writes each replayed iteration's decision and results, then
// the summary.
func WriteReplay(w io.Writer, res *ReplayResult) {
	for _, s := range res.Steps {
		fmt.Fprintf(w, "iteration %d  %s", s.Iteration, decisionText(s.Decision))
		if s.Recorded != nil {
			rec := Decision{Stop: s.Recorded.ShouldStop, Class: s.Recorded.Class, TriggeredBy: s.Recorded.TriggeredBy}
			fmt.Fprintf(w, "   (recorded: %s)", decisionText(rec))
		}
		fmt.Fprintln(w)
		for _, r := range s.Evaluation.Results {
			mark, pct := "·", fmt.Sprintf("%3d%%", Percent(r.Progress, r.Met))
			switch {
			case r.Detail == "unknown":
				mark, pct = "?", "   ?"
			case r.Err != "":
				mark, pct = "!", "   —"
			case r.Met:
				mark = "✓"
			}
			fmt.Fprintf(w, "  %s %-20s %-20s %-7s %s %-16s %s\n", mark, r.Name, r.Kind, r.Class, pct, r.Detail, r.Reason)
		}
	}
	fmt.Fprintln(w, ReplaySummary(res))
}

func decisionText(d Decision) string {
	if !d.Stop {
		return "continue"
	}
	s := fmt.Sprintf("STOP by %s (%s)", d.TriggeredBy, d.Class)
	if d.Before {
		s += " before the next iteration"
	}
	return s
}

// WriteEvaluation writes evaluation ev (recorded at seq): its verdict, then
// each condition's line, its why, and with verbose its evidence.
func WriteEvaluation(w io.Writer, seq uint64, ev Evaluation, verbose bool) {
	verdict := "continue"
	if ev.ShouldStop {
		verdict = fmt.Sprintf("STOP (%s) by %s: %s", ev.Class, ev.TriggeredBy, ev.Reason)
	}
	fmt.Fprintf(w, "iteration %d  seq %d  %s  %s\n", ev.Iteration, seq, ev.Duration.Round(time.Microsecond), verdict)
	for _, r := range ev.Results {
		mark, pct := "·", fmt.Sprintf("%3d%%", Percent(r.Progress, r.Met))
		switch {
		case r.Err != "": // met or not by its error_class, it could not be checked
			mark, pct = "!", "   —"
		case r.Met: // its class: ✓ success, ✗ failure, ■ a limit or an abort
			mark = map[Class]string{ClassSuccess: "✓", ClassFailure: "✗"}[r.Class]
			if mark == "" {
				mark = "■"
			}
		}
		flags := r.Flags()
		if r.Err != "" { // "error" comes last; say why
			flags[len(flags)-1] += ": " + r.Err
		}
		extra := ""
		if len(flags) > 0 {
			extra = " [" + strings.Join(flags, ", ") + "]"
		}
		fmt.Fprintf(w, "  %s %-24s %-20s %-7s %3d  %s %-16s %s%s\n", mark, r.Name, r.Kind, r.Class, r.Priority,
			pct, r.Detail, r.Reason, extra)
		// The one-line why (the first failing test, …) where it says more
		// than the reason and, with -v, than the evidence printed under it;
		// an error is already on the line.
		if why := Why(&r); why != "" && why != r.Reason && r.Err == "" && !(verbose && strings.Contains(r.Evidence, why)) {
			fmt.Fprintf(w, "      why: %s\n", why)
		}
		if verbose && r.Evidence != "" {
			for _, line := range strings.Split(r.Evidence, "\n") {
				fmt.Fprintf(w, "      %s\n", line)
			}
		}
	}
}
