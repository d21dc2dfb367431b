package batch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The headless lines and summary of a batch, as text and as JSON.
func TestPrinter(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.Local)
	events := []Event{
		{Kind: EventBatchStarted, Batch: "b1", Source: "prd:prd.json", Target: "ralph/b1/merged", Tasks: 2, Parallel: 2, Integrate: "rebase", Retries: 2},
		{Kind: EventTaskStarted, Task: "US-1", Title: "Greet", Run: "r1", Try: 1},
		{Kind: EventIteration, Task: "US-1", Iteration: 1, Status: "ok", CostUSD: 0.01},
		{Kind: EventRunEnded, Task: "US-1", Verdict: VerdictGreen, Why: "tests held", Iteration: 1},
		{Kind: EventTaskMerged, Task: "US-1", Commit: "0123456789abcdef0123"},
		{Kind: EventTaskEnded, Task: "US-1", Verdict: VerdictMerged},
		{Kind: EventRunEnded, Task: "US-2", Verdict: VerdictFailed, Why: "x"},
		{Kind: EventTaskBack, Task: "US-2", Verdict: VerdictConflict, Why: "conflicts in a.go", TriesLeft: 2, Tries: 3},
		{Kind: EventTaskEnded, Task: "US-2", Verdict: VerdictConflict, Why: "conflicts in a.go"},
	}
	var text strings.Builder
	p := NewPrinter(&text, false)
	for _, e := range events {
		e.Time, e.Batch = at, "b1"
		p.Event(e)
	}
	p.Summary(&Summary{ID: "b1", State: "failed", Reason: "1 of 2 merged, 1 conflict", Take: "git merge --ff-only ralph/b1/merged",
		Tasks: []TaskSummary{{ID: "US-1", Title: "Greet", Verdict: VerdictMerged, Commit: "0123456789abcdef0123", Iterations: 1, CostUSD: 0.01},
			{ID: "US-2", Title: "Part", Verdict: VerdictConflict, Why: "conflicts in a.go", Iterations: 6}}})
	want := `07:00:00 batch b1: 2 tasks from prd:prd.json onto ralph/b1/merged, 2 at a time (rebase, 2 retries)
07:00:00 US-1 started: Greet (run r1, try 1)
07:00:00 US-1 it 1 ok $0.0100
07:00:00 US-1 green after 1 iteration (tests held); to the merge queue
07:00:00 US-1 merged as 0123456789ab
07:00:00 US-2 conflict: conflicts in a.go; back to its loop (2 of 3 runs left)
07:00:00 US-2 conflict: conflicts in a.go
batch b1 failed: 1 of 2 merged, 1 conflict
  US-1  merged    0123456789ab  1 iteration   $0.0100  Greet
  US-2  conflict  -             6 iterations  $0.0000  Part — conflicts in a.go
take the target: git merge --ff-only ralph/b1/merged
`
	if text.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), want)
	}
	var js strings.Builder
	p = NewPrinter(&js, true)
	p.Event(Event{Kind: EventTaskMerged, Time: at, Batch: "b1", Task: "US-1", Commit: "abc"})
	p.Summary(&Summary{ID: "b1", ExitCode: 1})
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	var merged, end map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &merged) != nil || json.Unmarshal([]byte(lines[1]), &end) != nil {
		t.Fatalf("json:\n%s", js.String())
	}
	if merged["event"] != "task_merged" || merged["commit"] != "abc" || merged["task"] != "US-1" {
		t.Errorf("merged line %v", merged)
	}
	if end["event"] != "batch_ended" || end["summary"].(map[string]any)["exit_code"] != 1.0 {
		t.Errorf("end line %v", end)
	}
}
