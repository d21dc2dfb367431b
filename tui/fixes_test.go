package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// statusLine is the line above the footer.
func statusLine(m *model) string {
	lines := strings.Split(m.View(), "\n")
	return lines[len(lines)-2]
}

// footer is the last line: the short help.
func footer(m *model) string {
	lines := strings.Split(m.View(), "\n")
	return lines[len(lines)-1]
}

// rowOf is the drawn chain row of the action at seq.
func rowOf(t *testing.T, m *model, seq uint64) string {
	t.Helper()
	for _, idx := range m.tree.visible {
		if m.tree.at(idx).seq == seq {
			return m.chain.row(idx, 80)
		}
	}
	t.Fatalf("seq %d is not a visible row", seq)
	return ""
}

// skippedRun is one iteration that the user skipped: its IterationCompleted
// succeeds with status skipped, as the runner records it.
func skippedRun() []ledger.Action {
	acts := scriptRun(1, false)
	for i := range acts {
		if a := &acts[i]; a.Type == ledger.IterationCompleted {
			a.Metadata["status"] = rtfs.String("skipped")
			a.Metadata["stopped"], a.Metadata["cancelled_by"] = rtfs.String("cancelled"), rtfs.String("skip")
		}
	}
	return acts
}

// The "skip requested" status lasts until the skip takes effect (the
// iteration closes), not until the next log line.
func TestSkipStatusClearsWhenTheSkipTakesEffect(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, skippedRun())
	m := testModel(t, st, true, 120, 40)
	var closer int
	for i, a := range stored {
		if a.Type == ledger.IterationCompleted {
			closer = i
		}
	}
	feed(m, stored[:closer])
	press(m, "s")
	if s := statusLine(m); !strings.Contains(s, "Skip requested: iteration 1") {
		t.Fatalf("status after s: %q", s)
	}
	feed(m, stored[closer:closer+1])
	if s := statusLine(m); strings.Contains(s, "Skip requested") || !strings.Contains(s, "iteration 1 skipped") {
		t.Errorf("status once the iteration closed skipped: %q", s)
	}
}

// A skipped iteration is marked skipped, not ✓.
func TestSkippedIterationShowsSkipped(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, skippedRun())
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	row := rowOf(t, m, seqOf(t, stored, ledger.IterationStarted, "iteration 1", 1))
	if !strings.Contains(row, "↷ Iteration 1") || strings.Contains(row, "✓") {
		t.Errorf("skipped iteration row %q", row)
	}
	press(m, "/")
	for _, r := range "is:skipped" {
		press(m, string(r))
	}
	press(m, "enter")
	if rows := rowTexts(m); len(rows) != 1 || !strings.Contains(rows[0], "Iteration 1") {
		t.Errorf("is:skipped rows %q", rows)
	}
}

// enter on ✗ Iteration 2 shows how it ended (its failed
// IterationCompleted), never its IterationStarted as a success.
func TestEnterOnAFailedIterationShowsItsFailure(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	m.Update(runDoneMsg{})
	selectSeq(t, m, seqOf(t, stored, ledger.IterationStarted, "iteration 2", 1))
	press(m, "enter")
	v := m.View()
	if strings.Contains(v, "✓ succeeded") || !strings.Contains(v, "closed by #") || !strings.Contains(v, "✗ failed") {
		t.Errorf("detail of ✗ Iteration 2:\n%s", v)
	}
}

