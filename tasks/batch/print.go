package batch

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Printer is a batch's headless output: one line per task event and a
// summary, as text or as one JSON object per line. Its methods are called
// from one goroutine at a time (Options.OnEvent is).
type Printer struct {
	w        io.Writer
	asJSON   bool
	attempts int // loops per task, from the batch's start
}

// NewPrinter prints to w, as JSON when asJSON.
func NewPrinter(w io.Writer, asJSON bool) *Printer { return &Printer{w: w, asJSON: asJSON} }

// Event prints e: a line for a batch's start, a task's run starting, an
// iteration, a green run, a merge, a trip back to the loop and a task's
// end other than merged (whose merge line says it).
func (p *Printer) Event(e Event) {
	if e.Kind == EventBatchStarted {
		p.attempts = e.Attempts
	}
	if p.asJSON {
		p.json(eventJSON(e))
		return
	}
	line := eventLine(e, p.attempts > 1)
	if line == "" {
		return
	}
	fmt.Fprintf(p.w, "%s %s\n", e.Time.Local().Format("15:04:05"), line)
}

// eventLine is e as one line of text, "" for an event printed otherwise;
// attempts says each task has several, which the lines then name.
func eventLine(e Event, attempts bool) string {
	task := e.Task
	if attempts && e.Attempt > 0 {
		task = fmt.Sprintf("%s#%d", e.Task, e.Attempt)
	}
	switch e.Kind {
	case EventBatchStarted:
		each := ""
		if e.Attempts > 1 {
			each = fmt.Sprintf(", %d attempts each", e.Attempts)
		}
		verb := ""
		if e.Resumed {
			verb = " resumed"
		}
		return fmt.Sprintf("batch %s%s: %s from %s onto %s, %d at a time (%s, %s%s)", e.Batch, verb, plural(e.Tasks, "task"), e.Source, e.Target,
			e.Parallel, e.Integrate, plural(e.Retries, "retry"), each)
	case EventTaskStarted:
		if e.Resumed {
			return fmt.Sprintf("%s resumed: %s (run %s, try %d)", task, e.Title, e.Run, e.Try)
		}
		return fmt.Sprintf("%s started: %s (run %s, try %d)", task, e.Title, e.Run, e.Try)
	case EventIteration:
		return fmt.Sprintf("%s it %d %s $%.4f", task, e.Iteration, e.Status, e.CostUSD)
	case EventRunEnded:
		switch {
		case e.Verdict != VerdictGreen && attempts:
			return fmt.Sprintf("%s %s: %s", task, e.Verdict, e.Why) // the task's end says the best attempt's
		case e.Verdict != VerdictGreen:
			return "" // its task's end says it
		}
		return fmt.Sprintf("%s green after %s (%s); to the merge queue", task, plural(e.Iteration, "iteration"), e.Why)
	case EventTaskMerged:
		return fmt.Sprintf("%s merged as %s", task, short(e.Commit))
	case EventTaskBack:
		return fmt.Sprintf("%s %s: %s; back to its loop (%d of %d runs left)", task, e.Verdict, e.Why, e.TriesLeft, e.Tries)
	case EventTaskEnded:
		if e.Verdict == VerdictMerged {
			return ""
		}
		return fmt.Sprintf("%s %s: %s", e.Task, e.Verdict, e.Why)
	}
	return ""
}

// eventJSON is e as --json prints it.
func eventJSON(e Event) map[string]any {
	m := map[string]any{"event": e.Kind.String(), "time": e.Time.UTC().Format(time.RFC3339Nano), "batch": e.Batch}
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set("task", e.Task, e.Task != "")
	set("title", e.Title, e.Title != "")
	set("run", e.Run, e.Run != "")
	set("try", e.Try, e.Try > 0)
	set("attempt", e.Attempt, e.Attempt > 0)
	set("resumed", true, e.Resumed)
	set("verdict", e.Verdict, e.Verdict != "")
	set("why", e.Why, e.Why != "")
	set("commit", e.Commit, e.Commit != "")
	set("iteration", e.Iteration, e.Kind == EventIteration || e.Kind == EventRunEnded)
	set("status", e.Status, e.Status != "")
	set("cost_usd", e.CostUSD, e.Kind == EventIteration)
	if e.Kind == EventBatchStarted {
		m["source"], m["target"], m["tasks"], m["parallel"] = e.Source, e.Target, e.Tasks, e.Parallel
		m["retries"], m["integrate"], m["attempts"] = e.Retries, e.Integrate, e.Attempts
	}
	if e.Kind == EventTaskBack {
		m["runs_left"], m["runs"] = e.TriesLeft, e.Tries
	}
	return m
}

// Summary prints how the batch ended: a line, a row per task, and the
// command that takes the target.
func (p *Printer) Summary(s *Summary) {
	if p.asJSON {
		p.json(map[string]any{"event": "batch_ended", "summary": s})
		return
	}
	fmt.Fprintf(p.w, "batch %s %s: %s\n", s.ID, s.State, s.Reason)
	tw := tabwriter.NewWriter(p.w, 2, 4, 2, ' ', 0)
	for _, t := range s.Tasks {
		commit := short(t.Commit)
		if commit == "" {
			commit = "-"
		}
		what := t.Title
		if t.Why != "" && t.Verdict != VerdictMerged {
			what += " — " + firstLine(t.Why)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t$%.4f\t%s\n", t.ID, t.Verdict, commit, plural(t.Iterations, "iteration"), t.CostUSD, what)
	}
	tw.Flush()
	fmt.Fprintf(p.w, "take the target: %s\n", s.Take)
}

func (p *Printer) json(v any) {
	b, err := json.Marshal(v)
	if err != nil { // strings, numbers and slices of them: cannot fail
		b = []byte(fmt.Sprintf(`{"event":"error","error":%q}`, err.Error()))
	}
	p.w.Write(append(b, '\n'))
}

// short is a commit's first 12 hex digits.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// plural is "1 task", "3 tasks", "2 retries".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	if strings.HasSuffix(word, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}
