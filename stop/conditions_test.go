package stop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/testenv"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

func mustCond(t *testing.T, s config.Stop) *Condition {
	t.Helper()
	c, err := New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return c
}

func intp(i int) *int { return &i }

func dur(d time.Duration) config.Duration { return config.Duration{Duration: d} }

func shellResult(stdout string) rtfs.Value {
	return rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("exit"), rtfs.Int(0), rtfs.Keyword("stdout"), rtfs.String(stdout),
		rtfs.Keyword("stderr"), rtfs.String(""), rtfs.Keyword("duration-ms"), rtfs.Int(3)))
}

func needShell(t *testing.T) {
	t.Helper()
	testenv.Tool(t, "sh")
}

// TestKindsMetAndNotMet gives every kind one input that meets it and one
// that does not.
func TestKindsMetAndNotMet(t *testing.T) {
	t.Parallel()
	needShell(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "DONE.md"), []byte("all\n<promise>DONE</promise>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := Input{RunID: "r", Iteration: 3, Started: t0, Now: t0.Add(time.Minute), CostUSD: 1, Tokens: 100, Workdir: dir}
	failed := ledger.Action{Seq: 5, Type: ledger.CapabilityCall, FunctionName: "shell.exec", ErrorMessage: "panic: boom"}
	promise := ledger.Action{Seq: 6, Type: ledger.CapabilityCall, FunctionName: "shell.exec", Success: true, Result: shellResult("ok\n<promise>DONE</promise>")}
	idx := NewIndex()
	idx.Observe(&ledger.Action{Seq: 1, Type: ledger.CapabilityCall, FunctionName: "ccos.echo", Success: true})
	with := func(f func(in *Input)) Input { in := base; in.Audit = idx; f(&in); return in }
	kids := []config.Stop{{Kind: "max_iterations", Max: 3}, {Kind: "file_exists", Path: "DONE.md"}}

	cases := []struct {
		name        string
		spec        config.Stop
		met, notMet Input
		detail      string // of the met case
	}{
		{"on_error", config.Stop{Kind: "on_error", Pattern: "panic:"},
			with(func(in *Input) { in.LastActions = []ledger.Action{failed} }), with(func(in *Input) { in.LastActions = []ledger.Action{promise} }), "matched"},
		{"user_signal", config.Stop{Kind: "user_signal"}, with(func(in *Input) { in.UserSignal = true }), base, "signalled"},
		{"max_iterations", config.Stop{Kind: "max_iterations", Max: 3}, base, with(func(in *Input) { in.Iteration = 2 }), "3/3"},
		{"max_duration", config.Stop{Kind: "max_duration", Duration: dur(time.Minute)}, base,
			with(func(in *Input) { in.Now = t0.Add(30 * time.Second) }), "1m0s/1m0s"},
		{"max_cost", config.Stop{Kind: "max_cost", USD: 1}, base, with(func(in *Input) { in.CostUSD = 0.5 }), "$1.00/$1.00"},
		{"max_tokens", config.Stop{Kind: "max_tokens", Tokens: 100}, base, with(func(in *Input) { in.Tokens = 7 }), "100/100"},
		{"consecutive_failures", config.Stop{Kind: "consecutive_failures", Count: 2},
			with(func(in *Input) { in.ConsecutiveFailures = 2 }), base, "2/2 failures"},
		{"command", config.Stop{Kind: "command", Cmd: []string{"sh", "-c", "echo ok 3 tests"}, MustMatch: `ok \d+ tests`}, base, base, "exit 0"},
		{"predicate rtfs", config.Stop{Kind: "predicate", RTFS: `(audit.succeeded? "ccos.echo")`}, with(func(*Input) {}),
			with(func(in *Input) { in.Audit = NewIndex() }), "holds"},
		{"predicate json", config.Stop{Kind: "predicate", JSON: `{"action_succeeded":{"function_name":"ccos.echo"}}`}, with(func(*Input) {}),
			with(func(in *Input) { in.Audit = NewIndex() }), "holds"},
		{"output_pattern", config.Stop{Kind: "output_pattern", Pattern: "<promise>DONE</promise>"},
			with(func(in *Input) { in.LastActions = []ledger.Action{failed, promise} }), with(func(in *Input) { in.LastActions = []ledger.Action{failed} }), "found"},
		{"output_pattern regex", config.Stop{Kind: "output_pattern", Pattern: `<promise>(DONE|OK)</promise>`, Regex: true},
			with(func(in *Input) { in.LastActions = []ledger.Action{promise} }), base, "found"},
		{"file_exists", config.Stop{Kind: "file_exists", Path: "DONE.md"}, base, with(func(in *Input) { in.Workdir = t.TempDir() }), "exists"},
		{"file_contains", config.Stop{Kind: "file_contains", Path: "DONE.md", Pattern: "<promise>DONE"}, base,
			with(func(in *Input) { in.Workdir = t.TempDir() }), "found"},
		{"all", config.Stop{Kind: "all", Conditions: kids}, base, with(func(in *Input) { in.Iteration = 1 }), "2/2 met"},
		{"any", config.Stop{Kind: "any", Conditions: kids}, with(func(in *Input) { in.Iteration = 1 }),
			with(func(in *Input) { in.Iteration = 1; in.Workdir = t.TempDir() }), "1/2 met"},
		{"not", config.Stop{Kind: "not", Conditions: kids[:1]}, with(func(in *Input) { in.Iteration = 1 }), base, "child not met"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCond(t, tc.spec)
			o := c.check.check(context.Background(), &tc.met)
			if !o.met || o.err != nil || o.progress != 1 || o.detail != tc.detail || o.reason == "" || o.evidence == "" {
				t.Errorf("met case: %+v; want met with progress 1 and detail %q", o, tc.detail)
			}
			if tc.name == "command" { // the not-met case is the same command refusing "0 tests ran"
				c = mustCond(t, config.Stop{Kind: "command", Cmd: []string{"sh", "-c", "echo ok 0 tests ran"}, MustNotMatch: `0 tests`})
			}
			o = c.check.check(context.Background(), &tc.notMet)
			if o.met || o.err != nil || o.progress >= 1 || o.reason == "" {
				t.Errorf("not-met case: %+v", o)
			}
		})
	}
}

