package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// The github source reads a repository's open issues with a label through
// GitHub's REST API (docs.github.com/en/rest/issues): "List repository
// issues" (GET /repos/{owner}/{repo}/issues, whose answer holds pull
// requests too, told apart by their "pull_request" key; paginated by the
// Link header), "List dependencies an issue is blocked by" (GET
// .../issues/{n}/dependencies/blocked_by, asked only of issues whose
// "issue_dependencies_summary" counts open blockers), "Create an issue
// comment", "Add labels to an issue" and "Update an issue".

// githubName is a GitHub owner's or repository's name.
var githubName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// parseGitHubArg reads OWNER/REPO?label=L.
func parseGitHubArg(arg string, bare bool) (Spec, error) {
	const form = "write it as github:OWNER/REPO?label=L"
	if bare {
		return Spec{}, fmt.Errorf("it names no repository: %s", form)
	}
	path, query, _ := strings.Cut(arg, "?")
	owner, repo, ok := strings.Cut(path, "/")
	if !ok || !githubName.MatchString(owner) || !githubName.MatchString(repo) {
		return Spec{}, fmt.Errorf("%q is not OWNER/REPO: %s", path, form)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return Spec{}, fmt.Errorf("its query %q does not parse (%v): %s", query, err, form)
	}
	for k := range q {
		if k != "label" {
			return Spec{}, fmt.Errorf("it has %q, which it does not take: %s", k, form)
		}
	}
	if len(q["label"]) != 1 || strings.TrimSpace(q.Get("label")) == "" {
		return Spec{}, fmt.Errorf("it needs one label, the one that marks the backlog's issues: %s", form)
	}
	return Spec{Owner: owner, Repo: repo, Label: q.Get("label")}, nil
}

// githubSource is a repository's open issues with a label.
type githubSource struct {
	spec   Spec
	o      Options
	base   *url.URL
	client *http.Client

	tokenOnce sync.Once
	token     string
}

func openGitHub(s Spec, o Options) (Source, error) {
	raw := o.GitHubURL
	if raw == "" {
		raw = DefaultGitHubURL
	}
	base, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("the GitHub API URL %q is not an http(s) URL", redactURL(raw))
	}
	if base.User != nil {
		return nil, fmt.Errorf("the GitHub API URL %q carries credentials: give the token as GITHUB_TOKEN instead", redactURL(raw))
	}
	c := o.HTTP
	if c == nil {
		c = &http.Client{Timeout: time.Minute}
	}
	return &githubSource{spec: s, o: o, base: base, client: c}, nil
}

func (g *githubSource) Kind() *Kind    { return g.spec.Kind }
func (g *githubSource) String() string { return g.spec.String() }
func (g *githubSource) File() string   { return "" }
func (g *githubSource) Branch() string { return "" }

// ghIssue is the part of GitHub's issue object the source reads.
type ghIssue struct {
	Number      int             `json:"number"`
	Title       string          `json:"title"`
	Body        *string         `json:"body"`
	State       string          `json:"state"`
	HTMLURL     string          `json:"html_url"`
	RepoURL     string          `json:"repository_url"`
	PullRequest json.RawMessage `json:"pull_request"`
	Deps        *struct {
		BlockedBy int `json:"blocked_by"`
	} `json:"issue_dependencies_summary"`
}

