package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/stop"
)

// With a replay (ralph view --replay), the history view shows each
// iteration's replayed verdicts under the recorded ones, what the record
// cannot answer, and where the replayed configuration would have stopped.
func TestHistoryShowsAReplayBesideTheRecord(t *testing.T) {
	h := newHistoryView(newStyles(&strings.Builder{}, 0))
	rec := func(it int) histEntry {
		return histEntry{seq: uint64(10 * it), ev: stop.Evaluation{Iteration: it, Results: []stop.Result{
			{Name: "iterations", Kind: "max_iterations", Class: stop.ClassLimit, Priority: 80, Detail: "1/9"}}}}
	}
	h.set(historyMsg{entries: []histEntry{rec(1), rec(2)}, total: 2})
	res := &stop.ReplayResult{Stopped: true, Iteration: 2,
		Decision: stop.Decision{Stop: true, Class: stop.ClassLimit, TriggeredBy: "tight", Reason: "reached max_iterations 2"},
		Steps: []stop.ReplayStep{
			{Iteration: 1, Evaluation: stop.Evaluation{Iteration: 1, Results: []stop.Result{{Name: "tight", Class: stop.ClassLimit, Priority: 80, Detail: "1/2"}}},
				Unknown: []string{"tests"}},
			{Iteration: 2, Evaluation: stop.Evaluation{Iteration: 2, Results: []stop.Result{{Name: "tight", Class: stop.ClassLimit, Priority: 80, Met: true, Detail: "2/2"}}},
				Decision: stop.Decision{Stop: true, Class: stop.ClassLimit, TriggeredBy: "tight"}},
		}}
	h.setReplay(res, "tight.toml")
	got := ansi.Strip(strings.Join(h.content(120), "\n"))
	for _, want := range []string{
		"replay of tight.toml: continue",
		"unknown (the record cannot say; ralph replay --rerun checks them): tests",
		"replay of tight.toml: STOP (limit) by tight",
		"tight.toml would have stopped the run here: reached max_iterations 2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the history view lacks %q:\n%s", want, got)
		}
	}
	if i, j := strings.Index(got, "Iteration 2"), strings.Index(got, "replay of tight.toml: STOP"); i < 0 || j < i {
		t.Errorf("iteration 2's replay is not under iteration 2:\n%s", got)
	}
}
