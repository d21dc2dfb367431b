package loop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/rtfs"
)

func TestFeedbackBlock(t *testing.T) {
	t.Parallel()
	first := FeedbackBlock(1, 20, arbiter.Feedback{})
	if want := "## ralph feedback\n\nIteration 1 of 20.\nLast iteration: none; this is the first.\n\nThe success conditions have not been checked yet.\n"; first != want {
		t.Errorf("first iteration:\n%s\nwant:\n%s", first, want)
	}
	long := strings.Repeat("line\n", 60) + "--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(2, 3) = -1, want 5\n```\nFAIL\n"
	fb := arbiter.Feedback{Iteration: 2, Status: "failed", Failures: []string{"agent.run: claude exited with status 1\n(Error: bad key)"},
		Conditions: []arbiter.ConditionStatus{
			{Name: "iterations", Kind: "max_iterations", Class: "limit", Detail: "2/20"},
			{Name: "tests", Kind: "command", Class: "success", Reason: "go test ./... exited 1, want 0", Evidence: long},
			{Name: "built", Kind: "file_exists", Class: "success", Met: true, Evidence: "bin/app"},
		}}
	got := FeedbackBlock(3, 0, fb)
	lines := strings.Split(got, "\n")
	if lines[0] != "## ralph feedback" || lines[2] != "Iteration 3." || lines[3] != "Last iteration (2): failed." ||
		lines[4] != "- agent.run: claude exited with status 1 (Error: bad key)" || lines[6] != "Unmet success conditions:" ||
		lines[8] != "### tests (command): go test ./... exited 1, want 0" {
		t.Errorf("block:\n%s", got)
	}
	if strings.Contains(got, "iterations") || strings.Contains(got, "built") {
		t.Errorf("only unmet success conditions belong in the block:\n%s", got)
	}
	body := got[strings.Index(got, "```\n")+4 : strings.LastIndex(got, "```")]
	if n := strings.Count(body, "\n"); n != feedbackEvidenceLines {
		t.Errorf("evidence has %d lines, want the last %d", n, feedbackEvidenceLines)
	}
	if !strings.Contains(body, "calc_test.go:7: Add(2, 3) = -1, want 5") || strings.Contains(body, "```") {
		t.Errorf("evidence tail:\n%s", body)
	}
	none := FeedbackBlock(4, 5, arbiter.Feedback{Iteration: 3, Status: "ok", Conditions: fb.Conditions[2:]})
	if !strings.HasSuffix(none, "Last iteration (3): ok.\n\nNo success condition is unmet.\n") {
		t.Errorf("all met:\n%s", none)
	}
}

func TestAgentPlannerWritesOneAgentCall(t *testing.T) {
	t.Parallel()
	prompt := filepath.Join(t.TempDir(), "PROMPT.md")
	if err := os.WriteFile(prompt, []byte("Fix \"it\" \\ now.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := AgentPlanner{PromptFile: prompt, MaxIterations: 9, Secrets: []string{"sk-secret-12345"}}
	resp, err := p.Plan(context.Background(), arbiter.PlanRequest{Iteration: 2, Feedback: arbiter.Feedback{Iteration: 1, Status: "failed",
		Failures: []string{"token sk-secret-12345 refused"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Mode != "agent" || resp.Provider != "agent" {
		t.Errorf("mode %q provider %q", resp.Mode, resp.Provider)
	}
	forms, err := rtfs.Read(resp.Source, "plan")
	if err != nil {
		t.Fatalf("plan does not read: %v\n%s", err, resp.Source)
	}
	if len(forms) != 1 || !strings.HasPrefix(resp.Source, `(do (step "Agent" (call :agent.run {:prompt "Fix \"it\" \\ now.`) {
		t.Errorf("plan = %s", resp.Source)
	}
	call := forms[0].Items[1].Items[2]
	got := call.Items[2].Value().AsMap().GetKey("prompt").Str()
	want := "Fix \"it\" \\ now.\n\n" + FeedbackBlock(2, 9, arbiter.Feedback{Iteration: 1, Status: "failed", Failures: []string{"token [REDACTED] refused"}})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prompt (-want +got):\n%s", diff)
	}
	// The prompt file is read at every iteration: an edit counts at once.
	if err := os.Remove(prompt); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Plan(context.Background(), arbiter.PlanRequest{Iteration: 3}); err == nil || !strings.Contains(err.Error(), "fix [agent].prompt_file") {
		t.Errorf("a missing prompt file: %v", err)
	}
}

// A prompt too large for the plan's string, text or binary, is one size
// error naming the file and its size; a large one that fits reads back.
func TestAgentPlannerPromptSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	binary := make([]byte, 1_000_000)
	for i := range binary {
		binary[i] = byte(i*131 + i/7) // not UTF-8 text
	}
	for _, tc := range []struct {
		name    string
		content []byte
		wantErr string
	}{
		{"text", []byte(strings.Repeat("a", 1_100_000)), "is 1100000 bytes and takes"},
		{"binary", binary, "is 1000000 bytes and takes"},
		{"fits", []byte(strings.Repeat("b\n", 300_000)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".md")
			if err := os.WriteFile(path, tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
			resp, err := AgentPlanner{PromptFile: path}.Plan(context.Background(), arbiter.PlanRequest{Iteration: 1})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := rtfs.Read(resp.Source, "plan"); err != nil {
					t.Errorf("the plan does not read back: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), path+" "+tc.wantErr) || !strings.Contains(err.Error(), "more than the 1048576 a plan's string holds; shorten it") {
				t.Errorf("got %v, want the size error naming %s", err, path)
			}
		})
	}
}