// Progress shows 99% (never 100%) until the condition is met.
func TestProgressNeverShows100BeforeMet(t *testing.T) {
	t.Parallel()
	p := newCondPane(newStyles(&strings.Builder{}, termenv.Ascii))
	p.setEvaluation(&stop.Evaluation{Iteration: 199, Results: []stop.Result{
		{Name: "two-hundred", Kind: "max_iterations", Class: stop.ClassLimit, Priority: 80, Progress: 199.0 / 200, Detail: "199/200"},
	}})
	if v := p.Render(80, 5); !strings.Contains(v, "99%") || strings.Contains(v, "100%") {
		t.Errorf("199/200 not met:\n%s", v)
	}
	p.setEvaluation(&stop.Evaluation{Iteration: 200, Results: []stop.Result{
		{Name: "two-hundred", Kind: "max_iterations", Class: stop.ClassLimit, Priority: 80, Progress: 1, Met: true, Detail: "200/200"},
	}})
	if v := p.Render(80, 5); !strings.Contains(v, "100%") {
		t.Errorf("200/200 met:\n%s", v)
	}
}

// The footer is drawn from the bindings, whose state follows the run: s, l,
// tab and f are offered; p says resume while paused; the controls go when
// the run ends; n/N appear with a filter.
func TestFooterFollowsTheModel(t *testing.T) {
	t.Parallel()
	acts := scriptRun(3, true)
	st, stored := fixtureStore(t, acts)
	m := testModel(t, st, true, 120, 40)
	feed(m, stored[:20])
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventState, State: loop.StateRunning}}})
	f := footer(m)
	for _, want := range []string{"p pause", "s skip", "a abort", "tab pane", "f follow", "l log", "/ filter", "q quit"} {
		if !strings.Contains(f, want) {
			t.Errorf("running footer lacks %q: %q", want, f)
		}
	}
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventState, State: loop.StatePaused}}})
	if f := footer(m); !strings.Contains(f, "p resume") || strings.Contains(f, "p pause") {
		t.Errorf("paused footer: %q", f)
	}
	press(m, "/")
	press(m, "G")
	press(m, "r")
	press(m, "e")
	press(m, "e")
	press(m, "t")
	press(m, "enter")
	if f := footer(m); !strings.Contains(f, "n next match") || !strings.Contains(f, "N prev match") {
		t.Errorf("filtered footer: %q", f)
	}
	feed(m, stored[20:])
	m.Update(runDoneMsg{})
	if f := footer(m); strings.Contains(f, "p pause") || strings.Contains(f, "p resume") || strings.Contains(f, "s skip") || strings.Contains(f, "a abort") {
		t.Errorf("ended run's footer offers controls: %q", f)
	}
	// At 80 columns the controls and the pane keys still fit.
	m80 := testModel(t, st, true, 80, 24)
	feed(m80, stored[:20])
	if f := footer(m80); !strings.Contains(f, "s skip") || !strings.Contains(f, "tab pane") || !strings.Contains(f, "l log") ||
		!strings.Contains(f, "? help") || !strings.Contains(f, "q quit") {
		t.Errorf("80-column footer: %q", f)
	}
}

// / opens empty, not with the last filter's text; esc leaves the chain
// where it was, not at the top.
func TestFilterOpensEmptyAndEscKeepsThePosition(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	m.Update(runDoneMsg{})
	press(m, "/")
	for _, r := range "is:failed" {
		press(m, string(r))
	}
	press(m, "enter")
	press(m, "/")
	if v := m.input.Value(); v != "" {
		t.Errorf("/ opened with %q", v)
	}
	press(m, "esc") // clears the filter
	sel := seqOf(t, stored, ledger.PlanStepStarted, "Count", 3)
	press(m, "G")
	for range 3 {
		press(m, "right") // unfold down to Iteration 3's steps
	}
	selectSeq(t, m, sel)
	press(m, "/")
	for _, r := range "no such row" {
		press(m, string(r))
	}
	if len(m.tree.visible) != 0 {
		t.Fatalf("%d rows match nothing", len(m.tree.visible))
	}
	press(m, "esc")
	if idx, ok := m.chain.selected(); !ok || m.tree.at(idx).seq != sel || m.chain.cursor == 0 {
		t.Errorf("after esc the selection is row %d (cursor %d), want seq %d where it was", m.tree.at(idx).seq, m.chain.cursor, sel)
	}
}

