package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeGitHub serves the parts of GitHub's REST API the github source
// uses, in the shapes docs.github.com/en/rest/issues gives: issue objects
// (pull requests among them, marked by "pull_request"), pages of perPage
// with a Link header ("<…>; rel=\"next\", <…>; rel=\"last\""), blocked_by
// lists, and the comment, label and update endpoints, which it records.
type fakeGitHub struct {
	t       *testing.T
	srv     *httptest.Server
	token   string // the token it wants ("" takes any, or none)
	perPage int
	issues  []fakeIssue

	mu       sync.Mutex
	requests []string // "METHOD path body" of each write
	queries  []string // the query of each issue list
}

type fakeIssue struct {
	number    int
	title     string
	body      string
	repo      string // owner/repo, the served one when ""
	closed    bool
	pull      bool
	blockedBy []int // issue numbers of the served repository
	outside   []fakeIssue
}

func newFakeGitHub(t *testing.T, issues []fakeIssue) *fakeGitHub {
	f := &fakeGitHub{t: t, perPage: 2, issues: issues}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// object is issue i as GitHub shows it.
func (f *fakeGitHub) object(i fakeIssue) map[string]any {
	repo := i.repo
	if repo == "" {
		repo = "acme/shop"
	}
	api := f.srv.URL + "/repos/" + repo
	state := "open"
	if i.closed {
		state = "closed"
	}
	open := 0
	for _, n := range i.blockedBy {
		if !f.find(n).closed {
			open++
		}
	}
	for _, o := range i.outside {
		if !o.closed {
			open++
		}
	}
	o := map[string]any{
		"id": 1000 + i.number, "node_id": "I_kwDOfake" + strconv.Itoa(i.number),
		"url": api + "/issues/" + strconv.Itoa(i.number), "repository_url": api,
		"html_url": "https://github.com/" + repo + "/issues/" + strconv.Itoa(i.number),
		"number":   i.number, "state": state, "title": i.title, "body": i.body,
		"user":   map[string]any{"login": "octocat", "id": 1},
		"labels": []map[string]any{{"id": 208045946, "name": "ralph", "color": "f29513", "default": false}},
		"locked": false, "comments": 0, "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z",
		"author_association": "OWNER",
		"issue_dependencies_summary": map[string]any{
			"blocked_by": open, "total_blocked_by": len(i.blockedBy) + len(i.outside), "blocking": 0, "total_blocking": 0,
		},
	}
	if i.body == "" {
		o["body"] = nil
	}
	if i.pull {
		o["pull_request"] = map[string]any{"url": api + "/pulls/" + strconv.Itoa(i.number), "merged_at": nil}
	}
	return o
}

func (f *fakeGitHub) find(n int) fakeIssue {
	for _, i := range f.issues {
		if i.number == n {
			return i
		}
	}
	f.t.Errorf("no issue %d", n)
	return fakeIssue{}
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") == "" || r.Header.Get("User-Agent") == "" {
		http.Error(w, `{"message":"bad headers"}`, http.StatusBadRequest)
		return
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && len(parts) == 4 && parts[3] == "issues":
		f.mu.Lock()
		f.queries = append(f.queries, r.URL.RawQuery)
		f.mu.Unlock()
		var list []map[string]any
		for _, i := range f.issues {
			if !i.closed {
				list = append(list, f.object(i))
			}
		}
		f.page(w, r, list)
	case r.Method == http.MethodGet && len(parts) == 7 && parts[5] == "dependencies" && parts[6] == "blocked_by":
		n, _ := strconv.Atoi(parts[4])
		var list []map[string]any
		for _, b := range f.find(n).blockedBy {
			list = append(list, f.object(f.find(b)))
		}
		for _, o := range f.find(n).outside {
			list = append(list, f.object(o))
		}
		f.page(w, r, list)
	case r.Method != http.MethodGet:
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path+" "+string(b))
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest","status":"404"}`)
	}
}

