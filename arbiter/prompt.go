package arbiter

import (
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/rtfs"
)

// systemA is Mode A's system prompt: seed 004's scaffold rules, the
// dialect subset, and three examples.
const systemA = `You generate RTFS plans for ralph, an agent-loop runner. RTFS is a small Clojure-like language.

Rules:
- Output ONLY an RTFS plan wrapped in (do ...) (or (plan :name "..." :body (do ...))). No prose, no comments, no code fences.
- Allowed forms: do, step, call, let, if, when, when-not, cond, case, condp, if-let, when-let, if-some, when-some, loop/recur, doseq, dotimes, for, ->, ->>, some->, as->, fn, #(...), letfn, match, step-parallel, step-loop, step.with-compensation. No def, defn or declare.
- Every (call ...) sits inside a (step "Name" ...). Step names are literal strings; capability ids are literal keywords.
- Map keys MUST be colon-keywords: {:message "hi"}, never {"message" "hi"}.
- Use ONLY the capabilities listed below, with arguments that match their input schema.

Dialect:
- (step "Name" body...) runs body as one recorded step; its value is the value of its last form.
- (call :cap.id arg...) invokes a capability: one map argument for {:key type} schemas, positional arguments for the others.
- (let [x (call ...)] body...) binds a result; (if test then else) and (when test body...) branch; only nil and false are false.
- Destructure results: (let [{:keys [exit stdout]} (:result ctx)] ...); a qualified key {:keys [user/name]} binds name.
- (doseq [f files] (step "Process" (call ...))) runs steps for each element; (dotimes [i 3] ...) n times; (loop [i 0] (if (< i 3) (recur (inc i)) i)) with recur only as the last form. Each pass of a loop that holds steps is recorded as its own step.
- (for [x xs :when (pred x) :let [y (f x)]] expr) builds a vector; sequences are eager vectors. Sets: #{:a :b}, (contains? s x), (s x).
- (println "text" x) records a log line on the chain.
- ctx is the plan context: the intent params plus :iteration. After each step a map result is merged into ctx and the result is under :result. Read it with (:key ctx).
- (step-parallel (step ...) (step ...)) runs independent steps at the same time.
- (step-loop "Name" {:max 5 :until (fn [r] ...)} body...) repeats body until :until holds of its result, at most :max times.
- (step.with-compensation (step "Do" ...) (step "Undo" ...)) runs Undo if a later step fails.
- Step metadata goes before the body: (step "Name" ^{:retry {:max 2 :backoff-ms 500} :timeout-ms 60000} body...).
- Builtins: str get get-in assoc assoc-in update update-in dissoc merge select-keys keys vals count first last nth conj concat map map-indexed mapcat filter remove keep reduce range sort sort-by group-by frequencies partition partition-by interpose zipmap distinct set disj subvec = not= < <= > >= + - * / inc dec int float not and or empty? not-empty contains? includes? starts-with? split join trim lower-case upper-case subs parse-int println prn log.

Example 1:
(do
  (step "Greet" (call :ccos.echo {:message "hello"}))
  (step "Add" (call :ccos.math.add 2 3)))

Example 2:
(do
  (step "Read notes" (call :fs.read {:path "NOTES.md"}))
  (step "Summarise"
    (let [notes (:result ctx)]
      (call :fs.write {:path "SUMMARY.md" :content (str "Notes are " (count notes) " characters long.")}))))

Example 3:
(do
  (step-parallel
    (step "Version" (call :shell.exec {:cmd "go" :args ["version"]}))
    (step "Status" (call :shell.exec {:cmd "git" :args ["status" "--short"]})))
  (step-loop "Tests" {:max 3 :until (fn [r] (= 0 (:exit r)))}
    (call :shell.exec {:cmd "go" :args ["test" "./..."] :check false})))`

// systemB is Mode B's system prompt: seed 004's JSON IR schema.
const systemB = `You generate plans for ralph, an agent-loop runner, as JSON.

Output ONLY one JSON object, no prose and no code fences:
{"steps": [{"id": "...", "name": "...", "capability": ":cap.id", "args": ..., "deps": ["..."], "options": {...}}]}

Rules:
- id: a short unique string; name: a human-readable step name; capability: one of the listed ids.
- args: an object for {:key type} schemas (keys without colons, e.g. {"message": "hi"}); an array of positional arguments for the others (e.g. [2, 3]).
- deps: ids of the steps that must finish first. No cycles. Steps that do not depend on each other may run at the same time.
- options (optional): {"retry": {"max": 2, "backoff_ms": 500}, "timeout_ms": 60000, "contracts": {"pre": "(fn [ctx] ...)", "post": "(fn [ctx ctx2] ...)"}, "idempotency": {"key": "...", "scope": "plan"}, "deterministic": true, "isolation": "inherit"}.
- To use an earlier step's result, write an RTFS expression as an argument value: {"$rtfs": "(:stdout ctx)"}.
- Use ONLY the capabilities listed below, with arguments that match their input schema.

Example:
{"steps": [
  {"id": "greet", "name": "Greet", "capability": ":ccos.echo", "args": {"message": "hello"}, "deps": []},
  {"id": "add", "name": "Add", "capability": ":ccos.math.add", "args": [2, 3], "deps": []},
  {"id": "save", "name": "Save", "capability": ":fs.write", "args": {"path": "sum.txt", "content": {"$rtfs": "(str (:result ctx))"}}, "deps": ["greet", "add"]}
]}`

// Feedback bounds in the prompt.
const (
	maxPromptPlan    = 4 << 10
	maxPromptFailure = 1 << 10
	maxPromptFails   = 10
	maxPromptReason  = 300
	maxPromptOutput  = 16 << 10 // a previous answer quoted in a repair
)

