package rtfs

import (
	"strings"
	"testing"
)

// Cases found in review: each once misbehaved.
func TestHardening(t *testing.T) {
	t.Parallel()
	compileErrs := []struct{ src, want string }{
		{"(defn step [n & body] (last body))", "h.rtfs:1:7: cannot bind step: it is a special form"},
		{"(def step.with-compensation (fn [a b] a))", "cannot bind step.with-compensation"},
		{"(let [call 1] call)", "cannot bind call"},
		{"(fn if [x] x)", "cannot bind if"},
		{"(-> 1 " + strings.Repeat("inc ", 5000) + ")", "nests deeper than 512 levels"},
	}
	for _, tc := range compileErrs {
		_, err := CompileString(tc.src, Options{File: "h.rtfs", Mode: PlanMode})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: got %v, want %q", tc.src, err, tc.want)
		}
	}
	values := []struct{ src, want string }{
		{`(let [x 1] (try (throw "a") (catch e x)))`, "1"},
		{`(try (throw "a") (catch Exception e (:message e)))`, `"a"`},
		{`(try (throw {:type :contract/precondition-failed}) (catch e (:type e)))`, ":rtfs/thrown"},
		{`(try (throw {:type :app/x}) (catch e (:type e)))`, ":app/x"},
	}
	for _, tc := range values {
		p, err := CompileString(tc.src, Options{File: "h.rtfs"})
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		v, err := p.Eval(t.Context())
		if err != nil || Print(v) != tc.want {
			t.Errorf("%s = %s, %v; want %s", tc.src, Print(v), err, tc.want)
		}
	}
}