// List reads the open issues with the label, oldest first, pull requests
// left out; an issue blocked by another of them depends on it, and one
// blocked by an open issue outside them is held.
func (g *githubSource) List(ctx context.Context) ([]Task, error) {
	q := url.Values{"state": {"open"}, "labels": {g.spec.Label}, "sort": {"created"}, "direction": {"asc"}, "per_page": {"100"}}
	issues, err := pages[ghIssue](ctx, g, g.repoPath("issues")+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	var out []Task
	var blocked []bool
	listed := map[int]bool{}
	for _, is := range issues {
		if len(is.PullRequest) > 0 && string(is.PullRequest) != "null" {
			continue
		}
		t := Task{ID: strconv.Itoa(is.Number), Title: is.Title, Index: len(out), Pos: Pos{File: is.HTMLURL}}
		if is.Body != nil {
			t.Text = *is.Body
		}
		listed[is.Number] = true
		out = append(out, t)
		blocked = append(blocked, is.Deps != nil && is.Deps.BlockedBy > 0)
	}
	for i := range out {
		if blocked[i] {
			if err := g.blockers(ctx, &out[i], listed); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// blockers gives t its open blockers: a dependency on each that is in
// the backlog, and a hold for one that is not.
func (g *githubSource) blockers(ctx context.Context, t *Task, listed map[int]bool) error {
	bs, err := pages[ghIssue](ctx, g, g.repoPath("issues", t.ID, "dependencies", "blocked_by")+"?per_page=100")
	if err != nil {
		return err
	}
	own := g.base.JoinPath(g.repoPath()).String()
	for _, b := range bs {
		if b.State != "open" {
			continue
		}
		if strings.EqualFold(b.RepoURL, own) && listed[b.Number] {
			t.DependsOn = append(t.DependsOn, strconv.Itoa(b.Number))
			continue
		}
		t.Held = joinHeld(t.Held, fmt.Sprintf("blocked by %s, which is open and not in this backlog", b.HTMLURL))
	}
	return nil
}

// joinHeld adds a reason to a task's Held.
func joinHeld(held, why string) string {
	if held == "" {
		return why
	}
	return held + "; " + why
}

// MarkDone reports the merged task on its issue: a comment (naming the
// Note's commit, target and batch when WithNote gave one), the done
// label, and, with CloseIssues, closes it as completed.
func (g *githubSource) MarkDone(ctx context.Context, dir string, t Task) error {
	if _, err := strconv.Atoi(t.ID); err != nil {
		return fmt.Errorf("task %q is not an issue number", t.ID)
	}
	body := "Merged by ralph"
	if n, ok := noteFrom(ctx); ok {
		if n.Commit != "" {
			body += " as " + n.Commit
		}
		if n.Target != "" {
			body += " on " + n.Target
		}
		if n.Batch != "" {
			body += " (batch " + n.Batch + ")"
		}
	}
	body += ": its success conditions held on the merged tree."
	label := g.o.DoneLabel
	if label == "" {
		label = DefaultDoneLabel
	}
	steps := []ghCall{
		{http.MethodPost, g.repoPath("issues", t.ID, "comments"), map[string]string{"body": body}},
		{http.MethodPost, g.repoPath("issues", t.ID, "labels"), map[string][]string{"labels": {label}}},
	}
	if g.o.CloseIssues {
		steps = append(steps, ghCall{http.MethodPatch, g.repoPath("issues", t.ID), map[string]string{"state": "closed", "state_reason": "completed"}})
	}
	for _, s := range steps {
		if _, err := g.do(ctx, s.method, s.path, s.body); err != nil {
			return fmt.Errorf("mark issue #%s done: %w", t.ID, err)
		}
	}
	return nil
}

// ghCall is one write to the API.
type ghCall struct {
	method string
	path   string
	body   any
}

// repoPath is the API path of the repository, or of something under it.
func (g *githubSource) repoPath(under ...string) string {
	p := "/repos/" + url.PathEscape(g.spec.Owner) + "/" + url.PathEscape(g.spec.Repo)
	for _, u := range under {
		p += "/" + url.PathEscape(u)
	}
	return p
}

// pages GETs path and every page after it (the Link header's rel="next"),
// each page a JSON array of T.
func pages[T any](ctx context.Context, g *githubSource, path string) ([]T, error) {
	next := g.base.String() + path
	var all []T
	for n := 0; next != ""; n++ {
		if n == maxGitHubPages {
			return nil, fmt.Errorf("GET %s: more than %d pages; give the backlog a narrower label", path, maxGitHubPages)
		}
		u, err := url.Parse(next)
		if err != nil || u.Scheme != g.base.Scheme || u.Host != g.base.Host {
			return nil, fmt.Errorf("GitHub gave a next page %q off its API's host: refusing to send the token there", redactURL(next))
		}
		resp, err := g.send(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		var page []T
		if err := json.Unmarshal(resp.body, &page); err != nil {
			return nil, fmt.Errorf("GET %s: GitHub's answer is not the array of issues it should be: %v", u.Path, err)
		}
		all = append(all, page...)
		next = nextLink(resp.header.Get("Link"))
	}
	return all, nil
}

// linkNext finds rel="next" in a Link header.
var linkNext = regexp.MustCompile(`<([^>]*)>\s*;[^,]*\brel="?next"?`)

// nextLink is the URL of the Link header's rel="next", or "".
func nextLink(h string) string {
	if m := linkNext.FindStringSubmatch(h); m != nil {
		return m[1]
	}
	return ""
}

// do sends one request with a JSON body to path under the API.
func (g *githubSource) do(ctx context.Context, method, path string, body any) (*ghResponse, error) {
	return g.send(ctx, method, g.base.JoinPath(path), body)
}

// ghResponse is an answer's header and body.
type ghResponse struct {
	header http.Header
	body   []byte
}

// Bounds on what GitHub's answers may hold: one answer's size, and the
// pages one list may take.
const (
	maxGitHubBody  = 32 << 20
	maxGitHubPages = 1000
)

// send sends one request and reads its answer; any status but 2xx is an
// error saying what GitHub said and what to do.
func (g *githubSource) send(ctx context.Context, method string, u *url.URL, body any) (*ghResponse, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "ralph")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := g.auth(ctx); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL; the path is named below
		}
		return nil, fmt.Errorf("%s %s: %w", method, u.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxGitHubBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, u.Path, err)
	}
	if len(b) > maxGitHubBody {
		return nil, fmt.Errorf("%s %s: the answer is over %d MiB", method, u.Path, maxGitHubBody>>20)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s", method, u.Path, g.statusError(resp, b))
	}
	return &ghResponse{header: resp.Header, body: b}, nil
}

// statusError says what a non-2xx answer means and how to get past it.
func (g *githubSource) statusError(resp *http.Response, body []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &m) // a body that is not GitHub's error object leaves Message empty
	said := resp.Status
	if m.Message != "" {
		said += " (" + m.Message + ")"
	}
	switch {
	case (resp.StatusCode == 403 || resp.StatusCode == 429) && resp.Header.Get("X-RateLimit-Remaining") == "0":
		when := "later"
		if s, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			when = "after " + time.Unix(s, 0).UTC().Format(time.RFC3339)
		}
		return said + ": GitHub's rate limit is spent; try again " + when + ", or authenticate (GITHUB_TOKEN, gh auth login) for a higher limit"
	case resp.StatusCode == 401:
		return said + ": the token was refused; set GITHUB_TOKEN to a valid token or run gh auth login"
	case resp.StatusCode == 403 || resp.StatusCode == 404:
		return said + ": the repository or issue does not exist, or the token cannot reach it; check the name, and set GITHUB_TOKEN (or gh auth login) to a token with access to its issues"
	}
	return said
}