func TestNeverAndNoProgress(t *testing.T) {
	t.Parallel()
	if o := mustCond(t, config.Stop{Kind: "never"}).check.check(context.Background(), &Input{Iteration: 1000}); o.met {
		t.Errorf("never met: %+v", o)
	}
	dir := t.TempDir()
	c := mustCond(t, config.Stop{Kind: "no_progress", Iterations: 2})
	same := []ledger.Action{{Seq: 1, Type: ledger.CapabilityCall, FunctionName: "x", Success: true, Result: shellResult("same")}}
	var details []string
	for i := 1; i <= 4; i++ {
		in := Input{Iteration: i, Workdir: dir, LastActions: same}
		if i == 2 { // progress: a file changed
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		o := c.check.check(context.Background(), &in)
		if o.err != nil {
			t.Fatal(o.err)
		}
		again := c.check.check(context.Background(), &in) // the same iteration twice counts once
		if again.detail != o.detail {
			t.Errorf("iteration %d evaluated twice: %q then %q", i, o.detail, again.detail)
		}
		details = append(details, o.detail)
		if met := i == 4; o.met != met {
			t.Errorf("iteration %d: met %t, want %t (%s)", i, o.met, met, o.reason)
		}
	}
	if got := strings.Join(details, ", "); got != "no progress 0/2, no progress 0/2, no progress 1/2, no progress 2/2" {
		t.Errorf("details: %s", got)
	}
}

func TestCommandExpectExitAndStartFailure(t *testing.T) {
	t.Parallel()
	needShell(t)
	c := mustCond(t, config.Stop{Kind: "command", Cmd: []string{"sh", "-c", "exit 3"}, ExpectExit: intp(3)})
	if o := c.check.check(context.Background(), &Input{}); !o.met {
		t.Errorf("expect_exit 3: %+v", o)
	}
	c = mustCond(t, config.Stop{Kind: "command", Cmd: []string{"sh", "-c", "exit 3"}})
	if o := c.check.check(context.Background(), &Input{}); o.met || !strings.Contains(o.reason, "exited 3, want 0") {
		t.Errorf("exit 3: %+v", o)
	}
	c = mustCond(t, config.Stop{Kind: "command", Cmd: []string{"/nonexistent/tool"}})
	if o := c.check.check(context.Background(), &Input{}); o.met || o.err == nil {
		t.Errorf("missing program: %+v", o)
	}
}

// TestFromConfigErrorsNameTheLine loads real TOML and checks that deep
// validation errors name the [[stop]] line.
func TestFromConfigErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, stop, want string }{
		{"rtfs does not compile", `kind = "predicate"` + "\n" + `rtfs = '(audit.succeeded? "x"'`, "rtfs:1:"},
		{"unknown symbol", `kind = "predicate"` + "\n" + `rtfs = '(audit.sucseeded? "x")'`, "audit.sucseeded?"},
		{"json malformed", `kind = "predicate"` + "\n" + `json = '{"action_succeeded": '`, "predicate JSON"},
		{"json unknown variant", `kind = "predicate"` + "\n" + `json = '{"action_done": {"function_name": "x"}}'`, `unknown predicate variant "action_done"`},
		{"json bad rtfs", `kind = "predicate"` + "\n" + `json = '{"rtfs": "(call :x)"}'`, "rtfs:1:"},
		{"command not on PATH", `kind = "command"` + "\n" + `cmd = ["no-such-program-ralph"]`, "not on PATH"},
		{"composite child", `kind = "any"` + "\n" + `conditions = [{kind = "predicate", rtfs = "(nope)"}]`, "conditions[0]"},
		{"user_signal class", `kind = "user_signal"` + "\n" + `class = "success"`, "always aborts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := "[intent]\ngoal = \"g\"\n\n[[stop]]\nkind = \"max_iterations\"\nmax = 3\n\n[[stop]]\nname = \"bad\"\n" + tc.stop + "\n\n[plan]\nrtfs = \"(do 1)\"\n"
			cfg, err := config.Parse([]byte(src), "ralph.toml", func(string) string { return "" })
			if err != nil {
				t.Fatalf("config.Parse: %v", err)
			}
			_, err = FromConfig(cfg.Stop, "ralph.toml")
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Line != 8 || !strings.HasPrefix(err.Error(), "ralph.toml:8: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want ralph.toml:8: … %s", err, tc.want)
			}
		})
	}
}

