package loop

import (
	"errors"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/usage"
)

func TestMatchRun(t *testing.T) {
	t.Parallel()
	ids := []string{"01a2-old", "01a2-new", "02b3"}
	id := func(s string) string { return s }
	for _, tc := range []struct {
		arg  string
		want int
		err  string
	}{
		{arg: LatestRun, want: 2},
		{arg: "01a2-new", want: 1},
		{arg: "02", want: 2},
		{arg: "03", want: -1},
		{arg: "01a2", want: -1, err: `run id prefix "01a2" matches 2 runs of the fleet (01a2-old, 01a2-new); give more of the id`},
	} {
		got, err := MatchRun(ids, id, tc.arg, " of the fleet")
		var ue *usage.Error
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.As(err, &ue) || !ue.Help):
			t.Errorf("MatchRun(%q): %v, want the usage error %q", tc.arg, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("MatchRun(%q) = %d, %v; want %d", tc.arg, got, err, tc.want)
		}
	}
	if got, err := MatchRun(nil, id, LatestRun, ""); got != -1 || err != nil {
		t.Errorf("the latest of no runs = %d, %v; want none", got, err)
	}
}

func TestByStart(t *testing.T) {
	t.Parallel()
	runs := []RunRecord{{ID: "c", Started: "2025-01-02T00:00:00Z"}, {ID: "b", Started: "2025-01-01T00:00:00Z"}, {ID: "a", Started: "2025-01-02T00:00:00Z"}}
	var ids []string
	for _, r := range ByStart(runs) {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, ","); got != "b,a,c" {
		t.Errorf("ByStart = %s, want b,a,c", got)
	}
	if runs[0].ID != "c" {
		t.Error("ByStart sorted its argument in place")
	}
}