// page writes one page of list, with GitHub's Link header.
func (f *fakeGitHub) page(w http.ResponseWriter, r *http.Request, list []map[string]any) {
	p, _ := strconv.Atoi(r.URL.Query().Get("page"))
	p = max(p, 1)
	last := max((len(list)+f.perPage-1)/f.perPage, 1)
	from, to := min((p-1)*f.perPage, len(list)), min(p*f.perPage, len(list))
	link := func(n int) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(n))
		return "<" + f.srv.URL + r.URL.Path + "?" + q.Encode() + ">"
	}
	if p < last {
		w.Header().Set("Link", link(p+1)+`; rel="next", `+link(last)+`; rel="last"`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	page := list[from:to]
	if page == nil {
		page = []map[string]any{}
	}
	_ = json.NewEncoder(w).Encode(page)
}

func githubSourceFor(t *testing.T, f *fakeGitHub, spec string, o Options) Source {
	t.Helper()
	sp, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	o.GitHubURL = f.srv.URL
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.GH == "" {
		o.GH = filepath.Join(t.TempDir(), "no-gh")
	}
	s, err := Open(sp, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The open issues with the label, over pages, oldest first, without pull
// requests; a blocker in the backlog is a dependency, an open one outside
// it holds the issue, a closed one is met.
func TestGitHubList(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t, []fakeIssue{
		{number: 3, title: "Add a cart", body: "Users keep a cart.\n\n- [ ] it survives a reload"},
		{number: 4, title: "Fix the checkout button", pull: true},
		{number: 5, title: "Pay by card", blockedBy: []int{3, 9}},
		{number: 7, title: "Ship to Norway", outside: []fakeIssue{
			{number: 12, title: "Carrier API", repo: "acme/logistics"},
			{number: 13, title: "Old carrier", repo: "acme/logistics", closed: true}}},
		{number: 8, title: "Refund", blockedBy: []int{5}},
		{number: 9, title: "Closed long ago", closed: true},
	})
	f.token = "s3cret"
	s := githubSourceFor(t, f, "github:acme/shop?label=ralph", Options{Token: "s3cret"})
	got, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{
		{ID: "3", Title: "Add a cart", Text: "Users keep a cart.\n\n- [ ] it survives a reload", Index: 0, Pos: Pos{File: "https://github.com/acme/shop/issues/3"}},
		{ID: "5", Title: "Pay by card", DependsOn: []string{"3"}, Index: 1, Pos: Pos{File: "https://github.com/acme/shop/issues/5"}},
		{ID: "7", Title: "Ship to Norway", Index: 2, Pos: Pos{File: "https://github.com/acme/shop/issues/7"},
			Held: "blocked by https://github.com/acme/logistics/issues/12, which is open and not in this backlog"},
		{ID: "8", Title: "Refund", DependsOn: []string{"5"}, Index: 3, Pos: Pos{File: "https://github.com/acme/shop/issues/8"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	if len(f.queries) != 3 {
		t.Errorf("issue list asked %d pages, want 3 (5 issues, 2 a page)", len(f.queries))
	}
	if q := f.queries[0]; !strings.Contains(q, "labels=ralph") || !strings.Contains(q, "state=open") || !strings.Contains(q, "direction=asc") {
		t.Errorf("query %q", q)
	}
	order, err := Order(got)
	if err != nil {
		t.Fatal(err)
	}
	if ids := taskIDs(order); !cmp.Equal(ids, []string{"3", "5", "8"}) {
		t.Errorf("order %v", ids)
	}
}

// Marking an issue done comments on it (naming the merge), labels it, and
// closes it only when told to.
func TestGitHubMarkDone(t *testing.T) {
	t.Parallel()
	for _, closeIssues := range []bool{false, true} {
		f := newFakeGitHub(t, []fakeIssue{{number: 3, title: "Add a cart"}})
		s := githubSourceFor(t, f, "github:acme/shop?label=ralph", Options{Token: "t", CloseIssues: closeIssues, DoneLabel: "shipped"})
		ctx := WithNote(context.Background(), Note{Batch: "01J0BATCH", Commit: "0123abc", Target: "ralph/01J0BATCH/merged"})
		if err := s.MarkDone(ctx, "", Task{ID: "3"}); err != nil {
			t.Fatal(err)
		}
		want := []string{
			`POST /repos/acme/shop/issues/3/comments {"body":"Merged by ralph as 0123abc on ralph/01J0BATCH/merged (batch 01J0BATCH): its success conditions held on the merged tree."}`,
			`POST /repos/acme/shop/issues/3/labels {"labels":["shipped"]}`,
		}
		if closeIssues {
			want = append(want, `PATCH /repos/acme/shop/issues/3 {"state":"closed","state_reason":"completed"}`)
		}
		if diff := cmp.Diff(want, f.requests); diff != "" {
			t.Errorf("close=%v: requests (-want +got):\n%s", closeIssues, diff)
		}
	}
}

// The token comes from the options, then GITHUB_TOKEN, then gh auth
// token; a refused one is an error that does not show it.
func TestGitHubToken(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t, []fakeIssue{{number: 1, title: "x"}})
	f.token = "from-gh"
	gh := filepath.Join(t.TempDir(), "gh")
	script := "#!/bin/sh\n[ \"$1 $2 $3\" = \"auth token --hostname\" ] || exit 2\necho from-gh\n"
	if err := os.WriteFile(gh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"gh", Options{GH: gh}, true},
		{"GITHUB_TOKEN wins over gh", Options{GH: gh, Getenv: func(k string) string { return map[string]string{"GITHUB_TOKEN": "from-env"}[k] }}, false},
		{"Options.Token wins", Options{GH: gh, Token: "from-gh", Getenv: func(string) string { return "from-env" }}, true},
	} {
		_, err := githubSourceFor(t, f, "github:acme/shop?label=ralph", tc.o).List(context.Background())
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "from-env") || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "GITHUB_TOKEN")) {
			t.Errorf("%s: error %q shows the token or says nothing of the fix", tc.name, err)
		}
	}
}

