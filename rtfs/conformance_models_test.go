package rtfs

import (
	"testing"
)

// Conformance cases for the forms and builtins models write most often
// (Clojure's, as in CCOS's plans and prompt grammar). Each case is a
// program and the canonical printed form of its value.

var confQualifiedKeys = []confCase{
	{"keys qualified binds the name", `(let [{:keys [user/name]} {:user/name "x"}] name)`, `"x"`},
	{"keys qualified trip", `(let [{:keys [trip/destination]} {:trip/destination "Paris"}] destination)`, `"Paris"`},
	{"keys qualified or", `(let [{:keys [trip/days] :or {days 3}} {}] days)`, `3`},
	{"keys qualified missing is nil", `(let [{:keys [user/name]} {:name "plain"}] name)`, `nil`},
	{"keys qualified does not leak builtin", `(let [{:keys [user/name]} {}] (nil? name))`, `true`},
	{"keys mixed plain and qualified", `(let [{:keys [id user/email]} {:id 7 :user/email "a@b"}] [id email])`, `[7 "a@b"]`},
	{"ns keys group", `(let [{:user/keys [name age]} {:user/name "n" :user/age 30}] [name age])`, `["n" 30]`},
	{"ns keys group own ns wins", `(let [{:user/keys [name trip/id]} {:user/name "n" :trip/id 2}] [name id])`, `["n" 2]`},
	{"keys as keywords", `(let [{:keys [:a :n/b]} {:a 1 :n/b 2}] [a b])`, `[1 2]`},
	{"strs", `(let [{:strs [host port]} {"host" "h" "port" 80}] [host port])`, `["h" 80]`},
	{"strs or", `(let [{:strs [port] :or {port 8080}} {}] port)`, `8080`},
	{"syms", `(let [{:syms [a b]} {'a 1 'b 2}] (+ a b))`, `3`},
	{"ns syms group", `(let [{:x/syms [a]} {'x/a 5}] a)`, `5`},
	{"keys qualified in fn params", `((fn [{:keys [plan/steps]}] (count steps)) {:plan/steps [1 2 3]})`, `3`},
	{"keys qualified with as", `(let [{:keys [user/id] :as u} {:user/id 1 :x 2}] [id (:x u)])`, `[1 2]`},
	{"or default evaluated only when missing", `(let [{:keys [a] :or {a (throw "no")}} {:a 1}] a)`, `1`},
}

func TestConformanceModelForms(t *testing.T) {
	t.Parallel()
	groups := [][]confCase{confQualifiedKeys}
	seen := map[string]bool{}
	for _, group := range groups {
		for _, tc := range group {
			if seen[tc.name] {
				t.Fatalf("duplicate case name %q", tc.name)
			}
			seen[tc.name] = true
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				v, err := confEval(tc.src, Options{})
				if err != nil {
					t.Fatalf("%s\nerror: %v", tc.src, err)
				}
				if got := Print(v); got != tc.want {
					t.Errorf("%s\n got %s\nwant %s", tc.src, got, tc.want)
				}
			})
		}
	}
}