func TestFromConfigDefaultsAndOverrides(t *testing.T) {
	t.Parallel()
	cs, err := FromConfig([]config.Stop{
		{Kind: "max_iterations", Max: 5, Line: 3},
		{Name: "green", Kind: "command", Cmd: []string{"true"}, Class: "failure", Priority: intp(99), Timeout: dur(time.Second), TimeoutClass: "limit"},
		{Kind: "user_signal"},
	}, "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, c := range cs {
		got = append(got, c.Name+" "+string(c.Class)+" "+strings.Repeat("|", 0)+itoa(c.Priority))
	}
	want := "max_iterations-1 limit 80,green failure 99,user_signal-3 abort 90"
	if strings.Join(got, ",") != want {
		t.Errorf("got %s, want %s", strings.Join(got, ","), want)
	}
	if cs[1].Timeout != time.Second || cs[1].TimeoutClass != "limit" || cs[0].Line != 3 {
		t.Errorf("overrides lost: %+v", cs[1])
	}
}

func itoa(i int) string { return rtfs.Print(rtfs.Int(int64(i))) }

// A resumed run's evaluator takes no_progress's count back from the last
// recorded evaluation instead of starting again from zero.
func TestRestoreKeepsNoProgressCount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	same := []ledger.Action{{Seq: 1, Type: ledger.CapabilityCall, FunctionName: "x", Success: true, Result: shellResult("same")}}
	evaluate := func(e *Evaluator, i int) Evaluation {
		ev, err := e.Evaluate(context.Background(), Input{Iteration: i, Workdir: dir, LastActions: same})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	first := NewEvaluator([]*Condition{mustCond(t, config.Stop{Name: "stuck", Kind: "no_progress", Iterations: 3})}, Options{})
	evaluate(first, 1)
	last := evaluate(first, 2)
	if d := last.Results[0].Detail; d != "no progress 1/3" {
		t.Fatalf("before the crash: %s", d)
	}
	resumed := NewEvaluator([]*Condition{mustCond(t, config.Stop{Name: "stuck", Kind: "no_progress", Iterations: 3})}, Options{})
	resumed.Restore(last)
	if d := evaluate(resumed, 3).Results[0].Detail; d != "no progress 2/3" {
		t.Errorf("after resume: %s, want the count to carry on at 2/3", d)
	}
	if ev := evaluate(resumed, 4); !ev.ShouldStop || ev.TriggeredBy != "stuck" {
		t.Errorf("iteration 4: %+v", ev)
	}
}