// auth is the token requests carry: Options.Token, else GITHUB_TOKEN,
// else what gh auth token prints, else none. It is found once.
func (g *githubSource) auth(ctx context.Context) string {
	g.tokenOnce.Do(func() {
		getenv := g.o.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		switch {
		case g.o.Token != "":
			g.token = g.o.Token
		case getenv("GITHUB_TOKEN") != "":
			g.token = getenv("GITHUB_TOKEN")
		default:
			g.token = g.ghToken(ctx)
		}
	})
	return g.token
}

// ghToken is what gh auth token prints for the API's host, or "" when gh
// is missing or has none (then requests go unauthenticated).
func (g *githubSource) ghToken(ctx context.Context) string {
	gh := g.o.GH
	if gh == "" {
		p, err := exec.LookPath("gh")
		if err != nil {
			return ""
		}
		gh = p
	}
	host := g.base.Hostname()
	if host == "api.github.com" {
		host = "github.com"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gh, "auth", "token", "--hostname", host)
	out := &procgroup.CappedBuffer{Limit: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, io.Discard
	if err := procgroup.Run(cmd, time.Second); err != nil || out.Truncated {
		return "" // gh without a login for this host: go on unauthenticated
	}
	return strings.TrimSpace(out.String())
}

// redactURL is u without its user information.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	return u.String()
}