// inventory lists the capabilities plans may call: id, input schema, one
// example, effects, and the description.
func inventory(reg *capability.Registry, gov *governance.Kernel) string {
	var b strings.Builder
	for _, s := range reg.Specs() {
		if !gov.Permits(s.ID) {
			continue
		}
		fmt.Fprintf(&b, "- :%s %s", s.ID, schemaText(s))
		if s.Description != "" {
			b.WriteString(" — " + oneLine(s.Description))
		}
		b.WriteString("\n")
		if len(s.Examples) > 0 {
			fmt.Fprintf(&b, "  example: %s\n", s.Examples[0])
		}
		effects := "none"
		if len(s.Effects) > 0 {
			var parts []string
			for _, e := range s.Effects {
				parts = append(parts, rtfs.Print(e.Value()))
			}
			effects = strings.Join(parts, " ")
		}
		fmt.Fprintf(&b, "  effects: %s", effects)
		if s.Program != nil { // it runs a program: say which shell_allow lets it
			if allow := gov.Constitution().ShellAllow; len(allow) > 0 {
				fmt.Fprintf(&b, "; commands allowed: %s", strings.Join(allow, ", "))
			} else {
				b.WriteString("; no command is allowed")
			}
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "(none: the constitution allows no capability)\n"
	}
	return b.String()
}

// userPrompt is the task: capabilities, intent, and the previous
// iteration's feedback.
func userPrompt(inv string, req PlanRequest, fb Feedback) string {
	var b strings.Builder
	b.WriteString("Capabilities:\n")
	b.WriteString(inv)
	b.WriteString("\nIntent:\n")
	fmt.Fprintf(&b, "goal: %s\n", req.Intent.Goal)
	if m := req.Intent.Params.AsMap(); m != nil && m.Len() > 0 {
		fmt.Fprintf(&b, "params (in ctx): %s\n", rtfs.Print(req.Intent.Params))
	}
	if p := strings.TrimSpace(req.Intent.Prompt); p != "" {
		fmt.Fprintf(&b, "instructions (PROMPT.md):\n%s\n", p)
	}
	if fb.Iteration > 0 {
		fmt.Fprintf(&b, "\nPrevious iteration (%d):\n", fb.Iteration)
		if fb.LastPlan != "" {
			fmt.Fprintf(&b, "plan:\n%s\n", strings.TrimSpace(truncate(fb.LastPlan, maxPromptPlan)))
		}
		if len(fb.Failures) > 0 {
			b.WriteString("failures:\n")
			for i, f := range fb.Failures {
				if i == maxPromptFails {
					fmt.Fprintf(&b, "- and %d more\n", len(fb.Failures)-i)
					break
				}
				fmt.Fprintf(&b, "- %s\n", truncate(oneLine(f), maxPromptFailure))
			}
		} else {
			b.WriteString("failures: none\n")
		}
		if len(fb.Conditions) > 0 {
			b.WriteString("stop conditions:\n")
			for _, c := range fb.Conditions {
				b.WriteString(conditionLine(c))
			}
		}
	}
	iter := req.Iteration
	if iter <= 0 {
		iter = 1
	}
	fmt.Fprintf(&b, "\nWrite the plan for iteration %d.", iter)
	return b.String()
}

func conditionLine(c ConditionStatus) string {
	status := "not met"
	if c.Met {
		status = "met"
	}
	s := fmt.Sprintf("- %s (%s, %s): %s, progress %.0f%%", c.Name, c.Kind, c.Class, status, 100*c.Progress)
	if c.Detail != "" {
		s += " (" + oneLine(c.Detail) + ")"
	}
	if c.Reason != "" {
		s += " — " + truncate(oneLine(c.Reason), maxPromptReason)
	}
	return s + "\n"
}

// shortenFeedback is the feedback cut down after the model reported the
// prompt too long: no previous plan, three short failures, short reasons.
func shortenFeedback(fb Feedback) Feedback {
	out := Feedback{Iteration: fb.Iteration}
	for i, f := range fb.Failures {
		if i == 3 {
			break
		}
		out.Failures = append(out.Failures, truncate(oneLine(f), 200))
	}
	for _, c := range fb.Conditions {
		c.Reason = truncate(oneLine(c.Reason), 80)
		out.Conditions = append(out.Conditions, c)
	}
	return out
}

// repairA asks for the corrected plan.
func repairA(h string) string {
	return "Your plan was rejected:\n" + h + "Write the whole corrected plan again: ONLY the (do ...) form, nothing else."
}

// repairB asks for the corrected JSON.
func repairB(h string) string {
	return "Your JSON was rejected:\n" + h + "Write the whole corrected JSON object again, and nothing else."
}

// fallbackNote opens Mode B after Mode A failed.
func fallbackNote(h string) string {
	if h == "" {
		return ""
	}
	return "\n\nYour RTFS plans were rejected; the last problems were:\n" + h + "Write the plan as JSON instead."
}

// quoteOutput bounds a previous answer quoted back to the model.
func quoteOutput(s string) string {
	if len(s) <= maxPromptOutput {
		return s
	}
	return truncate(s, maxPromptOutput) + "\n[… cut: the answer was too long]"
}

// renderPrompt is the prompt as one text: what is hashed and recorded.
func renderPrompt(msgs []Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "[%s]\n%s", m.Role, m.Content)
	}
	return b.String()
}

// Redact replaces each secret (8 bytes or longer, as loop.Redact) with
// [REDACTED].
func Redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 8 {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	return s
}
