package arbiter

import (
	"strings"
	"testing"
)

func TestExtractRTFS(t *testing.T) {
	t.Parallel()
	plan := `(do (step "Greet" (call :ccos.echo {:message "hi"})))`
	cases := []struct {
		name, answer string
		want         string // extracted text; "" when extraction must fail
		pos          string // line:col of the extracted text, or of the failure
		msg          string // part of the failure message
	}{
		{"bare", plan, plan, "1:1", ""},
		{"surrounding whitespace", "\n\n  " + plan + "\n", plan, "3:3", ""},
		{"prose around", "Sure! Here is the plan:\n" + plan + "\nLet me know if you need anything else.", plan, "2:1", ""},
		{"fenced", "```clojure\n" + plan + "\n```", plan, "2:1", ""},
		{"fenced rtfs tag and prose", "I think this works.\n\n```rtfs\n" + plan + "\n```\nThe plan greets.", plan, "4:1", ""},
		{"tilde fence", "~~~\n" + plan + "\n~~~", plan, "2:1", ""},
		{"nested fences", "````markdown\nHere:\n```clojure\n" + plan + "\n```\n````", plan, "4:1", ""},
		{"fence wins over prose mention", "Use (do ...) to sequence steps.\n```\n" + plan + "\n```", plan, "3:1", ""},
		{"prose mention without steps loses", "The form (do x) runs x. Plan: " + plan, plan, "1:31", ""},
		{"unclosed fence", "```lisp\n" + plan, plan, "2:1", ""},
		{"string with parens", `(do (step "Say" (call :ccos.echo {:message "a ) b ( c"})))`, `(do (step "Say" (call :ccos.echo {:message "a ) b ( c"})))`, "1:1", ""},
		{"escaped quote in string", `(do (step "Say" (call :ccos.echo {:message "he said \")\""})))`, `(do (step "Say" (call :ccos.echo {:message "he said \")\""})))`, "1:1", ""},
		{"regex with parens", `(do (step "M" (call :ccos.echo {:message (str (re-find #"(a)\)" "a)"))})))`, `(do (step "M" (call :ccos.echo {:message (str (re-find #"(a)\)" "a)"))})))`, "1:1", ""},
		{"comment with paren", "(do ; a ) here\n (step \"A\" (call :ccos.echo {:message \"x\"})))", "(do ; a ) here\n (step \"A\" (call :ccos.echo {:message \"x\"})))", "1:1", ""},
		{"plan form", `(plan :program (do (step "A" (call :ccos.echo {:message "x"}))))`, `(plan :program (do (step "A" (call :ccos.echo {:message "x"}))))`, "1:1", ""},
		{"first of two plans", plan + "\n" + `(do (step "B" (call :ccos.echo {:message "b"})))`, plan, "1:1", ""},
		{"do-something symbol is not an opener", "(do-stuff 1) then " + plan, plan, "1:19", ""},
		{"multibyte prose before", "Voilà — é:\n  " + plan, plan, "2:3", ""},
		{"no plan", "I cannot help with that.", "", "", "has no (do …) form"},
		{"empty", "   \n", "", "", "empty"},
		{"steps without do", `(step "A" (call :ccos.echo {:message "x"}))`, "", "", "around its steps"},
		{"unclosed", "(do (step \"A\" (call :ccos.echo {:message \"x\"})", "", "1:5", "2 brackets are still open"},
		{"unclosed after a balanced mention", "Use (do x) here: (do (step \"A\" (call :ccos.echo {:message \"x\"}))", "", "1:18", "the '(' opened here is never closed"},
		{"mismatched closer", `(do (step "A" [1 2)))`, "", "1:19", `')' does not close the '[' opened at 1:15`},
		{"unclosed string", `(do (step "A" (call :ccos.echo {:message "x})))`, "", "1:42", "string is never closed"},
		// A truncated answer (max_tokens) must not yield the inner (do …) of
		// its last step as "the plan": that would run a fragment.
		{"truncated plan with a nested do", "(do\n  (step \"A\" (call :ccos.echo {:message \"a\"}))\n  (when true (do (step \"B\" (call :ccos.echo {:message \"b\"}))))\n", "", "1:1", "the '(' opened here is never closed"},
		{"truncated fenced plan with a nested do", "```\n(do\n  (step \"A\" (call :ccos.echo {:message \"a\"}))\n  (if x (do (step \"B\" (call :ccos.echo {:message \"b\"}))) nil)", "", "2:1", "never closed"},
		{"prose opener before the plan", "The form (do wraps steps:\n" + plan, plan, "2:1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ex, ds := extractRTFS(tc.answer)
			if tc.want == "" {
				if len(ds) == 0 {
					t.Fatalf("extracted %q, want a failure", ex.text)
				}
				if !strings.Contains(ds[0].Message, tc.msg) || ds[0].Pos != tc.pos || ds[0].Fix == "" || ds[0].Stage != "extract" {
					t.Fatalf("diagnostic = %+v, want pos %q and message containing %q", ds[0], tc.pos, tc.msg)
				}
				return
			}
			if len(ds) > 0 {
				t.Fatalf("diagnostics %+v", ds)
			}
			if ex.text != tc.want {
				t.Fatalf("extracted %q, want %q", ex.text, tc.want)
			}
			if got := itoaPos(ex.line, ex.col); got != tc.pos {
				t.Fatalf("position %s, want %s", got, tc.pos)
			}
		})
	}
}

