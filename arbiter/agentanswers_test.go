package arbiter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeAgent writes an executable named prog that reads its prompt, counts
// its calls in a file, and answers answers[n-1] on call n (the last one
// after that).
func fakeAgent(t *testing.T, prog string, answers ...string) (argv []string, calls func() int) {
	t.Helper()
	dir := t.TempDir()
	for i, a := range answers {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("answer%d", i+1)), []byte(a), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	body := `#!/bin/sh
cat > /dev/null
d=$(dirname "$0")
n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))
echo $n > "$d/count"
f="$d/answer$n"
[ -f "$f" ] || f="$d/answer` + strconv.Itoa(len(answers)) + `"
cat "$f"
`
	path := filepath.Join(dir, prog)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{path, "-p"}, func() int {
		b, err := os.ReadFile(filepath.Join(dir, "count"))
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
}

const (
	proseAnswer  = "I read add.go, found that Add returned 0, and fixed it. All tests pass now."
	diffAnswer   = "```diff\n--- a/add.go\n+++ b/add.go\n@@ -1,3 +1,3 @@\n-func Add(a, b int) int { return 0 }\n+func Add(a, b int) int { return a + b }\n```\n"
	brokenAnswer = `(do (step "Greet" (call :ccos.echo {:message "hi"}))`
	goodAnswer   = `(do (step "Greet" (call :ccos.echo {:message "hi"})))`
)

// A command that answers with no plan at all is a coding agent: plan
// generation stops after the first answer and one repair (never Mode B),
// with an error that says to use [agent]; a command that writes plans,
// even broken ones, gets its whole repair budget in both modes.
func TestCommandAgentAnswersStopEarly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		prog       string
		answers    []string
		maxRepairs int
		calls      int
		fatal      bool
		want       string
	}{
		{"prose, no repairs", "claude", []string{proseAnswer}, 0, 1, true, `its answer holds no plan at all`},
		{"prose, one repair", "claude", []string{proseAnswer}, 1, 2, true, `its last 2 answers hold no plan at all`},
		{"prose, default repairs", "claude", []string{proseAnswer}, 2, 2, true, `run it with [agent] cli = "claude" instead of [model] provider = "command"`},
		{"diffs, many repairs", "codex", []string{diffAnswer}, 10, 2, true, `run it with [agent] cli = "codex"`},
		{"another program", "my-agent", []string{proseAnswer}, 2, 2, true, `/my-agent -p is a coding agent, not a planner`},
		{"other program's config", "my-agent", []string{proseAnswer}, 2, 2, true, `[agent] cli = "command"`},
		{"a broken plan, then prose", "claude", []string{brokenAnswer, proseAnswer}, 2, 3, true, `its last 2 answers hold no plan`},
		{"broken plans use the budget", "claude", []string{brokenAnswer}, 1, 4, false, `in 2 RTFS and 2 JSON IR attempts`},
		{"prose, then a plan", "claude", []string{proseAnswer, goodAnswer}, 2, 2, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			argv, calls := fakeAgent(t, tc.prog, tc.answers...)
			m, err := NewCommand(argv, CommandOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p := NewPipeline(m, PipelineOptions{Registry: testRegistry(t), MaxRepairs: tc.maxRepairs})
			resp, err := p.Plan(context.Background(), PlanRequest{Intent: Intent{Goal: "make the tests pass"}, Iteration: 1})
			if n := calls(); n != tc.calls {
				t.Errorf("%d calls, want %d", n, tc.calls)
			}
			if tc.want == "" {
				if err != nil || resp.Source == "" {
					t.Fatalf("no plan: %v", err)
				}
				return
			}
			if err == nil || errors.Is(err, ErrFatal) != tc.fatal || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v (fatal %t), want fatal %t and %q", err, errors.Is(err, ErrFatal), tc.fatal, tc.want)
			}
			if tc.fatal && strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is not one line: %q", err)
			}
			if tc.fatal && resp.Attempts["B"] != 0 {
				t.Errorf("Mode B ran for an agent: %v", resp.Attempts)
			}
		})
	}
}

// The early stop is the command provider's: a chat model that answers
// prose is repaired and falls back to Mode B as before.
func TestProseFromAChatModelUsesTheBudget(t *testing.T) {
	t.Parallel()
	m := script(proseAnswer, proseAnswer, proseAnswer, proseAnswer, proseAnswer, proseAnswer)
	p := NewPipeline(m, PipelineOptions{Registry: testRegistry(t), MaxRepairs: 2})
	_, err := p.Plan(context.Background(), PlanRequest{Intent: Intent{Goal: "g"}, Iteration: 1})
	if !errors.Is(err, ErrNoPlan) || errors.Is(err, ErrFatal) || len(m.requests) != 6 {
		t.Errorf("%d requests, error %v", len(m.requests), err)
	}
}

func TestIsPlanless(t *testing.T) {
	t.Parallel()
	cases := []struct {
		answer   string
		planless bool
	}{
		{proseAnswer, true},
		{diffAnswer, true},
		{"", true},
		{"## Summary\n\n```go\nfunc (d *Doer) Add(a, b int) int { return a + b }\n```\n", true},
		{brokenAnswer, false},
		{goodAnswer, false},
		{`(step "Greet" (call :ccos.echo {:message "hi"}))`, false},
		{`{"steps": [{"id": "a"`, false},
		{"Here is the plan:\n```clojure\n(do\n  (step \"A\" (call :ccos.echo {:message \"x\"})))\n```", false},
	}
	for _, tc := range cases {
		if got := isPlanless(tc.answer); got != tc.planless {
			t.Errorf("isPlanless(%q) = %t, want %t", tc.answer, got, tc.planless)
		}
	}
}
