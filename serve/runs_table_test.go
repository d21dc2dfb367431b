package serve

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/loop"
)

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0s"},
		{430 * time.Millisecond, "0.4s"},
		{12345 * time.Millisecond, "12.3s"},
		{59*time.Minute + 59700*time.Millisecond, "60m00s"},
		{4*time.Minute + 5*time.Second, "4m05s"},
		{2*time.Hour + 7*time.Minute + 10*time.Second, "2h07m"},
		{76 * time.Hour, "3d04h"},
	} {
		if got := shortDuration(c.d); got != c.want {
			t.Errorf("shortDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestStartedColumn(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 15, 0, 0, 0, time.Local)
	today := now.Add(-time.Hour).UTC().Format(time.RFC3339)
	if got := startedColumn(today, now); got != "14:00:00" {
		t.Errorf("today: %q", got)
	}
	earlier := now.Add(-48 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if got := startedColumn(earlier, now); got != "2026-11-24 15:00" {
		t.Errorf("two days ago: %q", got)
	}
	if got := startedColumn("", now); got != "-" {
		t.Errorf("no start: %q", got)
	}
}

// A batch's task runs are listed under it, indented, in --json in the same
// order; a run of no batch, or of a batch without a row, keeps its place.
func TestWriteRunsNestsBatches(t *testing.T) {
	t.Parallel()
	runs := []loop.RunRecord{
		{ID: "batch1", State: "running", Tasks: 2},
		{ID: "solo", State: "done"},
		{ID: "task1", State: "done", Batch: "batch1"},
		{ID: "orphan", State: "done", Batch: "gone"},
		{ID: "task2", State: "running", Batch: "batch1"},
	}
	var table, js strings.Builder
	if err := WriteRuns(&table, runs, nil, false); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(table.String()), "\n")[1:] {
		got = append(got, strings.Join(strings.Fields(line)[:1], "")+"@"+strconv.Itoa(len(line)-len(strings.TrimLeft(line, " "))))
	}
	want := []string{"batch1@0", "task1@2", "task2@2", "solo@0", "orphan@0"}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v:\n%s", got, want, table.String())
	}
	if err := WriteRuns(&js, runs, nil, true); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(js.String()), "\n") {
		var r RunRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID+"<"+r.Batch)
	}
	if want := []string{"batch1<", "task1<batch1", "task2<batch1", "solo<", "orphan<gone"}; !slices.Equal(ids, want) {
		t.Fatalf("--json rows %v, want %v", ids, want)
	}
}
