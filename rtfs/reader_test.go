package rtfs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReadForms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"ints", "1 -2 +3 0", "1\n-2\n3\n0\n"},
		{"floats", "1.5 -0.25 1e3 2.5E-3 1.", "1.5\n-0.25\n1000.0\n0.0025\n1.0\n"},
		{"special floats", "##Inf ##-Inf", "##Inf\n##-Inf\n"},
		{"strings", `"a\"b\\c\nd\te" "\u00e9"`, "\"a\\\"b\\\\c\\nd\\te\"\n\"é\"\n"},
		{"keywords", ":a :a.b :ns/a :contract/precondition-failed", ":a\n:a.b\n:ns/a\n:contract/precondition-failed\n"},
		{"symbols", "audit.succeeded? ctx' step.with-compensation + / <= a->b", "audit.succeeded?\nctx'\nstep.with-compensation\n+\n/\n<=\na->b\n"},
		{"commas are whitespace", "[1, 2,3]", "[1 2 3]\n"},
		{"comments", "; hi\n1 ; there\n2", "1\n2\n"},
		{"discard", "#_ (ignored form) 1 #_#_ 2 3 4", "1\n4\n"},
		{"map sorted", "{:b 1, :a 2}", "{:a 2 :b 1}\n"},
		{"nested", "(do (step \"x\" {:k [1 {:z nil}]}))", "(do (step \"x\" {:k [1 {:z nil}]}))\n"},
		{"metadata map", "^{:a 1} [x]", "^{:a 1} [x]\n"},
		{"metadata keyword", "^:private (f)", "^{:private true} (f)\n"},
		{"metadata stacked", "^:a ^:b x", "^{:a true :b true} x\n"},
		{"quote", "'x '(1 2)", "'x\n'(1 2)\n"},
		{"regex", `#"\d+\"x"`, `#"\d+\"x"` + "\n"},
		{"nil true false", "nil true false", "nil\ntrue\nfalse\n"},
		{"unicode symbol", "café", "café\n"},
		{"crlf", "1\r\n2", "1\n2\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forms, err := Read(tc.src, "t.rtfs")
			if err != nil {
				t.Fatalf("Read(%q): %v", tc.src, err)
			}
			if got := PrintProgram(forms); got != tc.want {
				t.Errorf("Read(%q) printed %q, want %q", tc.src, got, tc.want)
			}
		})
	}
}

