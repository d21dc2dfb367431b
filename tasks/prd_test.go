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

// prdData reads a prd file of testdata/sources/prd.
func prdData(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sources", "prd", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePRD(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file   string
		branch string
		want   []Task
	}{
		{"snarktank.json", "ralph/reading-status", []Task{
			{ID: "US-001", Title: "Add status column to books table", Text: "As a developer, I need to store each book's reading status.",
				Criteria: []string{"Add status column: 'unread' | 'reading' | 'read' (default 'unread')", "Migration runs successfully", "Typecheck passes"},
				Priority: 1, HasPriority: true, Done: true, Index: 0, Pos: Pos{File: "snarktank.json", Line: 6, Col: 5}},
			{ID: "US-002", Title: "Show status badge on book cards", Text: "As a reader, I want to see each book's status at a glance.",
				Criteria: []string{"Each card shows a badge: grey=unread, blue=reading, green=read", "Typecheck passes", "Verify in browser using dev-browser skill"},
				Priority: 2, HasPriority: true, Index: 1, Pos: Pos{File: "snarktank.json", Line: 19, Col: 5}},
			{ID: "US-003", Title: "Filter the shelf by status", Text: "As a reader, I want to see only the books I am reading.",
				Criteria: []string{"Filter dropdown: All | Unread | Reading | Read", "Filter persists in URL params", "Typecheck passes"},
				Priority: 3, HasPriority: true, Index: 2, Pos: Pos{File: "snarktank.json", Line: 32, Col: 5}},
		}},
		{"ralph-tui.json", "feature/sign-in", []Task{
			{ID: "US-001", Title: "Create the sign-in form", Text: "As a user, I want a form to sign in with.",
				Criteria: []string{"Form has email and password inputs", "Submit is disabled while submitting"},
				Priority: 1, HasPriority: true, DependsOn: []string{}, Index: 0, Pos: Pos{File: "ralph-tui.json", Line: 6, Col: 5}},
			{ID: "US-002", Title: "Check credentials on the server", Criteria: []string{"POST /api/sign-in returns 401 on a wrong password"},
				Priority: 1, HasPriority: true, Index: 1, Pos: Pos{File: "ralph-tui.json", Line: 16, Col: 5}},
			{ID: "US-003", Title: "Wire the form to the server", DependsOn: []string{"US-001", "US-002"}, Index: 2,
				Pos: Pos{File: "ralph-tui.json", Line: 23, Col: 5}},
		}},
		{"compact.json", "", []Task{{ID: "A", Title: "one line, no passes", Pos: Pos{File: "compact.json", Line: 1, Col: 17}}}},
		{"bom.json", "", []Task{{ID: "X-1", Title: "after a byte-order mark", Pos: Pos{File: "bom.json", Line: 3, Col: 5}}}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			d, err := parsePRD(tc.file, prdData(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if d.branch != tc.branch {
				t.Errorf("branch %q, want %q", d.branch, tc.branch)
			}
			var got []Task
			for _, s := range d.stories {
				got = append(got, s.task)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
		})
	}
}

// Each kind of bad prd is refused at the place that is wrong, saying
// what is wrong there and how to fix it.
func TestParsePRDErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ file, want string }{
		{"bad-syntax.json", `bad-syntax.json:5:7: invalid JSON (invalid character '"' after object key:value pair); fix the file there`},
		{"truncated.json", `truncated.json:4:1: invalid JSON (the file ends before its JSON value is complete)`},
		{"missing-title.json", `missing-title.json:4:5: story "US-002" has no "title"; add one`},
		{"duplicate-id.json", `duplicate-id.json:4:5: story 2 has the id "US-001", as the story at duplicate-id.json:3:5 has; give each story its own id`},
		{"priority-word.json", `priority-word.json:3:52: story "US-001": "priority" is a string; make it a whole number`},
		{"tasks-not-stories.json", `tasks-not-stories.json:1:1: no "userStories" (this file has "tasks": the format calls the list "userStories")`},
		{"passes-string.json", `passes-string.json:4:16: story "US-001": "passes" is a string; make it true or false`},
		{"numeric-id.json", `numeric-id.json:3:12: story 1: "id" is a number; make it a string`},
		{"bad-branch.json", `bad-branch.json:2:17: "branchName" "ralph/two..dots" is not a valid git branch name (it has "..")`},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			_, err := parsePRD(tc.file, prdData(t, tc.file))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
			if _, ok := err.(*Error); !ok {
				t.Errorf("error is %T, want *Error", err)
			}
		})
	}
}

