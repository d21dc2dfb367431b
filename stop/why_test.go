package stop

import (
	"reflect"
	"testing"
	"time"
)

func TestWhy(t *testing.T) {
	t.Parallel()
	goTest := "$ go test ./...\nexit 1\n--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(2, 3) = -1, want 5\n--- FAIL: TestSub (0.00s)\n    calc_test.go:12: Sub(3, 2) = 5, want 1\nFAIL\nFAIL\tcalc\t0.002s\nFAIL"
	cases := []struct {
		name string
		r    Result
		want string
	}{
		{"first failing test and its message", Result{Kind: "command", Detail: "exit 1", Evidence: goTest}, "FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5"},
		{"failing subtest without a message", Result{Kind: "command", Evidence: "$ go test\nexit 1\n--- FAIL: TestA (0.00s)\n    --- FAIL: TestA/b (0.00s)\nFAIL"}, "FAIL TestA"},
		{"compile error", Result{Kind: "command", Evidence: "$ go test ./...\nexit 1\n# calc\n./calc.go:3:14: undefined: sum\nFAIL\tcalc [build failed]"}, "./calc.go:3:14: undefined: sum"},
		{"panic", Result{Kind: "command", Evidence: "$ go test\nexit 2\nok  \tother\n--- \npanic: runtime error: index out of range [recovered]\n"}, "panic: runtime error: index out of range [recovered]"},
		{"no tests ran", Result{Kind: "command", Evidence: "$ go test -run X\nexit 0\nok  \tcalc\t0.001s [no tests to run]"}, "ok calc 0.001s [no tests to run]"},
		{"other command: first line of output", Result{Kind: "command", Evidence: "$ make check\nexit 2\n…\n\x1b[31mlint: 3 problems\x1b[0m\nmake: *** [check] Error 2"}, "lint: 3 problems"},
		{"met command: its reason", Result{Kind: "command", Met: true, Reason: "go test ./... exited 0", Evidence: "$ go test ./...\nexit 0\nok  \tcalc"}, "go test ./... exited 0"},
		{"command that did not finish", Result{Kind: "command", Reason: "go test did not finish", Evidence: "go test ./...\n…--- FAIL: TestSlow (9.00s)\n    slow_test.go:3: too slow"}, "FAIL TestSlow slow_test.go:3: too slow"},
		{"could not run", Result{Kind: "command", Err: "exec: \"gotest\": executable file not found in $PATH\nmore"}, "error: exec: \"gotest\": executable file not found in $PATH"},
		{"limit: the reason", Result{Kind: "max_iterations", Reason: "iteration 3 of at most 20", Evidence: "iteration 3"}, "iteration 3 of at most 20"},
		{"no_progress: the reason, not the fingerprint", Result{Kind: "no_progress", Reason: "the workspace and verdicts are unchanged for 3 iterations", Evidence: "fingerprint 00ff (3 files, 3 read)"}, "the workspace and verdicts are unchanged for 3 iterations"},
		{"predicate: the query that decided", Result{Kind: "predicate", Evidence: "(audit.succeeded? \"kv.put\") → true at seq 4 (x)\n(audit.metadata? \"kv.put\" \"n\" \"3\") → false"}, "(audit.metadata? \"kv.put\" \"n\" \"3\") → false"},
		{"predicate with no false query: the reason", Result{Kind: "predicate", Reason: "predicate does not hold: (>= (audit.count \"Count\" :succeeded) 3)", Evidence: "(audit.count \"Count\" :succeeded) → true"}, "predicate does not hold: (>= (audit.count \"Count\" :succeeded) 3)"},
		{"file_contains: its evidence", Result{Kind: "file_contains", Met: true, Reason: "DONE found", Evidence: "/w/STATUS.md:4: \"DONE\""}, "/w/STATUS.md:4: \"DONE\""},
		{"empty evidence: the reason", Result{Kind: "file_exists", Reason: "out.txt does not exist"}, "out.txt does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := Why(&c.r); got != c.want {
				t.Errorf("Why = %q, want %q", got, c.want)
			}
		})
	}
}

func TestWhyLongTestOutput(t *testing.T) {
	t.Parallel()
	out := "--- FAIL: TestFirst (0.00s)\n    a_test.go:3: first breaks\n"
	for i := 0; i < 50; i++ {
		out += "=== RUN   TestMany\n--- PASS: TestMany (0.00s)\n"
	}
	out += "--- FAIL: TestLast (0.00s)\n    z_test.go:9: last breaks\nFAIL\nFAIL\tcalc\t0.002s\n"
	ev := "$ go test ./...\nexit 1\n" + commandTail(out, 400)
	if got, want := Why(&Result{Kind: "command", Evidence: ev}), "FAIL TestFirst a_test.go:3: first breaks"; got != want {
		t.Errorf("Why = %q, want %q\nevidence:\n%s", got, want, ev)
	}
	if short := "--- FAIL: TestA (0.00s)\nFAIL\n"; commandTail(short, 400) != short {
		t.Errorf("commandTail changed output shorter than its limit: %q", commandTail(short, 400))
	}
}