// GitHub's refusals become sentences with the fix; a next page on
// another host is not followed with the token.
func TestGitHubErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/repos/acme/limited/issues":
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", "1767225600")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"API rate limit exceeded for 127.0.0.1."}`)
		case "/repos/acme/away/issues":
			w.Header().Set("Link", `<https://elsewhere.example/repos/acme/away/issues?page=2>; rel="next"`)
			_, _ = io.WriteString(w, `[]`)
		case "/repos/acme/garbled/issues":
			_, _ = io.WriteString(w, `{"not": "a list"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"message":"Not Found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	for repo, want := range map[string]string{
		"limited": "GitHub's rate limit is spent; try again after 2026-01-01",
		"away":    "off its API's host: refusing to send the token there",
		"garbled": "not the array of issues it should be",
		"missing": "404 Not Found (Not Found): the repository or issue does not exist, or the token cannot reach it",
	} {
		sp, _ := Parse("github:acme/" + repo + "?label=x")
		s, err := Open(sp, Options{GitHubURL: srv.URL, Token: "tok", Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.List(context.Background())
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "tok ") {
			t.Errorf("%s: error %v, want it to say %q", repo, err, want)
		}
	}
}

func ExampleParse() {
	for _, s := range []string{"prd:docs/prd.json", "fix_plan.md", "github:acme/shop?label=ralph", "beads"} {
		sp, err := Parse(s)
		fmt.Println(sp.Kind.Name, sp, err)
	}
	// Output:
	// prd prd:docs/prd.json <nil>
	// checklist checklist:fix_plan.md <nil>
	// github github:acme/shop?label=ralph <nil>
	// beads beads <nil>
}
