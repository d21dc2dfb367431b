package arbiter

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/governance"
)

func TestCheckStages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		con   governance.Constitution
		src   string
		stage string // first problem's stage; "" means the plan passes
		pos   string
		msg   string // part of the first problem's message
		fix   string // part of its fix
	}{
		{"valid", governance.Constitution{}, `(do (step "Greet" (call :ccos.echo {:message "hi"})) (step "Add" (call :ccos.math.add 2 3)))`, "", "", "", ""},
		{"valid data flow", governance.Constitution{}, `(do (step "Read" (call :fs.read {:path "a"})) (step "Write" (let [n (count (:result ctx))] (call :fs.write {:path "b" :content (str n)}))))`, "", "", "", ""},
		{"valid loop and saga", governance.Constitution{}, `(do (step-loop "T" {:max 3 :until (fn [r] (= 0 (:exit r)))} (call :shell.exec {:cmd "go" :args ["test"] :check false})) (step.with-compensation (step "Put" (call :kv.put {:key "k" :value 1})) (step "Undo" (call :kv.put {:key "k" :value nil}))))`, "", "", "", ""},
		{"valid plan form", governance.Constitution{}, `(plan :program (do (step "A" (call :ccos.echo {:message "x"}))))`, "", "", "", ""},
		{"valid CCOS plan wrapper", governance.Constitution{}, `(plan :name "greet" :language rtfs20 :body (do (step "A" (call :ccos.echo {:message "x"}))))`, "", "", "", ""},
		{"valid model forms", governance.Constitution{}, `(do (doseq [m ["a" "b"]] (step "Echo" (call :ccos.echo {:message m}))) (step "Sum" (let [{:keys [trip/days]} {:trip/days 3} seen #{:a}] (loop [i 0 acc 0] (if (< i days) (recur (inc i) (+ acc i)) (call :ccos.echo {:message (str acc (count (for [x [1 2] :when (seen :a)] x)) (case acc 3 "!" "?"))}))))))`, "", "", "", ""},
		{"declare", governance.Constitution{}, `(do (declare f) (step "A" (call :ccos.echo {:message "x"})))`, "forms", "1:5", "declare is not allowed", "letfn"},
		{"recur not in tail", governance.Constitution{}, `(do (step "A" (loop [i 0] (inc (recur i)))))`, "governance", "1:32", "recur must be in tail position", "last form of the loop body"},
		{"parse error", governance.Constitution{}, `(do (step "A" (call :ccos.echo {:message "x" :y}))))`, "parse", "1:32", "odd number", "every key needs a value"},
		{"two top-level forms", governance.Constitution{}, `(do (step "A" (call :ccos.echo {:message "x"}))) (do)`, "forms", "1:50", "2 top-level forms", "one (do …)"},
		{"not a do", governance.Constitution{}, `(step "A" (call :ccos.echo {:message "x"}))`, "forms", "1:1", "must be one (do …)", "wrap"},
		{"defn", governance.Constitution{}, `(do (defn f [x] x) (step "A" (call :ccos.echo {:message "x"})))`, "forms", "1:5", "defn is not allowed", "inline"},
		{"call outside step", governance.Constitution{}, `(do (call :ccos.echo {:message "x"}))`, "forms", "1:5", "outside any step", "(step \"Name\""},
		{"string capability id", governance.Constitution{}, `(do (step "A" (call "ccos.echo" {:message "x"})))`, "forms", "1:21", "literal keyword", "write :ccos.echo"},
		{"step name not literal", governance.Constitution{}, `(do (step (str "A") (call :ccos.echo {:message "x"})))`, "forms", "1:5", "needs a literal name", ""},
		{"unknown capability", governance.Constitution{}, `(do (step "A" (call :ccos.ecko {:message "x"})))`, "capability", "1:21", "unknown capability :ccos.ecko", "did you mean :ccos.echo?"},
		{"unknown capability by suffix", governance.Constitution{}, `(do (step "A" (call :echo {:message "x"})))`, "capability", "1:21", "unknown capability :echo", "did you mean :ccos.echo?"},
		{"literal type", governance.Constitution{}, `(do (step "A" (call :ccos.echo {:message 42})))`, "schema", "1:42", ":message expected string, got int", "{:message string}"},
		{"string key", governance.Constitution{}, `(do (step "A" (call :ccos.echo {"message" "x"})))`, "schema", "1:33", `"message" is not a known key`, "write :message"},
		{"unknown key", governance.Constitution{}, `(do (step "A" (call :ccos.echo {:message "x" :loud true})))`, "schema", "1:46", ":loud is not a known key", "{:message string}"},
		{"missing key with expression", governance.Constitution{}, `(do (step "A" (call :fs.write {:path (str "a")})))`, "schema", "1:31", ":content is required", "{:path string :content string :append boolean?}"},
		{"expression value with bad literal sibling", governance.Constitution{}, `(do (step "A" (call :fs.write {:path (str "a") :content 1})))`, "schema", "1:57", ":content expected string", ""},
		{"tuple arity", governance.Constitution{}, `(do (step "A" (call :ccos.math.add 1 2 3)))`, "schema", "1:15", "takes 2 arguments, got 3", "[number number]"},
		{"tuple arity with expression", governance.Constitution{}, `(do (step "A" (call :ccos.math.add 1 (inc 2) 3)))`, "schema", "1:15", "takes 2 arguments, got 3", ""},
		{"tuple element", governance.Constitution{}, `(do (step "A" (call :ccos.math.add 1 "2")))`, "schema", "1:38", "[1] expected number", ""},
		{"too many positional", governance.Constitution{}, `(do (step "A" (call :ccos.echo "a" (str "b"))))`, "schema", "1:15", "at most 1 positional", ""},
		{"deny", governance.Constitution{Deny: []string{"fs.*"}}, `(do (step "A" (call :fs.read {:path "x"})))`, "governance", "1:15", "denied", "remove this call"},
		{"not allowed", governance.Constitution{Allow: []string{"ccos.*"}}, `(do (step "A" (call :fs.read {:path "x"})))`, "governance", "1:15", "not in [governance].allow", "listed in the prompt"},
		{"shell allow", governance.Constitution{ShellAllow: []string{"go"}}, `(do (step "A" (call :shell.exec {:cmd "rm" :args ["-rf" "/"]})))`, "governance", "1:15", `command "rm"`, "only these commands"},
		{"require contracts", governance.Constitution{RequireContracts: []string{"fs.write"}}, `(do (step "A" (call :fs.write {:path "a" :content "b"})))`, "governance", "1:15", "must run inside a step with a :pre or :post", "^{:pre"},
		{"require compensation", governance.Constitution{RequireCompensationForEffects: []string{"kv"}}, `(do (step "A" (call :kv.put {:key "a" :value 1})))`, "governance", "1:15", "step.with-compensation", "(step.with-compensation"},
		{"unknown symbol", governance.Constitution{}, `(do (step "A" (call :ccos.echo {:message (shout "x")})))`, "governance", "1:43", "shout", ""},
		{"max steps", governance.Constitution{MaxSteps: 1}, `(do (step "A" (call :ccos.echo {:message "x"})) (step "B" (call :ccos.echo {:message "y"})))`, "governance", "", "over the limit of 1", "at most 1 steps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := testChecker(t, tc.con)
			_, ps := c.check(tc.src)
			if tc.stage == "" {
				if len(ps) > 0 {
					t.Fatalf("problems: %+v", ps)
				}
				return
			}
			if len(ps) == 0 {
				t.Fatalf("no problem found, want %s: %s", tc.stage, tc.msg)
			}
			p := ps[0]
			pos := ""
			if p.pos.Line > 0 {
				pos = p.pos.String()
			}
			if p.stage != tc.stage || pos != tc.pos || !strings.Contains(p.msg, tc.msg) || !strings.Contains(p.fix, tc.fix) || p.fix == "" {
				t.Fatalf("problem = {%s %s %q fix %q}, want {%s %s %q fix %q}", p.stage, pos, p.msg, p.fix, tc.stage, tc.pos, tc.msg, tc.fix)
			}
		})
	}
}

func TestCheckOrdersStages(t *testing.T) {
	t.Parallel()
	c := testChecker(t, governance.Constitution{})
	_, ps := c.check(`(do (step "A" (call :ccos.echo {:message 1})) (call :nope) (def x 1))`)
	var stages []string
	for _, p := range ps {
		stages = append(stages, p.stage)
	}
	if got := strings.Join(stages, " "); got != "forms forms capability schema" {
		t.Fatalf("stages = %q, want forms before capability before schema", got)
	}
}

func TestSuggestCapability(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	for id, want := range map[string]string{"shell.run": "did you mean :shell.exec?", "fs.reed": "did you mean :fs.read?", "totally.different": "use only listed capabilities"} {
		if got := suggestCapability(id, reg, nil); !strings.Contains(got, want) {
			t.Errorf("suggest(%s) = %q, want %q", id, got, want)
		}
	}
}