// A composite's children keep their own timeouts: a hung command inside
// `any` times out on its own bound, not the composite's.
func TestCompositeChildTimeouts(t *testing.T) {
	t.Parallel()
	needShell(t)
	hung := config.Stop{Name: "hung", Kind: "command", Cmd: []string{"sleep", "30"}, Timeout: dur(100 * time.Millisecond)}
	c := mustCond(t, config.Stop{Name: "either", Kind: "any", Conditions: []config.Stop{hung, {Name: "n", Kind: "never"}}})
	o := c.check.check(context.Background(), &Input{})
	if o.met || !strings.Contains(o.reason, "hung not met (timed out after 100ms)") {
		t.Errorf("any over a hung command: %+v", o)
	}
	hung.TimeoutClass = "success"
	c = mustCond(t, config.Stop{Name: "either", Kind: "any", Conditions: []config.Stop{hung}})
	if o := c.check.check(context.Background(), &Input{}); !o.met {
		t.Errorf("timeout_class success inside any: %+v", o)
	}
	e := NewEvaluator([]*Condition{c}, Options{Timeout: time.Millisecond})
	if d := e.timeoutFor(c); d != 100*time.Millisecond+time.Millisecond {
		t.Errorf("the composite's bound is %s, want its children's 100ms plus the 1ms default", d)
	}
}

// Through the evaluator, a composite's bound ends after its children's: a
// child that times out on its own bound leaves its siblings time to run,
// and the composite is not reported as timed out. (Once, with a default
// below the children's budget, both deadlines fell together and `any` over
// a hung command and an existing file was "timed out, not met".)
func TestCompositeBoundOutlastsItsChildren(t *testing.T) {
	t.Parallel()
	needShell(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The child's bound is twice the evaluator's default, which is what a
	// composite gets beyond its children's budget: were the composite
	// bounded by the default alone, it would time out first. The default
	// is also the margin for killing and reaping the child, so it is far
	// above a loaded machine's scheduling delays.
	const childBound, margin = 2 * time.Second, time.Second
	hung := config.Stop{Name: "hung", Kind: "command", Cmd: []string{"sleep", "30"}, Timeout: dur(childBound)}
	for _, tc := range []struct {
		name string
		s    config.Stop
	}{
		{"flat", config.Stop{Name: "either", Kind: "any", Conditions: []config.Stop{hung, {Name: "f", Kind: "file_exists", Path: "done"}}}},
		{"nested", config.Stop{Name: "either", Kind: "any", Conditions: []config.Stop{
			{Name: "inner", Kind: "all", Conditions: []config.Stop{hung}}, {Name: "f", Kind: "file_exists", Path: "done"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := NewEvaluator([]*Condition{mustCond(t, tc.s)}, Options{Timeout: margin})
			ev, err := e.Evaluate(context.Background(), Input{Iteration: 1, Workdir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if r := ev.Results[0]; r.TimedOut || !r.Met || !strings.Contains(r.Reason, "hung not met (timed out after 2s)") {
				t.Errorf("%+v", r)
			}
		})
	}
}

func TestResultFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    Result
		want string
	}{
		{"plain", Result{Met: true}, ""},
		{"cached", Result{CacheHit: true}, "cached"},
		{"all, error last", Result{CacheHit: true, TimedOut: true, Err: "boom"}, "cached,timed out,error"},
	} {
		if got := strings.Join(tc.r.Flags(), ","); got != tc.want {
			t.Errorf("%s: flags %q, want %q", tc.name, got, tc.want)
		}
	}
}