func itoaPos(l, c int) string {
	return strings.TrimSpace(strings.Join([]string{itoa(l), itoa(c)}, ":"))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func TestExtractionShift(t *testing.T) {
	t.Parallel()
	ex := extraction{line: 3, col: 5}
	if l, c := ex.shift(1, 10); l != 3 || c != 14 {
		t.Errorf("first line: %d:%d, want 3:14", l, c)
	}
	if l, c := ex.shift(2, 7); l != 4 || c != 7 {
		t.Errorf("later line: %d:%d, want 4:7", l, c)
	}
}

func TestExtractJSON(t *testing.T) {
	t.Parallel()
	doc := `{"steps": [{"id": "a", "name": "A", "capability": ":ccos.echo", "args": {"message": "}{"}, "deps": []}]}`
	cases := []struct {
		name, answer, want, msg string
	}{
		{"bare", doc, doc, ""},
		{"fenced json", "```json\n" + doc + "\n```", doc, ""},
		{"prose and an earlier object", `Options like {"x": 1} exist. Plan: ` + doc, doc, ""},
		{"only another object", `{"plan": []}`, `{"plan": []}`, ""},
		{"none", "no JSON here", "", "has no JSON object"},
		{"unclosed", `{"steps": [{"id": "a"}`, "", "never closed"},
		{"steps without braces", `"steps": []`, "", "around its steps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ex, ds := extractJSON(tc.answer)
			if tc.want == "" {
				if len(ds) == 0 || !strings.Contains(ds[0].Message, tc.msg) {
					t.Fatalf("got %q %+v, want a failure containing %q", ex.text, ds, tc.msg)
				}
				return
			}
			if len(ds) > 0 || ex.text != tc.want {
				t.Fatalf("got %q %+v, want %q", ex.text, ds, tc.want)
			}
		})
	}
}

func TestExtractBounds(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("(do ", 200000)
	if _, ds := extractRTFS(huge); len(ds) < 2 || !strings.Contains(ds[len(ds)-1].Message, "was cut") {
		t.Fatalf("huge unbalanced answer: %+v", ds)
	}
	big := strings.Repeat("x", maxResponseBytes+10) + `(do (step "A" (call :ccos.echo {:message "x"})))`
	if _, ds := extractRTFS(big); len(ds) == 0 {
		t.Fatal("a plan past the search limit must not be found")
	}
	bin := string([]byte{0xff, 0xfe, '(', 'd', 'o', ' ', 0x00, '(', 's', 't', 'e', 'p', ' ', '"', 'A', '"', ')', ')'})
	ex, ds := extractRTFS(bin)
	if len(ds) > 0 || !strings.HasPrefix(ex.text, "(do") {
		t.Fatalf("binary prefix: %q %+v", ex.text, ds)
	}
}

func TestLineCol(t *testing.T) {
	t.Parallel()
	s := "ab\nçd(e"
	if l, c := lineCol(s, strings.Index(s, "(")); l != 2 || c != 3 {
		t.Fatalf("lineCol = %d:%d, want 2:3", l, c)
	}
}
