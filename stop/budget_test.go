package stop

import (
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
)

func TestBeforeIteration(t *testing.T) {
	t.Parallel()
	conds, err := FromConfig([]config.Stop{{Name: "iters", Kind: "max_iterations", Max: 5}, {Name: "cost", Kind: "max_cost", USD: 1.0},
		{Name: "tok", Kind: "max_tokens", Tokens: 1000, Class: "failure"}}, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		s     Spent
		want  string
		class Class
	}{
		{"nothing spent", Spent{}, "", ""},
		{"iterations reached", Spent{Iteration: 5}, "iters", ClassLimit},
		{"the mean cost would cross", Spent{Iteration: 2, Cost: 0.8, DoneIters: 2, DoneCost: 0.8}, "cost", ClassLimit},
		{"the mean cost fits", Spent{Iteration: 2, Cost: 0.6, DoneIters: 2, DoneCost: 0.6}, "", ""},
		{"an uncounted iteration's cost counts, not in the mean", Spent{Iteration: 1, Cost: 0.96, DoneIters: 1, DoneCost: 0.05}, "cost", ClassLimit},
		{"tokens rounded up, the spec's class", Spent{Iteration: 3, Tokens: 998, DoneIters: 3, DoneTokens: 998}, "tok", ClassFailure},
	} {
		f := BeforeIteration(conds, tc.s)
		switch {
		case tc.want == "" && f != nil:
			t.Errorf("%s: forbidden by %s (%s)", tc.name, f.Cond.Name, f.Reason)
		case tc.want != "" && (f == nil || f.Cond.Name != tc.want || f.Class != tc.class):
			t.Errorf("%s: %+v, want %s (%s)", tc.name, f, tc.want, tc.class)
		}
	}
}

// Budgets are the smallest bound of each kind of limit, and Deadline the
// soonest time limit with the condition that sets it: read from the
// conditions' rows, never from kind names.
func TestBudgetsAndDeadline(t *testing.T) {
	t.Parallel()
	conds, err := FromConfig([]config.Stop{{Name: "a", Kind: "max_iterations", Max: 9}, {Name: "b", Kind: "max_iterations", Max: 4},
		{Name: "c", Kind: "max_cost", USD: 2.5}, {Name: "d", Kind: "max_duration", Duration: config.Duration{Duration: 3 * time.Minute}},
		{Name: "e", Kind: "max_duration", Duration: config.Duration{Duration: time.Minute}}, {Name: "f", Kind: "never"}}, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	if b := Budgets(conds); b != (Limits{Iterations: 4, CostUSD: 2.5, Duration: time.Minute}) {
		t.Errorf("Budgets = %+v", b)
	}
	if c, d := Deadline(conds); c == nil || c.Name != "e" || d != time.Minute {
		t.Errorf("Deadline = %v, %s", c, d)
	}
	if c, d := Deadline(conds[:3]); c != nil || d != 0 {
		t.Errorf("Deadline without a time limit = %v, %s", c, d)
	}
}

func TestSpecKeyIgnoresLines(t *testing.T) {
	t.Parallel()
	a := config.Stop{Name: "tests", Kind: "command", Cmd: []string{"go", "test"}, Line: 3,
		Conditions: []config.Stop{{Kind: "file_exists", Path: "x", Line: 4}}}
	b := a
	b.Line, b.Conditions = 30, []config.Stop{{Kind: "file_exists", Path: "x", Line: 40}}
	if SpecKey(a) != SpecKey(b) {
		t.Error("the same condition on other lines has another key")
	}
	b.Cmd = []string{"go", "test", "-count=1"}
	if SpecKey(a) == SpecKey(b) {
		t.Error("another command has the same key")
	}
	if a.Line != 3 || a.Conditions[0].Line != 4 {
		t.Error("SpecKey changed its argument")
	}
}
