package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// printer is the headless view of the run's event bus: one line per event
// (time, iteration, what, outcome). It reads actions from the ledger, so it
// never blocks the runner and never misses one.
type printer struct {
	w       *bufio.Writer
	asJSON  bool
	verbose bool            // also print each stop-condition result
	brief   bool            // print only each iteration's brief line
	tally   *iterationTally // for the brief line after each evaluation; nil: none
	// priceNote says, on the run's first line, how the built-in table
	// prices the agent's configured model when it does not name it
	// ("auto-gemini-2.5 is priced as gemini-2.5-pro (alias)"); "": exactly
	// or not at all.
	priceNote string
}

func newPrinter(w io.Writer, asJSON bool) *printer {
	return &printer{w: bufio.NewWriter(w), asJSON: asJSON}
}

// newRunPrinter is the headless printer of a run with options opts, as
// run's flags f ask for it.
func newRunPrinter(w io.Writer, f runFlags, opts loop.RunnerOptions) *printer {
	p := newPrinter(w, f.asJSON)
	p.verbose, p.brief, p.tally = f.verbose, f.brief, newIterationTally(opts.Conditions, opts.Config)
	if c := opts.Config; c != nil && c.Agent != nil && c.Model.Provider == "agent" && c.Agent.Price == nil {
		p.priceNote = agent.PriceNote(c.AgentModel(c.Agent.CLI))
	}
	return p
}

// follow prints events until the run's final state, which the bus delivers
// after its closing action, or ctx's end.
func (p *printer) follow(ctx context.Context, events <-chan loop.Event) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer p.w.Flush()
		ended := false
		for e := range events {
			p.write(&e)
			if len(events) == 0 { // flushed when it has caught up: one write per burst, not per line
				p.w.Flush()
			}
			if e.Kind == loop.EventAction && loop.IsRunEnd(e.Action.Type) {
				ended = true
			}
			if ended && e.Kind == loop.EventState && e.State != loop.StateRunning && e.State != loop.StatePaused {
				return
			}
		}
	}()
	return done
}

// print writes e and flushes it.
func (p *printer) print(e *loop.Event) {
	p.write(e)
	p.w.Flush()
}

// write writes e to the buffer; follow flushes once it has caught up
// with the events, not after each one (an agent's flood is thousands).
func (p *printer) write(e *loop.Event) {
	if p.asJSON {
		switch e.Kind {
		case loop.EventAction:
			p.w.Write(append(ledger.AppendJSON(nil, e.Action), '\n'))
		case loop.EventState, loop.EventWait, loop.EventDropped:
			m := map[string]any{"event": e.Kind.String(), "time": e.Time.UTC().Format(time.RFC3339Nano),
				"run_id": e.RunID, "iteration": e.Iteration}
			switch e.Kind {
			case loop.EventState:
				m["state"] = e.State
			case loop.EventWait:
				m["reason"], m["until"] = e.Text, e.Until.UTC().Format(time.RFC3339Nano)
			case loop.EventDropped:
				m["dropped"] = e.Dropped
			}
			b, _ := json.Marshal(m) // strings and numbers cannot fail to marshal
			p.w.Write(append(b, '\n'))
		case loop.EventAgent:
			p.w.Write(marshalLine(agentJSON(e)))
		}
		return
	}
	at := e.Time.Local().Format("15:04:05")
	if p.brief && e.Kind != loop.EventAction {
		return
	}
	switch e.Kind {
	case loop.EventAction:
		if !p.brief {
			fmt.Fprintf(p.w, "%s it %-3d %s%s%s\n", at, e.Iteration, ledger.Summary(e.Action), p.priceOf(e.Action), sandboxNote(e.Action))
		}
		if p.tally == nil {
			return
		}
		if line := p.tally.take(e.Action); line != "" {
			if p.brief {
				fmt.Fprintln(p.w, line)
			} else {
				fmt.Fprintf(p.w, "%s %s\n", at, line)
			}
		}
	case loop.EventState:
		fmt.Fprintf(p.w, "%s it %-3d state %s\n", at, e.Iteration, e.State)
	case loop.EventWait:
		fmt.Fprintf(p.w, "%s it %-3d waiting until %s: %s\n", at, e.Iteration, loop.WaitUntilText(e.Until, e.Time), e.Text)
	case loop.EventDropped:
		fmt.Fprintf(p.w, "%s it %-3d (%d transient events skipped: output was too slow)\n", at, e.Iteration, e.Dropped)
	case loop.EventAgent:
		p.printAgent(e, at)
	case loop.EventConditions:
		if !p.verbose {
			return
		}
		for _, r := range e.Evaluation.Results {
			state := "not met"
			switch {
			case r.TimedOut:
				state = "timed out"
			case r.Met:
				state = "MET"
			}
			fmt.Fprintf(p.w, "           %-24s %-7s %3d  %-9s %-12s %s\n", r.Name, r.Class, r.Priority, state, r.Detail, r.Reason)
		}
	}
}

// priceOf is what the line of action a says of the agent's prices: on the
// run's first line (RunStarted) how the table prices the configured model
// when it does not name it; on an agent call priced by the table, each
// model it did not name ("priced gemini-3.8-flash as gemini-3.5-flash
// (family)"); "" otherwise.
func (p *printer) priceOf(a *ledger.Action) string {
	switch {
	case a.Type == ledger.RunStarted && p.priceNote != "":
		return " (agent tokens: " + p.priceNote + ")"
	case a.Type == ledger.CapabilityCall && a.Metadata["priced_as"].Str() != "":
		return " (priced " + a.Metadata["priced_as"].Str() + ")"
	}
	return ""
}

func (p *printer) summary(out *loop.Outcome) error {
	if p.asJSON {
		failing := out.StillFailing
		if failing == nil {
			failing = []stop.Unmet{}
		}
		b, err := json.Marshal(map[string]any{"summary": true, "run_id": out.RunID, "state": out.State,
			"class": out.Class, "condition": out.TriggeredBy, "reason": out.Reason, "evidence": out.Evidence,
			"iterations": out.Iterations, "cost_usd": out.CostUSD, "tokens": out.Tokens, "exit_code": out.ExitCode,
			"still_failing": failing})
		if err != nil {
			return err
		}
		if err := writeOut(p.w, string(b)+"\n"); err != nil {
			return err
		}
		return p.w.Flush()
	}
	msg := fmt.Sprintf("run %s %s after %d iteration(s) ($%.4f, %d tokens): %s by %s — %s",
		out.RunID, out.State, out.Iterations, out.CostUSD, out.Tokens, out.Class, out.TriggeredBy, out.Reason)
	if u := stop.UnmetText(out.StillFailing); u != "" {
		msg += " · still failing: " + u
	}
	msg += "\n"
	if err := writeOut(p.w, msg); err != nil {
		return err
	}
	return p.w.Flush()
}