// n and N jump between filter matches, wrapping around, and each match
// shows its iteration.
func TestNextAndPreviousMatch(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	m.Update(runDoneMsg{})
	press(m, "/")
	for _, r := range "fn:Greet" {
		press(m, string(r))
	}
	press(m, "enter")
	rows := rowTexts(m)
	if len(rows) != 3 {
		t.Fatalf("fn:Greet rows %q", rows)
	}
	for i, r := range rows {
		if want := "it " + string(rune('1'+i)); !strings.Contains(r, want) {
			t.Errorf("match %d %q does not say %q", i, r, want)
		}
	}
	seqAt := func() uint64 { idx, _ := m.chain.selected(); return m.tree.at(idx).seq }
	first := seqOf(t, stored, ledger.PlanStepStarted, "Greet", 1)
	press(m, "g")
	if seqAt() != first {
		t.Fatalf("g selects seq %d", seqAt())
	}
	press(m, "n")
	if want := seqOf(t, stored, ledger.PlanStepStarted, "Greet", 2); seqAt() != want {
		t.Errorf("n: seq %d, want %d", seqAt(), want)
	}
	press(m, "N")
	press(m, "N") // wraps to the last match
	if want := seqOf(t, stored, ledger.PlanStepStarted, "Greet", 3); seqAt() != want {
		t.Errorf("N N: seq %d, want %d", seqAt(), want)
	}
}

// A running step shows how long it has been running.
func TestRunningStepShowsElapsedTime(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, 120, 40)
	countStarted := seqOf(t, stored, ledger.PlanStepStarted, "Count", 1)
	feed(m, stored[:countStarted])
	started := stored[countStarted-1].Timestamp
	m.now = func() time.Time { return started.Add(83 * time.Second) }
	m.chain.now = m.now
	if row := rowOf(t, m, countStarted); !strings.Contains(row, "⟳ Count") || !strings.Contains(row, "1m23s") {
		t.Errorf("running step row %q", row)
	}
	feed(m, stored[countStarted:]) // it closed: its own duration again
	if row := rowOf(t, m, countStarted); strings.Contains(row, "1m23s") || !strings.Contains(row, "12ms") {
		t.Errorf("closed step row %q", row)
	}
}

// Between iterations the status counts down [loop].delay; a rate-limit
// wait counts down too.
func TestDelayAndRateLimitCountdowns(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	now := m.now()
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventDelay, Until: now.Add(5 * time.Second), Iteration: 1}}})
	if s := statusLine(m); !strings.Contains(s, "Next iteration in 5s") {
		t.Errorf("status during the delay: %q", s)
	}
	m.now = func() time.Time { return now.Add(2500 * time.Millisecond) }
	if s := statusLine(m); !strings.Contains(s, "Next iteration in 3s") {
		t.Errorf("status 2.5s into the delay: %q", s)
	}
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventWait, Until: now.Add(30 * time.Second), Text: "429 from the API"}}})
	if s := statusLine(m); !strings.Contains(s, "Rate limited: retrying in 28s") {
		t.Errorf("status during a rate-limit wait: %q", s)
	}
}

// A condition that could not be checked is marked ! with no percentage,
// even when its error_class counts it as met.
func TestErroredConditionShowsNoProgress(t *testing.T) {
	t.Parallel()
	p := newCondPane(newStyles(&strings.Builder{}, termenv.Ascii))
	p.setEvaluation(&stop.Evaluation{Iteration: 1, ShouldStop: true, TriggeredBy: "three", Results: []stop.Result{
		{Name: "three", Kind: "predicate", Class: stop.ClassFailure, Priority: 55, Met: true, Detail: "error",
			Err: `pred.toml:10: [[stop]] "three": rtfs:1:1: >= expects a number, got string "three"`},
	}})
	if v := p.Render(80, 5); strings.Contains(v, "100%") || strings.Contains(v, "✓") || !strings.Contains(v, "! three") {
		t.Errorf("errored condition:\n%s", v)
	}
}