func TestBrief(t *testing.T) {
	t.Parallel()
	tests := Result{Name: "tests", Kind: "command", Class: ClassSuccess, Priority: 60, Detail: "exit 1",
		Evidence: "$ go test ./...\nexit 1\n--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(2, 3) = -1, want 5\nFAIL"}
	stuck := Result{Name: "stuck", Kind: "no_progress", Class: ClassFailure, Priority: 70, Progress: 2.0 / 3, Detail: "no progress 2/3",
		Reason: "2 unchanged iterations of 3 allowed"}
	limit := Result{Name: "iterations", Kind: "max_iterations", Class: ClassLimit, Priority: 80, Progress: 0.15, Detail: "3/20"}
	fired := stuck
	fired.Met, fired.Progress, fired.Reason = true, 1, "nothing changed for 3 iterations"
	capped := Result{Name: "cap", Kind: "max_iterations", Class: ClassLimit, Priority: 80, Met: true, Progress: 1, Detail: "3/3",
		Reason: "reached max_iterations 3"}
	lint := Result{Name: "lint", Kind: "command", Class: ClassSuccess, Priority: 50, Detail: "exit 1",
		Evidence: "$ go vet ./...\nexit 1\nvet: x.go:1: bad"}
	passed := tests
	passed.Met, passed.Reason, passed.Evidence = true, "go test ./... exited 0", "$ go test ./...\nexit 0\nok calc"
	cases := []struct {
		name string
		b    Brief
		want string
	}{
		{"tests failing, with a budget", Brief{Iteration: 3, MaxIterations: 20, Status: "ok", Duration: 72 * time.Second, Cost: 0.14, Total: 0.42, Budget: 10,
			Eval: &Evaluation{Results: []Result{limit, stuck, tests}}},
			"it 3/20 done 1m12s +$0.14 ($0.42, 4% of budget) · tests: FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5"},
		{"a failure fires", Brief{Iteration: 4, MaxIterations: 20, Status: "ok", Duration: 944 * time.Millisecond,
			Eval: &Evaluation{Results: []Result{limit, fired, tests}, ShouldStop: true, Class: ClassFailure, TriggeredBy: "stuck"}},
			"it 4/20 done 944ms · stop: stuck (failure): nothing changed for 3 iterations · tests: FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5"},
		{"a limit fires while the tests fail", Brief{Iteration: 3, MaxIterations: 3, Status: "ok", Duration: 2 * time.Second,
			Eval: &Evaluation{Results: []Result{capped, stuck, tests, lint}, ShouldStop: true, Class: ClassLimit, TriggeredBy: "cap"}},
			"it 3/3 done 2s · stop: cap (limit): reached max_iterations 3 · tests: FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5 · lint: vet: x.go:1: bad"},
		{"a limit fires with no success condition", Brief{Iteration: 3, MaxIterations: 3, Status: "ok", Duration: 2 * time.Second,
			Eval: &Evaluation{Results: []Result{capped, stuck}, ShouldStop: true, Class: ClassLimit, TriggeredBy: "cap"}},
			"it 3/3 done 2s · stop: cap (limit): reached max_iterations 3"},
		{"a success fires: another success condition is not a failure", Brief{Iteration: 5, Status: "ok", Duration: time.Second,
			Eval: &Evaluation{Results: []Result{passed, lint}, ShouldStop: true, Class: ClassSuccess, TriggeredBy: "tests"}},
			"it 5 done 1s · stop: tests (success): go test ./... exited 0"},
		{"no success condition: the closest", Brief{Iteration: 2, Status: "failed", Duration: 3 * time.Second, Cost: 0.01, Total: 0.03,
			Eval: &Evaluation{Results: []Result{limit, stuck}}},
			"it 2 failed 3s +$0.01 ($0.03) · closest: stuck 66% (no progress 2/3)"},
		{"no evaluation", Brief{Iteration: 1, Status: "skipped", Duration: 2 * time.Hour}, "it 1 skipped 2h00m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := c.b.String(); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// Unmet lists only success conditions that do not hold, in the order of
// the results (priority), with their whys: a success condition that could
// not be evaluated and counts as a failure (error_class) is the trigger,
// not an unmet one.
func TestEvaluationUnmet(t *testing.T) {
	t.Parallel()
	ev := Evaluation{Results: []Result{
		{Name: "cap", Class: ClassLimit, Met: true, Reason: "reached max_iterations 3"},
		{Name: "tests", Kind: "command", Class: ClassSuccess, Evidence: "$ go test ./...\nexit 1\n--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: boom"},
		{Name: "done", Kind: "file_exists", Class: ClassSuccess, Met: true, Evidence: "DONE exists"},
		{Name: "broken", Kind: "command", Class: ClassFailure, Met: true, Err: "ralph.toml:9: sh: not found"},
		{Name: "lint", Kind: "command", Class: ClassSuccess, Evidence: "$ go vet ./...\nexit 1\nx.go:1:2: bad"},
	}}
	got := ev.Unmet()
	want := []Unmet{{"tests", "FAIL TestAdd calc_test.go:7: boom"}, {"lint", "x.go:1:2: bad"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unmet = %+v, want %+v", got, want)
	}
	if s := UnmetText(got); s != "tests: FAIL TestAdd calc_test.go:7: boom · lint: x.go:1:2: bad" {
		t.Errorf("UnmetText = %q", s)
	}
	if s := UnmetText(nil); s != "" {
		t.Errorf("UnmetText(nil) = %q, want empty", s)
	}
}
