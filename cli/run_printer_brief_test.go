package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// evaluations records the stop evaluations of an Evaluator in memory.
type evaluations struct{ acts []*ledger.Action }

func (e *evaluations) Append(_ context.Context, a *ledger.Action) (ledger.Receipt, error) {
	e.acts = append(e.acts, a)
	return ledger.Receipt{}, nil
}

// limitedRunEvents are the events of a run that a max_iterations of 2 stops
// while its tests fail: each iteration's start, end and evaluation, then
// RunStopped and the stopped state. It returns the last evaluation too.
func limitedRunEvents(t *testing.T) ([]loop.Event, *stop.Evaluation) {
	t.Helper()
	conds, err := stop.FromConfig([]config.Stop{
		{Name: "cap", Kind: stop.KindMaxIterations, Max: 2},
		{Name: "tests", Kind: stop.KindCommand, Cmd: []string{"sh", "-c",
			`printf -- '--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(2, 3) = -1, want 5\nFAIL\n'; exit 1`}},
	}, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	rec := &evaluations{}
	ev := stop.NewEvaluator(conds, stop.Options{Ledger: rec, RunID: "r"})
	now := time.Now()
	action := func(it int, a *ledger.Action) loop.Event {
		a.RunID = "r"
		return loop.Event{Kind: loop.EventAction, Time: now, RunID: "r", Iteration: it, Action: a}
	}
	var events []loop.Event
	var last stop.Evaluation
	for it := 1; it <= 2; it++ {
		iter := map[string]rtfs.Value{"iteration": rtfs.Int(int64(it))}
		events = append(events, action(it, &ledger.Action{Type: ledger.IterationStarted, Metadata: iter}))
		events = append(events, action(it, &ledger.Action{Type: ledger.IterationCompleted, DurationMS: 12, Success: true,
			Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it)), "status": rtfs.String("ok")}}))
		if last, err = ev.Evaluate(context.Background(), stop.Input{RunID: "r", Iteration: it, Started: now, Now: now}); err != nil {
			t.Fatal(err)
		}
		events = append(events, action(it, rec.acts[len(rec.acts)-1]))
	}
	if !last.ShouldStop || last.TriggeredBy != "cap" {
		t.Fatalf("the second evaluation does not stop by cap: %+v", last)
	}
	events = append(events, action(2, &ledger.Action{Type: ledger.RunStopped, FunctionName: "cap"}),
		loop.Event{Kind: loop.EventState, Time: now, RunID: "r", Iteration: 2, State: loop.StateStopped})
	return events, &last
}

// printRun prints events and the summary of out with a printer as
// configure sets it up, and returns what it wrote.
func printRun(t *testing.T, events []loop.Event, out *loop.Outcome, asJSON bool, configure func(*printer)) string {
	t.Helper()
	ch := make(chan loop.Event, len(events))
	for _, e := range events {
		ch <- e
	}
	var buf bytes.Buffer
	p := newPrinter(&buf, asJSON)
	if configure != nil {
		configure(p)
	}
	select {
	case <-p.follow(context.Background(), ch):
	case <-time.After(10 * time.Second): // a hang guard only
		t.Fatal("the printer did not finish after the final state")
	}
	if err := p.summary(out); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// A run that a limit stops while its tests fail: the stopping iteration's
// brief line names the limit and still carries the failing test, as the
// lines before it do, and the summary says what still fails; --json's
// summary carries it as still_failing.
func TestPrinterSaysWhatStillFailsAtALimit(t *testing.T) {
	t.Parallel()
	events, last := limitedRunEvents(t)
	out := &loop.Outcome{RunID: "r", State: loop.StateStopped, Class: stop.ClassLimit, TriggeredBy: "cap",
		Reason: "reached max_iterations 2", Iterations: 2, ExitCode: loop.ExitLimit, StillFailing: last.Unmet()}
	const why = "tests: FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5"

	text := printRun(t, events, out, false, func(p *printer) { p.brief, p.tally = true, &iterationTally{maxIterations: 2} })
	want := []string{
		"it 1/2 done 12ms · " + why,
		"it 2/2 done 12ms · stop: cap (limit): reached max_iterations 2 · " + why,
		"run r stopped after 2 iteration(s) ($0.0000, 0 tokens): limit by cap — reached max_iterations 2 · still failing: " + why,
	}
	if got := strings.Split(strings.TrimSpace(text), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("--brief printed\n%s\nwant\n%s", text, strings.Join(want, "\n"))
	}

	text = printRun(t, events, out, false, func(p *printer) { p.tally = &iterationTally{maxIterations: 2} })
	stopping := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d it 2/2 done 12ms · stop: cap \(limit\): reached max_iterations 2 · ` + regexp.QuoteMeta(why) + `$`)
	if !stopping.MatchString(text) || !strings.HasSuffix(text, "still failing: "+why+"\n") {
		t.Errorf("--no-tui lacks the failing test on the stopping iteration's line or the summary:\n%s", text)
	}

	text = printRun(t, events, out, true, nil)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var sum struct {
		Summary      bool         `json:"summary"`
		StillFailing []stop.Unmet `json:"still_failing"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Summary || len(sum.StillFailing) != 1 || sum.StillFailing[0] != (stop.Unmet{Condition: "tests", Why: why[len("tests: "):]}) {
		t.Errorf("--json summary %s: want still_failing with tests and its why", lines[len(lines)-1])
	}
}

// A run that ends in success has nothing still failing: the summary says
// nothing more, and --json's still_failing is an empty list, not null.
func TestPrinterSummaryOfASuccess(t *testing.T) {
	t.Parallel()
	out := &loop.Outcome{RunID: "r", State: loop.StateDone, Class: stop.ClassSuccess, TriggeredBy: "tests",
		Reason: "go test ./... exited 0", Iterations: 3}
	end := []loop.Event{{Kind: loop.EventAction, RunID: "r", Action: &ledger.Action{Type: ledger.RunCompleted}},
		{Kind: loop.EventState, RunID: "r", State: loop.StateDone}}
	text := printRun(t, end, out, false, func(p *printer) { p.brief = true })
	if want := "run r done after 3 iteration(s) ($0.0000, 0 tokens): success by tests — go test ./... exited 0\n"; text != want {
		t.Errorf("summary %q, want %q", text, want)
	}
	text = printRun(t, end, out, true, nil)
	if !strings.Contains(text, `"still_failing":[]`) {
		t.Errorf("--json summary lacks an empty still_failing:\n%s", text)
	}
}
