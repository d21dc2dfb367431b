package stop

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/config"
)

// A condition whose check cannot run is a result with the error, at the
// condition's own position, met with its error_class (failure unless the
// config says otherwise; not_met lets the run go on).
func TestErrorClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		errorClass string
		met        bool
		class      Class
	}{{"", true, ClassFailure}, {"failure", true, ClassFailure}, {"limit", true, ClassLimit}, {"not_met", false, ClassSuccess}} {
		c, err := FromConfig([]config.Stop{{Name: "check", Kind: "command", Cmd: []string{"/nonexistent/check.sh"},
			ErrorClass: tc.errorClass, Line: 12}}, "ralph.toml")
		if err != nil {
			t.Fatal(err)
		}
		ev, err := NewEvaluator(c, Options{}).Evaluate(context.Background(), Input{Iteration: 1, Workdir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		r := ev.Results[0]
		if r.Met != tc.met || r.Class != tc.class || ev.ShouldStop != tc.met {
			t.Errorf("error_class %q: met %t class %s should_stop %t", tc.errorClass, r.Met, r.Class, ev.ShouldStop)
		}
		if !strings.HasPrefix(r.Err, `ralph.toml:12: [[stop]] "check": fork/exec /nonexistent/check.sh`) || !strings.Contains(r.Reason, "error_class") {
			t.Errorf("error_class %q: err %q reason %q", tc.errorClass, r.Err, r.Reason)
		}
	}
}

// A predicate that fails at run time names its [[stop]] table's line and
// the column inside its rtfs string, not the config file's first line.
func TestPredicateRuntimeErrorPosition(t *testing.T) {
	t.Parallel()
	c, err := FromConfig([]config.Stop{{Name: "three", Kind: "predicate", Line: 11,
		RTFS: `(and true (>= (audit.count "Greet" :succeeded) "three"))`}}, "pred.toml")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator(c, Options{}).Evaluate(context.Background(), Input{Iteration: 1, Audit: NewIndex()})
	if err != nil {
		t.Fatal(err)
	}
	r := ev.Results[0]
	want := `pred.toml:11: [[stop]] "three": rtfs:1:11: >= expects a number, got string "three"`
	if r.Err != want || !r.Met || r.Class != ClassFailure {
		t.Errorf("result err %q met %t class %s, want %q met as failure", r.Err, r.Met, r.Class, want)
	}
}

// An error found between evaluations (a completion predicate watched after
// every action) is that condition's result, never served from the cache.
func TestFailedInputIsTheResult(t *testing.T) {
	t.Parallel()
	c, err := FromConfig([]config.Stop{{Name: "p", Kind: "predicate", Line: 3, RTFS: `(audit.succeeded? "x")`}}, "r.toml")
	if err != nil {
		t.Fatal(err)
	}
	e := NewEvaluator(c, Options{})
	in := Input{Iteration: 1, Audit: NewIndex()}
	if ev, _ := e.Evaluate(context.Background(), in); ev.Results[0].Err != "" {
		t.Fatalf("clean evaluation has an error: %+v", ev.Results[0])
	}
	in.Failed = map[string]error{"p": errors.New("rtfs:1:1: boom")}
	ev, err := e.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if r := ev.Results[0]; r.CacheHit || r.Err != `r.toml:3: [[stop]] "p": rtfs:1:1: boom` || !ev.ShouldStop {
		t.Errorf("result %+v", r)
	}
}

func TestErrorClassIsValidated(t *testing.T) {
	t.Parallel()
	_, err := FromConfig([]config.Stop{{Name: "x", Kind: "never", ErrorClass: "maybe", Line: 4}}, "r.toml")
	if err == nil || !strings.Contains(err.Error(), `r.toml:4: [[stop]] "x": error_class "maybe" must be not_met, success, failure or limit`) {
		t.Errorf("err %v", err)
	}
}
