package stop

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
)

// Every row is whole: a Build, a class, and the fields it names are
// [[stop]] fields; budget kinds bound something.
func TestEveryKindIsAWholeRow(t *testing.T) {
	for _, name := range KindNames() {
		k, _ := Lookup(name)
		if k.Build == nil || k.Class.rank() == 0 || k.Reads == 0 {
			t.Errorf("stop kind %q has no Build, class or Reads", name)
		}
		for _, f := range append(slices.Clone(k.Required), k.Optional...) {
			if !slices.Contains(stopFields, f) {
				t.Errorf("stop kind %q names %q, which is not a [[stop]] field", name, f)
			}
		}
	}
}

// undocumented are the kinds the reference table of docs/stop.md (rows
// "| `kind` | …") does not list.
func undocumented(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/stop.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range KindNames() {
		if !regexp.MustCompile("(?m)^\\| [^|]*`" + regexp.QuoteMeta(k) + "`[^|]*\\|").Match(doc) {
			out = append(out, k)
		}
	}
	return out
}

// docs/stop.md documents every kind in its table.
func TestEveryKindIsDocumented(t *testing.T) {
	if u := undocumented(t); len(u) > 0 {
		t.Errorf("docs/stop.md's table lacks %v", u)
	}
}

// lineCount is a kind that exists only in this test: met when the file at
// path has at least count lines. It reads the world.
type lineCount struct {
	path string
	n    int
}

func (l lineCount) check(_ context.Context, in *Input) outcome {
	b, err := os.ReadFile(l.path)
	if err != nil {
		return outcome{reason: "no file", evidence: "missing " + l.path}
	}
	n := strings.Count(string(b), "\n")
	return outcome{met: n >= l.n, reason: "lines counted", evidence: l.path + " has " + strconv.Itoa(n) + " lines"}
}
func (l lineCount) fingerprint(*Input, *fp) bool { return true }
func (l lineCount) inputs(*Input) string         { return l.path }

// A new kind is one row and its checker, nothing else: with just those, a
// config using it is checked (its required field with file:line, its
// default class and priority), it evaluates, its why line and its limits
// are what its row says, a replay takes it for one that reads the world
// (never today's files), and the docs check sees it is undocumented.
func TestAKindIsOneRow(t *testing.T) {
	err := register(Kind{Name: "test_lines", Required: []string{"path", "count"}, Priority: 65, Class: ClassLimit, Reads: FromWorld,
		Build: func(s *config.Stop, _ string, _ int) (checker, error) { return lineCount{s.Path, s.Count}, nil },
		Why:   evidenceWhy, Limits: func(s *config.Stop) Limits { return Limits{Iterations: 1000 + s.Count} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unregister("test_lines") })
	dir := t.TempDir()
	path := dir + "/notes"
	os.WriteFile(path, []byte("a\nb\nc\n"), 0o600)

	cfg, err := config.Parse([]byte("[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"test_lines\"\npath = \""+path+"\"\ncount = 3\n"), "ralph.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	conds, err := FromConfig(cfg.Stop, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	c := conds[0]
	if c.Class != ClassLimit || c.Priority != 65 || c.Name != "test_lines-1" {
		t.Fatalf("the new kind built as %+v", c)
	}
	ev, _ := NewEvaluator(conds, Options{}).Evaluate(context.Background(), Input{Iteration: 1})
	if r := ev.Results[0]; !r.Met || Why(&r) != path+" has 3 lines" {
		t.Errorf("evaluated: %+v, why %q", r, Why(&r))
	}
	if b := Budgets(conds); b.Iterations != 1003 {
		t.Errorf("budgets %+v, want its Limits", b)
	}
	if r := replayNewKind(t, cfg.Stop, conds); r.Met || r.Reason != "recorded" {
		t.Errorf("replay evaluated the new kind against today's files: %+v, want its recorded verdict", r)
	}
	if u := undocumented(t); !slices.Contains(u, "test_lines") {
		t.Errorf("the docs check does not see the new kind: %v", u)
	}

	_, err = FromConfig([]config.Stop{{Kind: "test_lines", Path: path, Line: 7}}, "ralph.toml")
	if err == nil || err.Error() != `ralph.toml:7: [[stop]] (kind "test_lines"): kind "test_lines" needs a positive count` {
		t.Errorf("the new kind without its field: %v", err)
	}
	_, err = FromConfig([]config.Stop{{Kind: "test_lines", Path: path, Count: 1, USD: 2, Line: 8}}, "ralph.toml")
	if err == nil || !strings.Contains(err.Error(), `ralph.toml:8: [[stop]] (kind "test_lines"): usd does not apply to kind "test_lines"`) {
		t.Errorf("the new kind with a field it does not take: %v", err)
	}
	if err := register(Kind{Name: "test_lines", Class: ClassLimit, Reads: FromWorld, Build: c.kind.Build}); err == nil {
		t.Error("a second row of the same name was taken")
	}
	if err := register(Kind{Name: "test_undecided", Class: ClassLimit, Build: c.kind.Build}); err == nil {
		t.Error("a row that does not say where it reads was taken: replay could not tell how to answer it")
	}
}

// replayNewKind replays a one-iteration run that recorded the new kind not
// met, with the same config and workdir (its file now says met), and
// returns the replayed result.
func replayNewKind(t *testing.T, specs []config.Stop, conds []*Condition) Result {
	t.Helper()
	c := &chainBuilder{t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	c.add(ledger.Action{Type: ledger.RunStarted, Success: true})
	c.iterStart(1)
	c.iterEnd(1, "ok", 0)
	c.add(*evaluationAction("run", Evaluation{Iteration: 1, At: c.t0,
		Results: []Result{{Name: conds[0].Name, Kind: "test_lines", Class: ClassLimit, Priority: 65, Reason: "recorded"}}}))
	res, err := Replay(context.Background(), c.acts, ReplayOptions{Specs: specs, Conditions: conds, Workdir: "/w",
		RecordedSpecs: specs, RecordedWorkdir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Steps[0].Evaluation.Results[0]
}
