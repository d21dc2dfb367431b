package arbiter

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHints(t *testing.T) {
	t.Parallel()
	one := hints([]Diagnostic{{Stage: "capability", Pos: "3:7", Message: "unknown capability :ccos.ecko", Fix: "did you mean :ccos.echo?"}})
	if want := "- 3:7 unknown capability :ccos.ecko; fix: did you mean :ccos.echo?\n"; one != want {
		t.Fatalf("hints = %q, want %q", one, want)
	}
	if got := hints([]Diagnostic{{Stage: "extract", Message: "the answer\nis empty"}}); got != "- the answer is empty\n" {
		t.Fatalf("no position, no fix, folded lines: %q", got)
	}
	if hints(nil) != "" {
		t.Fatal("no diagnostics, no hints")
	}
}

func TestHintsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("very long message ", 100)
	for _, n := range []int{1, 3, 7, 50, 1000} {
		var ds []Diagnostic
		for i := range n {
			ds = append(ds, Diagnostic{Stage: "schema", Pos: itoa(i+1) + ":1", Message: long, Fix: long})
		}
		h := hints(ds)
		if len(h) > maxHints {
			t.Fatalf("%d problems: hints are %d bytes, over %d", n, len(h), maxHints)
		}
		if !strings.HasPrefix(h, "- 1:1 very long") {
			t.Fatalf("%d problems: the first problem must come first: %q", n, h[:40])
		}
		lines := strings.Split(strings.TrimSuffix(h, "\n"), "\n")
		for _, l := range lines {
			if len(l)+1 > maxHintLine {
				t.Fatalf("%d problems: a line of %d bytes with its newline, over %d: %q", n, len(l)+1, maxHintLine, l)
			}
		}
		if n > len(lines) && !strings.Contains(lines[len(lines)-1], "more problem") {
			t.Fatalf("%d problems, %d lines: the last line must count the rest: %q", n, len(lines), lines[len(lines)-1])
		}
	}
	// multibyte text is cut on a character boundary
	h := hints([]Diagnostic{{Message: strings.Repeat("é", 400)}})
	if !strings.HasSuffix(h, "…\n") || !utf8.ValidString(h) {
		t.Fatalf("cut: %q", h)
	}
}
