package stop

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// trace is a small run: tests pass, then a commit, an issue fails, a step
// completes.
func traceIndex() *Index {
	ix := NewIndex()
	for _, a := range traceActions("run-1") {
		ix.Observe(&a)
	}
	return ix
}

func traceActions(run string) []ledger.Action {
	meta := func(kv ...string) map[string]rtfs.Value {
		m := map[string]rtfs.Value{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = rtfs.String(kv[i+1])
		}
		return m
	}
	return []ledger.Action{
		{Seq: 1, RunID: run, ActionID: "a1", Type: ledger.RunStarted, FunctionName: "run"},
		{Seq: 2, RunID: run, ActionID: "a2", Type: ledger.IterationStarted},
		{Seq: 3, RunID: run, ActionID: "a3", Type: ledger.PlanStepStarted, FunctionName: "Tests", Success: true},
		{Seq: 4, RunID: run, ActionID: "a4", Type: ledger.CapabilityCall, FunctionName: "shell.exec", Success: false,
			ErrorMessage: "exit 1", Metadata: meta("exit", "1"), Cost: 0.25},
		{Seq: 5, RunID: run, ActionID: "a5", Type: ledger.IterationStarted},
		{Seq: 6, RunID: run, ActionID: "a6", Type: ledger.CapabilityCall, FunctionName: "shell.exec", Success: true,
			Metadata: meta("exit", "0", "cmd", "go test ./..."), Result: rtfs.String("ok"), Cost: 0.5},
		{Seq: 7, RunID: run, ActionID: "a7", Type: ledger.PlanStepCompleted, FunctionName: "Tests", Success: true},
		{Seq: 8, RunID: run, ActionID: "a8", Type: ledger.CapabilityCall, FunctionName: "git.commit", Success: true, Result: rtfs.Int(7)},
		{Seq: 9, RunID: run, ActionID: "a9", Type: ledger.CapabilityCall, FunctionName: "github.create_issue", ErrorMessage: "403"},
		{Seq: 10, RunID: run, ActionID: "a10", Type: ledger.LlmConsultation, FunctionName: "llm", Cost: 0.25},
	}
}

func evalOn(t *testing.T, ix *Index, src string) (bool, error) {
	t.Helper()
	p, err := ParsePredicate(src, "test")
	if err != nil {
		t.Fatalf("parse %s: %v", src, err)
	}
	b, err := p.Bind(ix)
	if err != nil {
		t.Fatal(err)
	}
	return b.Eval(context.Background())
}

func TestAuditBuiltins(t *testing.T) {
	t.Parallel()
	ix := traceIndex()
	cases := []struct {
		src  string
		want bool
	}{
		{`(audit.succeeded? "shell.exec")`, true},
		{`(audit.failed? "shell.exec")`, true},
		{`(audit.succeeded? "github.create_issue")`, false},
		{`(audit.failed? "git.commit")`, false},
		{`(audit.succeeded? "Tests")`, true},    // PlanStepCompleted
		{`(audit.succeeded? "nothing")`, false}, // unknown name
		{`(audit.metadata? "shell.exec" "exit" "0")`, true},
		{`(audit.metadata? "shell.exec" "exit" "2")`, false},
		{`(audit.metadata? "shell.exec" "cmd" "go test ./...")`, true},
		{`(audit.metadata? "git.commit" "exit" "0")`, false},
		{`(= 2 (audit.count "shell.exec" :any))`, true},
		{`(= 1 (audit.count "shell.exec" "failed"))`, true},
		{`(= 1 (audit.count "shell.exec" :succeeded))`, true},
		{`(= 2 (audit.count "shell.exec"))`, true},
		{`(= 0 (audit.count "nope" :any))`, true},
		{`(= "ok" (audit.last-result "shell.exec"))`, true},
		{`(= 7 (audit.last-result "git.commit"))`, true},
		{`(nil? (audit.last-result "nope"))`, true},
		{`(audit.before? "shell.exec" "git.commit")`, true},
		{`(audit.before? "git.commit" "shell.exec")`, false},
		{`(audit.before? "shell.exec" "github.create_issue")`, false}, // it never succeeded
		{`(= 2 (audit.iteration))`, true},
		{`(= 1.0 (audit.cost))`, true}, // 0.25 + 0.5 + 0.25 (the LLM)
		{`(and (audit.succeeded? "shell.exec") (not (audit.failed? "github.create_issue")))`, false},
		{`(and (audit.succeeded? "shell.exec") (not (audit.failed? "git.commit")))`, true},
	}
	for _, tc := range cases {
		got, err := evalOn(t, ix, tc.src)
		if err != nil || got != tc.want {
			t.Errorf("%s = %t, %v; want %t", tc.src, got, err, tc.want)
		}
	}
}

func TestAuditBuiltinErrors(t *testing.T) {
	t.Parallel()
	ix := traceIndex()
	for _, src := range []string{`(audit.succeeded? 1)`, `(audit.count "x" :maybe)`, `(audit.metadata? "x" 2 "y")`} {
		if _, err := evalOn(t, ix, src); err == nil {
			t.Errorf("%s: no error", src)
		}
	}
	for _, src := range []string{``, `(audit.succeeded? "x"`, `(audit.nope "x")`, `(call :shell.exec {})`, `(audit.succeeded?)`} {
		if _, err := ParsePredicateRTFS(src, "p"); err == nil {
			t.Errorf("%q compiled", src)
		}
	}
}

func TestObserveIgnoresReplays(t *testing.T) {
	t.Parallel()
	ix := traceIndex()
	n := ix.Observed()
	for _, a := range traceActions("run-1") {
		ix.Observe(&a)
	}
	if ix.Observed() != n {
		t.Errorf("replay changed the index: %d → %d", n, ix.Observed())
	}
}

