package tasks

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func checklistData(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sources", "checklist", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseChecklist(t *testing.T) {
	t.Parallel()
	pos := func(f string, l, c int) Pos { return Pos{File: f, Line: l, Col: c} }
	cases := []struct {
		file string
		want []Task
	}{
		{"fix_plan.md", []Task{
			{ID: "1", Title: "Parse the config file", Done: true, Index: 0, Pos: pos("fix_plan.md", 5, 1)},
			{ID: "2", Title: "Report a missing key with its line", Index: 1, Pos: pos("fix_plan.md", 6, 1),
				Criteria: []string{"the message names file:line", "`go test ./config/...` passes"}},
			{ID: "3", Title: "Retry uploads that time out", Index: 2, Pos: pos("fix_plan.md", 9, 1),
				Text:     "Uploads over 1 MiB time out on slow links.\nRetry up to three times with backoff.",
				Criteria: []string{"three attempts at most", "backoff doubles each time"}},
			{ID: "4", Title: "Document the retry flag", Index: 3, Pos: pos("fix_plan.md", 14, 1)},
			{ID: "5", Title: "Trim the log output", Index: 4, Pos: pos("fix_plan.md", 18, 1),
				Criteria: []string{"no line over 200 characters"}},
			{ID: "6", Title: "a task under a plain item", Index: 5, Pos: pos("fix_plan.md", 27, 3)},
		}},
		{"spec-kit-tasks.md", []Task{
			{ID: "T001", Title: "Create project structure per implementation plan", Index: 0, Pos: pos("spec-kit-tasks.md", 5, 1)},
			{ID: "T002", Title: "[P] Configure linting and formatting tools", Index: 1, Pos: pos("spec-kit-tasks.md", 6, 1)},
			{ID: "T003", Title: "[US1] Add status column in src/models/book.py", Done: true, Index: 2, Pos: pos("spec-kit-tasks.md", 10, 1)},
			{ID: "T004", Title: "[US1] Show status badge in src/ui/card.tsx (depends on T003)", Index: 3, Pos: pos("spec-kit-tasks.md", 11, 1)},
		}},
		{"crlf.md", []Task{
			{ID: "1", Title: "windows line", Criteria: []string{"crit"}, Index: 0, Pos: pos("crlf.md", 1, 1)},
			{ID: "2", Title: "second", Done: true, Index: 1, Pos: pos("crlf.md", 3, 1)},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			items, err := parseChecklist(tc.file, checklistData(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var got []Task
			for _, it := range items {
				got = append(got, it.task)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
		})
	}
}

// Markdown's edge cases, one line each.
func TestParseChecklistLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		titles    []string
	}{
		{"no tasks", "# Title\n\nJust prose.\n- a plain list\n", nil},
		{"empty", "", nil},
		{"box needs a space after it", "- [ ]done\n-  [x]x\n", nil},
		{"ordered markers", "1) [ ] one\n2. [x] two\n", []string{"one", "two"}},
		{"tilde fence", "~~~\n- [ ] hidden\n~~~\n- [ ] shown\n", []string{"shown"}},
		{"a shorter fence does not close", "````\n```\n- [ ] hidden\n````\n- [ ] shown\n", []string{"shown"}},
		{"prose ends an item", "- [ ] a\nprose\n  - [ ] b\n", []string{"a", "b"}},
		{"tab indent nests", "- [ ] a\n\t- crit\n", []string{"a"}},
		{"unterminated fence", "```\n- [ ] hidden\n", nil},
	}
	for _, tc := range cases {
		items, err := parseChecklist("c.md", []byte(tc.src))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var titles []string
		for _, it := range items {
			titles = append(titles, it.task.Title)
		}
		if !slicesEqual(titles, tc.titles) {
			t.Errorf("%s: titles %q, want %q", tc.name, titles, tc.titles)
		}
	}
}

func slicesEqual(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || cmp.Equal(a, b))
}

func TestParseChecklistErrors(t *testing.T) {
	t.Parallel()
	_, err := parseChecklist("duplicate-ids.md", checklistData(t, "duplicate-ids.md"))
	want := "duplicate-ids.md:2:1: task T001 has the same id as the task at duplicate-ids.md:1:1"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	for src, want := range map[string]string{
		"- [ ] fine\n\n * [x]  \n":  "c.md:3:2: task 2 has no text after its box; write what it asks for",
		"- [ ] fine\n1. [ ] T007\n": "c.md:2:1: task T007 has no text after its box",
	} {
		if _, err := parseChecklist("c.md", []byte(src)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}

// Ticking a box changes that one byte.
func TestMarkChecklist(t *testing.T) {
	t.Parallel()
	src := checklistData(t, "fix_plan.md")
	items, err := parseChecklist("fix_plan.md", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		out, err := markChecklist("fix_plan.md", src, it.task)
		if err != nil {
			t.Fatalf("task %s: %v", it.task.ID, err)
		}
		if it.task.Done {
			if out != nil {
				t.Errorf("task %s was done, and marking it changed the file", it.task.ID)
			}
			continue
		}
		var diff []int
		for i := range src {
			if src[i] != out[i] {
				diff = append(diff, i)
			}
		}
		if len(out) != len(src) || len(diff) != 1 || out[diff[0]] != 'x' || src[diff[0]-1] != '[' {
			t.Errorf("task %s: bytes changed at %v", it.task.ID, diff)
		}
	}
}

// The task is found again by id and title; a task moved by an edit is
// found by its title; one that is gone or ambiguous is refused.
func TestMarkChecklistAfterAnEdit(t *testing.T) {
	t.Parallel()
	task := Task{ID: "2", Title: "second"}
	moved := []byte("- [ ] inserted\n- [ ] first\n- [ ] second\n")
	out, err := markChecklist("c.md", moved, task)
	if err != nil || string(out) != "- [ ] inserted\n- [ ] first\n- [x] second\n" {
		t.Errorf("moved task: %q, %v", out, err)
	}
	for _, src := range []string{"- [ ] first\n- [ ] renamed\n", "- [ ] second\n- [ ] x\n- [ ] second\n"} {
		if _, err := markChecklist("c.md", []byte(src), task); err == nil || !strings.Contains(err.Error(), "tick it by hand") {
			t.Errorf("%q: error %v", src, err)
		}
	}
}

func TestChecklistSource(t *testing.T) {
	t.Parallel()
	root, merge := t.TempDir(), t.TempDir()
	src := checklistData(t, "spec-kit-tasks.md")
	for _, dir := range []string{root, merge} {
		if err := os.WriteFile(filepath.Join(dir, "tasks.md"), src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := Parse("tasks.md")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(spec, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := s.List(context.Background())
	if err != nil || len(ts) != 4 {
		t.Fatalf("List: %d tasks, %v", len(ts), err)
	}
	if err := s.MarkDone(context.Background(), merge, ts[3]); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(merge, "tasks.md"))
	want := bytes.Replace(src, []byte("- [ ] T004"), []byte("- [x] T004"), 1)
	if !bytes.Equal(got, want) {
		t.Errorf("marked:\n%s", got)
	}
	if fi, _ := os.Stat(filepath.Join(merge, "tasks.md")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}
