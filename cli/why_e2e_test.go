package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// whyConfig is a loop whose test command fails the way go test does, and
// whose no_progress condition fires after two unchanged iterations.
const whyConfig = `[intent]
goal = "Make the tests pass"
[model]
provider = "static"
[plan]
rtfs = '(do (step "Work" (call :ccos.echo {:message "trying"})))'
[governance]
allow = ["ccos.*"]
[[stop]]
name = "tests"
kind = "command"
cmd = ['sh', '-c', 'printf -- "--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(2, 3) = -1, want 5\nFAIL\nFAIL\tcalc\t0.002s\n"; exit 1']
[[stop]]
name = "iterations"
kind = "max_iterations"
max = 5
[[stop]]
name = "stuck"
kind = "no_progress"
iterations = 2
`

// Headless --brief prints one line per iteration, after its actions: the
// iteration, its status and duration, and the first failing test with its
// message; the failure that ends the run is named with its class, and the
// failing test still follows it, on that line and in the summary. ralph
// history shows the same why under the condition.
var _ = suite.Add(e2e.Test{Name: "BriefNamesTheFailingTest", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
	if err := os.WriteFile(cfg, []byte(whyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.Ralph("run", cfg, "--brief", "--store", store).Run()
	if code != 1 {
		t.Fatalf("exit %d, want 1 (failed by stuck); stderr %q\n%s", code, errOut, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^it 1/5 done \d+(ms|s) · tests: FAIL TestAdd calc_test\.go:7: Add\(2, 3\) = -1, want 5$`),
		regexp.MustCompile(`^it 2/5 done \d+(ms|s) · tests: FAIL TestAdd calc_test\.go:7: Add\(2, 3\) = -1, want 5$`),
		regexp.MustCompile(`^it 3/5 done \d+(ms|s) · stop: stuck \(failure\): nothing changed for 2 iterations · tests: FAIL TestAdd calc_test\.go:7: Add\(2, 3\) = -1, want 5$`),
		regexp.MustCompile(`^run \S+ failed after 3 iteration\(s\) .* · still failing: tests: FAIL TestAdd calc_test\.go:7: Add\(2, 3\) = -1, want 5$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("--brief printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want %s", i+1, lines[i], re)
		}
	}
	runID := strings.Fields(lines[3])[1]

	// Without --brief the same line follows each iteration's actions.
	out, _, _ = e.Ralph("run", cfg, "--no-tui", "--store", filepath.Join(dir, "store2")).Run()
	if !regexp.MustCompile(`StopConditionsEvaluated stop ok[^\n]*\n\S+ it 1/5 done \d+(ms|s) · tests: FAIL TestAdd`).MatchString(out) {
		t.Errorf("the headless run lacks the brief line after the evaluation:\n%s", out)
	}

	out, errOut, code = e.Ralph("history", runID, "--store", store).Run()
	if code != 0 {
		t.Fatalf("history: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"why: FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5", "✗ stuck"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}

	if _, errOut, code := e.Ralph("run", cfg, "--brief", "--json", "--store", store).Run(); code != 2 || !strings.Contains(errOut, "--brief and --json") {
		t.Errorf("--brief --json: exit %d, stderr %q", code, errOut)
	}
}})

// An agent loop whose tests never pass, stopped by its max_iterations:
// the stopping iteration's line names the limit and still carries the
// failing test, as the lines before it do; so does the summary, and
// --json's summary carries it as still_failing. Headless with --brief,
// plain --no-tui, and --json.
var _ = suite.Add(e2e.Test{Name: "LimitSaysWhatStillFails", Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e, "FAKE_AGENT_DONE_AFTER=100") // never fixes Add
	cfg := filepath.Join(p.dir, "ralph.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	limited := strings.Replace(strings.Replace(string(b), `name = "iterations"`, `name = "cap"`, 1), "max = 20", "max = 3", 1)
	if limited == string(b) || !strings.Contains(limited, `name = "cap"`) {
		t.Fatalf("ralph init's config has no iterations condition of max 20 to make the cap:\n%s", b)
	}
	writeFile(t, cfg, limited)
	const why = `tests: FAIL TestAdd calc_test\.go:7: Add\(2, 3\) = -1, want 5`

	out, errOut, code := p.ralph("run", "--brief", "--store", filepath.Join(p.dir, "brief"))
	if code != 3 {
		t.Fatalf("--brief: exit %d, want 3 (limit)\n%s\n%s", code, out, errOut)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^it 1/3 done \S+ \+\$0\.01 \(\$0\.01, 0% of budget\) · ` + why + `$`),
		regexp.MustCompile(`^it 2/3 done \S+ \+\$0\.01 \(\$0\.02, 0% of budget\) · ` + why + `$`),
		regexp.MustCompile(`^it 3/3 done \S+ \+\$0\.01 \(\$0\.03, 0% of budget\) · stop: cap \(limit\): reached max_iterations 3 · ` + why + `$`),
		regexp.MustCompile(`^run \S+ stopped after 3 iteration\(s\) \(\$0\.0300, \d+ tokens\): limit by cap — reached max_iterations 3 · still failing: ` + why + `$`),
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("--brief printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("--brief line %d = %q, want %s", i+1, lines[i], re)
		}
	}

	out, errOut, code = p.ralph("run", "--no-tui", "--store", filepath.Join(p.dir, "plain"))
	lines = strings.Split(strings.TrimSpace(out), "\n")
	stopping := regexp.MustCompile(`StopConditionsEvaluated stop ok[^\n]*\n\S+ it 3/3 done [^\n]* · stop: cap \(limit\): reached max_iterations 3 · ` + why + `\n`)
	if code != 3 || !stopping.MatchString(out) || !want[3].MatchString(lines[len(lines)-1]) {
		t.Errorf("--no-tui: exit %d, want 3, the stopping iteration's line and the summary with the failing test:\n%s\n%s", code, out, errOut)
	}

	out, errOut, code = p.ralph("run", "--json", "--store", filepath.Join(p.dir, "json"))
	lines = strings.Split(strings.TrimSpace(out), "\n")
	var sum struct {
		Condition    string `json:"condition"`
		StillFailing []struct {
			Condition string `json:"condition"`
			Why       string `json:"why"`
		} `json:"still_failing"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || code != 3 {
		t.Fatalf("--json: exit %d, summary %q: %v\n%s", code, lines[len(lines)-1], err, errOut)
	}
	if sum.Condition != "cap" || len(sum.StillFailing) != 1 || sum.StillFailing[0].Condition != "tests" ||
		sum.StillFailing[0].Why != "FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5" {
		t.Errorf("--json summary %s: want cap, and tests with its failing test in still_failing", lines[len(lines)-1])
	}
}})

// selectedChainRow is the screen line of the chain's selected row (its
// gutter is ›), or -1.
func selectedChainRow(screen string) int {
	for i, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, "┃›") || strings.HasPrefix(l, "│›") {
			return i
		}
	}
	return -1
}

// In a real 80×24 terminal: keys sent in one write (tmux send-keys jjj)
// and a bracketed paste are each several keys; tab and enter on a stop
// condition open its evidence in full, one output line a line; the help
// lists what acts in a recorded run (no y/n, q exits).
var _ = suite.Add(e2e.Test{Name: "TUIWhyAndKeys", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, store := filepath.Join(dir, "ralph.toml"), filepath.Join(dir, "store")
	if err := os.WriteFile(cfg, []byte(whyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := e.Ralph("run", cfg, "--brief", "--store", store).Run()
	if code != 1 {
		t.Fatalf("the recorded run exited %d, want 1:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	runID := strings.Fields(lines[len(lines)-1])[1]

	tm := e.Ralph("view", runID, "--store", store).Term()
	tm.Resize(80, 24)
	screen := tm.WaitIdle(e2e.UntilEnd)
	for _, want := range []string{"Failed by stuck (failure)", "✗ stuck", "FAIL TestAdd calc_test.go:7:",
		// "STOP by …" is cut where the evaluation took 100 ms or more (on a
		// loaded machine): the row's duration keeps its column.
		"✗ stop conditions · STOP"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the 80×24 screen lacks %q:\n%s", want, screen)
		}
	}

	tm.Send("g")
	const from = 2 // the first row of the chain, under the header and the pane's title
	tm.WaitScreen("g selecting the first row", func(s string) bool { return selectedChainRow(s) == from })
	tm.Send("jjj") // one write
	tm.WaitScreen("jjj moving three rows", func(s string) bool { return selectedChainRow(s) == from+3 })
	tm.Paste("kk")
	tm.WaitScreen("a pasted kk moving two rows up", func(s string) bool { return selectedChainRow(s) == from+1 })

	tm.Send("Tab")
	tm.Send("jj") // from stuck, the closest to firing, to tests
	tm.Send("Enter")
	screen = tm.WaitFor("Stop condition · tests")
	for _, want := range []string{"why       FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5", "--- FAIL: TestAdd (0.00s)",
		"\n│       calc_test.go:7: Add(2, 3) = -1, want 5"} {
		if !strings.Contains(strings.ReplaceAll(screen, "┃", "│"), want) {
			t.Errorf("the condition's detail lacks %q:\n%s", want, screen)
		}
	}
	tm.Send("Escape")
	tm.WaitFor("Causal chain") // back in the main view: a ? sent with the escape would read as alt+?
	tm.Send("?")
	screen = tm.WaitFor("Quitting")
	if !strings.Contains(screen, "q or ctrl+c exits.") || strings.Contains(screen, "approve") || strings.Contains(screen, "p pause") {
		t.Errorf("the help of a recorded run offers keys that do not act there, or misstates q:\n%s", screen)
	}
	tm.Send("q")
}})