func TestExplainNamesDecidingActions(t *testing.T) {
	t.Parallel()
	p, err := ParsePredicate(`{"and": [{"action_succeeded": {"function_name": "shell.exec"}}, {"action_metadata_matches": {"function_name": "shell.exec", "key": "exit", "value": "0"}}]}`, "p")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Bind(traceIndex())
	holds, ev, err := b.Explain(context.Background())
	if err != nil || !holds || len(ev) != 2 || ev[0].Seq != 6 || ev[1].ActionID != "a6" {
		t.Fatalf("explain: %t %v %+v", holds, err, ev)
	}
	if s := FormatEvidence(ev); !strings.Contains(s, `(audit.succeeded? "shell.exec") → true at seq 6 (a6)`) {
		t.Errorf("evidence: %s", s)
	}
}

func TestPredicateJSONRoundTrip(t *testing.T) {
	t.Parallel()
	srcs := []string{
		`{"action_succeeded": {"function_name": "ccos.chat.send"}}`,
		`{"action_failed":{"function_name":"github.create_issue"}}`,
		`{"action_metadata_matches": {"value": "0", "key": "exit", "function_name": "shell.exec"}}`,
		`{"and": [{"action_succeeded": {"function_name": "a"}}, {"not": {"action_failed": {"function_name": "b \"q\""}}}]}`,
		`{"or": [{"rtfs": "(audit.succeeded? \"x\") ; done"}, {"action_failed": {"function_name": "y"}}]}`,
	}
	for _, src := range srcs {
		e, err := UnmarshalPredicateJSON([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		out, _ := e.MarshalJSON()
		e2, err := UnmarshalPredicateJSON(out)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("%s → %s → %+v, %v", src, out, e2, err)
		}
		out2, _ := e2.MarshalJSON()
		if string(out) != string(out2) {
			t.Errorf("marshal not stable: %s vs %s", out, out2)
		}
		if _, err := ParsePredicateJSON(out, "p"); err != nil {
			t.Errorf("%s: %v", out, err)
		}
	}
	e, _ := UnmarshalPredicateJSON([]byte(srcs[3]))
	if got := e.RTFS(); got != `(and (audit.succeeded? "a") (not (audit.failed? "b \"q\"")))` {
		t.Errorf("RTFS: %s", got)
	}
}

func TestPredicateJSONRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"action_done": {"function_name": "x"}}`:                            `unknown predicate variant "action_done"`,
		`{"action_succeeded": {"function_name": "x"}`:                        "unexpected end",
		`{"action_succeeded": {"function_name": "x", "extra": 1}}`:           `unknown field "extra"`,
		`{"action_succeeded": {}}`:                                           `missing field "function_name"`,
		`{"action_succeeded": {"function_name": ""}}`:                        "function_name is empty",
		`{"action_succeeded": {"function_name": 3}}`:                         "want a string",
		`{"action_metadata_matches": {"function_name": "x", "key": "k"}}`:    `missing field "value"`,
		`{"action_succeeded": {"function_name": "x", "function_name": "y"}}`: "appears twice",
		`{"and": []}`: "at least one",
		`{"and": {"action_failed": {"function_name": "x"}}}`:   "an array",
		`{"not": [{"action_failed": {"function_name": "x"}}]}`: "an object",
		`{"rtfs": 1}`:                         "want a string",
		`{"rtfs": "(audit.succeeded? \"x\""}`: "p:1:",
		`{}`:                                  "empty object",
		`{"action_failed": {"function_name": "x"}, "or": []}`: "exactly one key",
		`{"action_failed": {"function_name": "x"}} {}`:        "after the predicate",
		`[]`:   "want an object",
		``:     "unexpected end",
		`null`: "want an object",
	}
	for src, want := range cases {
		if _, err := ParsePredicateJSON([]byte(src), "p"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
	deep := strings.Repeat(`{"not":`, 100) + `{"action_failed":{"function_name":"x"}}` + strings.Repeat("}", 100)
	if _, err := ParsePredicateJSON([]byte(deep), "p"); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Errorf("deep nesting: %v", err)
	}
}

// FuzzPredicateJSON checks that whatever parses round-trips exactly and
// translates to RTFS that compiles; anything else is an error, never a panic.
func FuzzPredicateJSON(f *testing.F) {
	for _, s := range []string{
		`{"action_succeeded": {"function_name": "ccos.chat.send"}}`,
		`{"and": [{"action_succeeded": {"function_name": "a"}}, {"not": {"action_failed": {"function_name": "b"}}}]}`,
		`{"or": [{"rtfs": "(= 1 (audit.count \"x\" :any))"}, {"action_metadata_matches": {"function_name": "s", "key": "k", "value": "v"}}]}`,
		`{"rtfs": "true ; comment"}`, `{"not": {}}`, `{"and": [}`, `{"x": 1}`, `"str"`, `{"rtfs": ") ("}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePredicateJSON(data, "fuzz")
		if err != nil {
			return
		}
		out, _ := p.JSON.MarshalJSON()
		p2, err := ParsePredicateJSON(out, "fuzz")
		if err != nil {
			t.Fatalf("%q parsed, its marshal %q does not: %v", data, out, err)
		}
		if !reflect.DeepEqual(p.JSON, p2.JSON) || p.Source != p2.Source {
			t.Fatalf("round trip changed %q: %q", data, out)
		}
		if _, err := p.Bind(NewIndex()); err != nil {
			t.Fatalf("%q: translated RTFS %q does not compile: %v", data, p.Source, err)
		}
	})
}
