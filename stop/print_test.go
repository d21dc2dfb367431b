package stop

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteEvaluationFlags(t *testing.T) {
	t.Parallel()
	ev := Evaluation{Iteration: 2, Results: []Result{
		{Name: "plain"},
		{Name: "cached", CacheHit: true},
		{Name: "broken", TimedOut: true, Err: "exit 3"},
	}}
	var b bytes.Buffer
	WriteEvaluation(&b, 9, ev, false)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 result lines:\n%s", b.String())
	}
	for i, want := range []string{"", " [cached]", " [timed out, error: exit 3]"} {
		line := lines[i+1]
		if got := line[strings.LastIndexByte(line, '%')+1:]; !strings.HasSuffix(line, want) || (want == "" && strings.Contains(got, "[")) {
			t.Errorf("result %d: %q, want it to end in %q", i, line, want)
		}
	}
}