// Small inputs whose errors sit on one line.
func TestParsePRDInlineErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want string }{
		{`[]`, `p:1:1: a prd file is one JSON object with "userStories", not an array`},
		{`{"userStories": {}}`, `p:1:17: "userStories" is an object; make it an array`},
		{`{"userStories": [1]}`, `p:1:18: story 1 is a number; each story is an object`},
		{`{"userStories": [{"id": "", "title": "t"}]}`, `p:1:25: story 1: "id" is empty`},
		{`{"userStories": [{"id": "a", "title": "t", "priority": 1.5}]}`, `p:1:56: story "a": "priority" 1.5 is not a whole number`},
		{`{"userStories": [{"id": "a", "title": "t", "acceptanceCriteria": ["x", 2]}]}`, `p:1:72: story "a": "acceptanceCriteria" item 2 is a number`},
		{`{"userStories": [{"id": "a", "title": "t", "dependsOn": "b"}]}`, `p:1:57: story "a": "dependsOn" is a string; make it an array of strings`},
		{`{"userStories": [{"id": "a", "id": "b", "title": "t"}]}`, `p:1:30: story 1 has "id" twice; keep one`},
		{`{"branchName": 3, "userStories": []}`, `p:1:16: "branchName" is a number`},
		{`{"userStories": []} x`, `p:1:21: invalid JSON`},
	}
	for _, tc := range cases {
		_, err := parsePRD("p", []byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one starting %q", tc.src, err, tc.want)
		}
	}
}

// Marking a story done changes its "passes" and nothing else: the file is
// byte for byte what it was but for those bytes.
func TestMarkPRD(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file, id, from, to string
	}{
		{"snarktank.json", "US-002", `"priority": 2,
      "passes": false,`, `"priority": 2,
      "passes": true,`},
		{"ralph-tui.json", "US-003", `"passes": false,
      "dependsOn": ["US-001", "US-002"]`, `"passes": true,
      "dependsOn": ["US-001", "US-002"]`},
		{"compact.json", "A", `"title":"one line, no passes"}`, `"title":"one line, no passes", "passes": true}`},
		{"bom.json", "X-1", `"passes": false}`, `"passes": true}`},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			src := prdData(t, tc.file)
			out, err := markPRD(tc.file, src, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Count(src, []byte(tc.from)) != 1 {
				t.Fatalf("the case's text is not once in %s", tc.file)
			}
			want := bytes.Replace(src, []byte(tc.from), []byte(tc.to), 1)
			if !bytes.Equal(out, want) {
				t.Fatalf("marked file:\n%s\nwant:\n%s", out, want)
			}
			d, err := parsePRD(tc.file, out)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range d.stories {
				if s.task.ID == tc.id && !s.task.Done {
					t.Errorf("story %s not done after marking", tc.id)
				}
			}
		})
	}
}

// A story without "passes" gets one, laid out as its last member is.
func TestMarkPRDAddsPasses(t *testing.T) {
	t.Parallel()
	src := []byte("{\n  \"userStories\": [\n    {\n      \"id\": \"S1\",\n      \"title\": \"t\",\n      \"notes\": {\"k\": [1, 2]}\n    }\n  ]\n}\n")
	out, err := markPRD("p", src, "S1")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"userStories\": [\n    {\n      \"id\": \"S1\",\n      \"title\": \"t\",\n      \"notes\": {\"k\": [1, 2]},\n      \"passes\": true\n    }\n  ]\n}\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestMarkPRDAlreadyDoneAndGone(t *testing.T) {
	t.Parallel()
	src := prdData(t, "snarktank.json")
	out, err := markPRD("snarktank.json", src, "US-001")
	if err != nil || out != nil {
		t.Errorf("marking a passing story: %q, %v; want no change", out, err)
	}
	_, err = markPRD("snarktank.json", src, "US-404")
	if err == nil || !strings.Contains(err.Error(), `has no story "US-404" any more`) {
		t.Errorf("marking a story that is gone: %v", err)
	}
}

// The source end to end: opened in a repository, listed there, and marked
// in another checkout of it (the merge checkout), whose file alone
// changes, keeping its mode.
func TestPRDSource(t *testing.T) {
	t.Parallel()
	root, merge := t.TempDir(), t.TempDir()
	src := prdData(t, "snarktank.json")
	for _, dir := range []string{root, merge} {
		if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "docs", "prd.json"), src, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := Parse("prd:docs/prd.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(spec, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if s.File() != "docs/prd.json" || s.String() != "prd:docs/prd.json" || s.Kind().Name != "prd" {
		t.Errorf("File %q String %q Kind %q", s.File(), s.String(), s.Kind().Name)
	}
	ts, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 || s.Branch() != "ralph/reading-status" {
		t.Fatalf("listed %d tasks, branch %q", len(ts), s.Branch())
	}
	if err := s.MarkDone(context.Background(), merge, ts[2]); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(merge, "docs", "prd.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := markPRD("x", src, "US-003"); !bytes.Equal(got, want) {
		t.Errorf("merge checkout's file:\n%s", got)
	}
	if fi, err := os.Stat(filepath.Join(merge, "docs", "prd.json")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode after marking: %v, %v; want 0640", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "docs", "prd.json")); !bytes.Equal(b, src) {
		t.Error("the repository's own file changed")
	}
	if left, _ := filepath.Glob(filepath.Join(merge, "docs", ".prd.json.ralph-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
