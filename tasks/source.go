package tasks

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Kind is one task source's row (DESIGN §21): every fact another package
// needs of it. Code outside this package asks the row; it never compares
// a source's name.
type Kind struct {
	// Name is what SOURCE starts with ("prd" in prd:FILE).
	Name string
	// Doc is one line on what it reads, for help.
	Doc string
	// Form is how SOURCE is written for it, for help and errors.
	Form string
	// InRepo: the source is a file of the repository (Source.File names
	// it, relative to the root). Marking a task done edits the copy of the
	// file in the merge checkout, so the change rides in the task's merge
	// commit; a batch refuses to start while the file differs from HEAD,
	// since every checkout is made from HEAD.
	InRepo bool
	// MarksInCheckout: MarkDone runs in the merge checkout before the
	// merge commit is made: a file source's edit rides in that commit;
	// beads' bd close runs there too (a bd whose database lives in git's
	// tree writes it there; a Dolt-backed bd, whose one database serves
	// every worktree of the repository, writes it at once). false:
	// MarkDone reaches outside the repository (a GitHub issue) and runs
	// once the target branch has moved, with the Note (WithNote) it
	// reports.
	MarksInCheckout bool

	parse func(arg string, bare bool) (Spec, error)
	open  func(s Spec, o Options) (Source, error)
}

// kinds is the one table of task sources, in the order help and errors
// list them. A source is a row here and a file of its own.
var kinds = []*Kind{
	{Name: "prd", Doc: "user stories of a prd.json (ralph-tui's and snarktank's ralph's format)",
		Form: "prd:FILE", InRepo: true, MarksInCheckout: true, parse: parseFileArg, open: openPRD},
	{Name: "checklist", Doc: "the - [ ] items of a Markdown file; nested items are acceptance criteria",
		Form: "checklist:FILE", InRepo: true, MarksInCheckout: true, parse: parseFileArg, open: openChecklist},
	{Name: "github", Doc: "open GitHub issues with a label, through the REST API",
		Form: "github:OWNER/REPO?label=L", parse: parseGitHubArg, open: openGitHub},
	{Name: "beads", Doc: "the issues of a Beads tracker, through the bd CLI's JSON",
		Form: "beads", MarksInCheckout: true, parse: parseNoArg, open: openBeads},
}

// Kinds are the task sources' rows, in the order help lists them. The
// rows are shared: callers read them and never change them.
func Kinds() []*Kind { return kinds }

// KindNames are the task sources' names (kinds_test.go holds them to this
// package).
func KindNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.Name
	}
	return out
}