func TestReadPositions(t *testing.T) {
	t.Parallel()
	forms, err := Read("(do\n  (step \"é\" (call :x 1))\n\t[a {:k v}])", "p")
	if err != nil {
		t.Fatal(err)
	}
	do := forms[0]
	step := do.Items[1]
	call := step.Items[2]
	vec := do.Items[2]
	m := vec.Items[1]
	checks := []struct {
		what string
		n    *Node
		want Pos
	}{
		{"do list", do, Pos{1, 1}},
		{"do symbol", do.Items[0], Pos{1, 2}},
		{"step", step, Pos{2, 3}},
		{"string", step.Items[1], Pos{2, 9}},
		{"call after non-ASCII", call, Pos{2, 13}},
		{"keyword", call.Items[1], Pos{2, 19}},
		{"vector after tab", vec, Pos{3, 2}},
		{"map", m, Pos{3, 5}},
		{"map value", m.Items[1], Pos{3, 9}},
	}
	for _, c := range checks {
		if c.n.Pos != c.want {
			t.Errorf("%s at %v, want %v", c.what, c.n.Pos, c.want)
		}
	}
	if do.End != (Pos{3, 12}) {
		t.Errorf("do closes at %v, want 3:12", do.End)
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"unterminated string", "(str\n  \"abc)", "t.rtfs:2:3: string starting here is never closed"},
		{"unclosed list", "(do\n  (+ 1 2)", "t.rtfs:1:1: '(' opened here is never closed; add ')'"},
		{"unclosed vector deep", "(a [b\n (c)", "t.rtfs:1:4: '[' opened here is never closed"},
		{"mismatched", "(a [b c)]", "t.rtfs:1:8: mismatched ')': expected ']' to close '[' opened at 1:4"},
		{"stray closer", "1 2)", "t.rtfs:1:4: unexpected ')' with no matching opener"},
		{"odd map", "{:a 1\n :b}", "t.rtfs:1:1: map literal has 3 forms, an odd number"},
		{"duplicate key", "{:a 1\n :a 2}", "t.rtfs:2:2: duplicate map key :a (first at 1:2)"},
		{"int overflow", "(+ 1\n   9223372036854775808)", "t.rtfs:2:4: integer 9223372036854775808 overflows int64"},
		{"negative overflow", "-9223372036854775809", "t.rtfs:1:1: integer -9223372036854775809 overflows int64"},
		{"bad escape", "\"ab\\qc\"", "t.rtfs:1:4: invalid escape \\q in string"},
		{"bad unicode escape", "\"\\u12\"", "t.rtfs:1:2: invalid escape: \\u needs four hex digits"},
		{"metadata no target", "(f ^{:a 1})", "t.rtfs:1:4: metadata ^ has no form to attach to"},
		{"metadata at eof", "^:a", "t.rtfs:1:1: metadata ^ has no form to attach to"},
		{"metadata not map", "^5 x", "t.rtfs:1:2: metadata must be a map ^{…} or a keyword ^:kw"},
		{"quote nothing", "(a ')", "t.rtfs:1:4: quote ' has no form after it"},
		{"discard nothing", "#_", "t.rtfs:1:1: discard #_ has no form after it"},
		{"bad number", "12abc", "t.rtfs:1:1: invalid number \"12abc\""},
		{"leading zero", "007", "t.rtfs:1:1: invalid number \"007\": leading zeros are not allowed"},
		{"bad keyword", "::a", "t.rtfs:1:1: invalid keyword \"::a\""},
		{"bare colon", ": x", "t.rtfs:1:1: invalid keyword \":\""},
		{"set duplicate member", "#{1 2\n 1}", "t.rtfs:2:2: duplicate set member 1 (first at 1:3)"},
		{"nested fn literal", "#(+ % #(inc %))", "t.rtfs:1:7: nested #()s are not allowed"},
		{"fn literal bad arg", "#(+ %0 1)", "t.rtfs:1:5: invalid argument %0"},
		{"deref", "@x", "t.rtfs:1:1: deref '@' is not supported"},
		{"syntax quote", "`x", "t.rtfs:1:1: syntax-quote and unquote are not supported"},
		{"char literal", `\a`, "t.rtfs:1:1: character literals are not supported"},
		{"bad regex", `#"(a"`, "t.rtfs:1:1: invalid regex"},
		{"unterminated regex", `#"abc`, "t.rtfs:1:1: regex starting here is never closed"},
		{"bad symbolic", "##Foo", "t.rtfs:1:1: unknown symbolic value ##Foo"},
		{"bad dispatch", "#x", "t.rtfs:1:1: unknown dispatch '#x'"},
		{"float range", "1e400", "t.rtfs:1:1: float 1e400 is out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(tc.src, "t.rtfs")
			if err == nil {
				t.Fatalf("Read(%q) succeeded, want error %q", tc.src, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Type != ErrRead {
				t.Fatalf("Read(%q) error %T %v, want *Error of type %s", tc.src, err, err, ErrRead)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Read(%q) error\n got %q\nwant prefix %q", tc.src, err.Error(), tc.want)
			}
		})
	}
}

func TestReadBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"1MB of open parens", strings.Repeat("(", 1<<20), "nesting is deeper than 256 levels"},
		{"deep quotes", strings.Repeat("'", 1<<20) + "x", "nesting is deeper than 256 levels"},
		{"deep metadata", strings.Repeat("^:a ", 1<<18) + "x", "nesting is deeper than 256 levels"},
		{"huge string", "\"" + strings.Repeat("a", 2<<20) + "\"", "string literal is longer than"},
		{"huge token", strings.Repeat("a", 2<<20), "token is longer than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan error, 1)
			go func() {
				_, err := Read(tc.src, "big")
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want error containing %q", err, tc.want)
				}
			case <-time.After(20 * time.Second): // a hang guard, not a timing assertion
				t.Fatal("reader did not return")
			}
		})
	}
}

func TestReadLimitsConfigurable(t *testing.T) {
	t.Parallel()
	if _, err := ReadWith("[[[1]]]", ReadOptions{MaxDepth: 2}); err == nil || !strings.Contains(err.Error(), "deeper than 2") {
		t.Errorf("MaxDepth 2: got %v", err)
	}
	if _, err := ReadWith("[[1]]", ReadOptions{MaxDepth: 2}); err != nil {
		t.Errorf("depth 2 within MaxDepth 2: %v", err)
	}
	if _, err := ReadWith(`"abcdef"`, ReadOptions{MaxLiteral: 4}); err == nil {
		t.Error("MaxLiteral 4 accepted a 6-byte string")
	}
}

func TestReadValue(t *testing.T) {
	t.Parallel()
	v, err := ReadValue("{:a [1 2] :b \"x\"}")
	if err != nil {
		t.Fatal(err)
	}
	if got := v.AsMap().GetKey("b").Str(); got != "x" {
		t.Errorf(":b = %q", got)
	}
	if _, err := ReadValue("1 2"); err == nil {
		t.Error("ReadValue accepted two forms")
	}
}