// kindNamed is the row named name, or nil.
func kindNamed(name string) *Kind {
	for _, k := range kinds {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// Spec is a parsed SOURCE: its kind and what it names.
type Spec struct {
	Kind *Kind
	// Path is a file source's file as written: relative to the
	// repository's root, or absolute (and then inside it).
	Path string
	// Owner, Repo and Label name a github source's issues.
	Owner, Repo, Label string
}

// String is the spec in the form Parse reads.
func (s Spec) String() string {
	if s.Kind == nil {
		return ""
	}
	switch {
	case s.Path != "":
		return s.Kind.Name + ":" + s.Path
	case s.Owner != "":
		return s.Kind.Name + ":" + s.Owner + "/" + s.Repo + "?" + url.Values{"label": {s.Label}}.Encode()
	}
	return s.Kind.Name
}

// forms lists every accepted way to write SOURCE, for errors.
func forms() string {
	var fs []string
	for _, k := range kinds {
		fs = append(fs, k.Form)
	}
	return strings.Join(fs, ", ") + ", or a path ending in .json (a prd) or .md (a checklist)"
}

// Parse reads SOURCE as the user writes it (ralph run --tasks SOURCE,
// [tasks] source): NAME:ARG for a kind that takes an argument, NAME for
// one that takes none, or a bare path ending in .json (a prd) or .md (a
// checklist).
func Parse(spec string) (Spec, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return Spec{}, fmt.Errorf("task source is empty: write one of %s", forms())
	}
	name, arg, colon := strings.Cut(s, ":")
	if k := kindNamed(name); k != nil {
		sp, err := k.parse(arg, !colon)
		if err != nil {
			return Spec{}, fmt.Errorf("task source %q: %w", spec, err)
		}
		sp.Kind = k
		return sp, nil
	}
	switch {
	case strings.HasSuffix(s, ".json"):
		return Spec{Kind: kindNamed("prd"), Path: s}, nil
	case strings.HasSuffix(s, ".md"):
		return Spec{Kind: kindNamed("checklist"), Path: s}, nil
	}
	return Spec{}, fmt.Errorf("task source %q is not one of %s", spec, forms())
}

// parseFileArg reads FILE of prd:FILE and checklist:FILE.
func parseFileArg(arg string, bare bool) (Spec, error) {
	if bare || strings.TrimSpace(arg) == "" {
		return Spec{}, fmt.Errorf("it names no file: write it as NAME:FILE, e.g. prd:prd.json")
	}
	return Spec{Path: arg}, nil
}

// parseNoArg reads a kind that takes no argument (beads).
func parseNoArg(arg string, bare bool) (Spec, error) {
	if !bare {
		return Spec{}, fmt.Errorf("it takes no argument (%q): write just its name; bd finds its tracker from the repository", arg)
	}
	return Spec{}, nil
}

// Source is an opened task source: it lists a backlog's tasks and marks
// one done. A Source is used by one goroutine at a time.
type Source interface {
	// Kind is the source's row.
	Kind() *Kind
	// String is the source as Parse reads it.
	String() string
	// List reads the backlog: every task, done ones included (Done), in
	// the source's order (Index). Bad input is an *Error naming where.
	List(ctx context.Context) ([]Task, error)
	// MarkDone marks t done in the source. dir is the checkout the merge
	// commit is being made in: a file source edits its file's copy there
	// (at File, relative to dir), beads runs bd close there; a github
	// source ignores it. The task is found again by its id, so a source
	// that changed since List either still has it or says so.
	MarkDone(ctx context.Context, dir string, t Task) error
	// File is an InRepo source's file relative to the repository's root,
	// with slashes; "" for other sources.
	File() string
	// Branch is the branch the source names for its work (a prd's
	// branchName) as of the last List; "" when it names none.
	Branch() string
}

// Options are what opening a source needs beyond its spec.
type Options struct {
	// Root is the repository's root: file sources' paths are relative to
	// it and must lie inside it; bd runs there.
	Root string
	// GitHubURL is the GitHub REST API's base URL (DefaultGitHubURL when
	// empty; GitHub Enterprise's is https://HOST/api/v3).
	GitHubURL string
	// Token authenticates to GitHub. Empty: GITHUB_TOKEN, else what
	// `gh auth token` prints when gh is on PATH, else none (public
	// repositories can be listed without one). It is never logged and
	// never part of an error.
	Token string
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// GH is the gh binary ("" looks gh up on PATH).
	GH string
	// HTTP is the client GitHub is reached with (a client with a
	// one-minute timeout when nil).
	HTTP *http.Client
	// BD is the bd binary ("bd" on PATH when empty).
	BD string
	// CloseIssues closes a GitHub issue when its task merges (with
	// --close-issues); otherwise it is only commented on and labelled.
	CloseIssues bool
	// DoneLabel is the label a GitHub issue gets when its task merges
	// (DefaultDoneLabel when empty).
	DoneLabel string
}

// Defaults of Options.
const (
	DefaultGitHubURL = "https://api.github.com"
	DefaultDoneLabel = "ralph-merged"
)

// Open opens a parsed spec.
func Open(s Spec, o Options) (Source, error) {
	if s.Kind == nil {
		return nil, fmt.Errorf("task source has no kind: parse it with tasks.Parse")
	}
	src, err := s.Kind.open(s, o)
	if err != nil {
		return nil, fmt.Errorf("task source %s: %w", s, err)
	}
	return src, nil
}

// Note is what a merged task's report carries to a source that reaches
// outside the repository (a GitHub issue's comment, bd close's reason).
type Note struct {
	Batch  string // the batch run's id
	Commit string // the merge commit on the target ("" while it is being made)
	Target string // the target branch
}

type noteKey struct{}

// WithNote gives MarkDone the merged task's Note.
func WithNote(ctx context.Context, n Note) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

// noteFrom is the Note WithNote gave ctx.
func noteFrom(ctx context.Context) (Note, bool) {
	n, ok := ctx.Value(noteKey{}).(Note)
	return n, ok
}
