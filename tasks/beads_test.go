package tasks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// standInBD is testdata's stand-in for bd (see the comment in it).
func standInBD(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "sources", "beads", "bd"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func beadsSourceFor(t *testing.T, bd string) Source {
	t.Helper()
	sp, err := Parse("beads")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(sp, Options{Root: t.TempDir(), BD: bd})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The beads in bd list's JSON as tasks: a blocker is a dependency, a
// closed one is done, one bd holds (in progress, an epic, an unknown
// blocker) is held, and links that block nothing are not dependencies.
func TestBeadsList(t *testing.T) {
	t.Parallel()
	got, err := beadsSourceFor(t, standInBD(t)).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pos := func(id string) Pos { return Pos{File: "beads " + id} }
	want := []Task{
		{ID: "shop-a1b", Title: "Add a cart", Text: "Users keep a cart between visits.",
			Criteria: []string{"The cart survives a reload", "go test ./cart/... passes"},
			Priority: 1, HasPriority: true, Index: 0, Pos: pos("shop-a1b")},
		{ID: "shop-c3d", Title: "Pay by card", Text: "Checkout takes a card.", Criteria: []string{"Paying with the test card 4242 succeeds."},
			Priority: 0, HasPriority: true, DependsOn: []string{"shop-a1b", "shop-0ld"}, Index: 1, Pos: pos("shop-c3d")},
		{ID: "shop-e5f", Title: "Ship to Norway", Priority: 2, HasPriority: true, Index: 2, Pos: pos("shop-e5f"),
			Held: "its status is in_progress"},
		{ID: "shop-g7h", Title: "Refunds", Priority: 3, HasPriority: true, DependsOn: []string{"shop-e5f"}, Index: 3, Pos: pos("shop-g7h"),
			Held: "it waits on external:payments:refund-api, which bd list does not show"},
		{ID: "shop-epic", Title: "Checkout", Priority: 1, HasPriority: true, Index: 4, Pos: pos("shop-epic"),
			Held: "it is an epic, not a piece of work"},
		{ID: "shop-0ld", Title: "Set up the payment provider", Priority: 2, HasPriority: true, Index: 5, Pos: pos("shop-0ld"), Done: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	order, err := Order(got)
	if err != nil {
		t.Fatal(err)
	}
	if ids := taskIDs(order); !cmp.Equal(ids, []string{"shop-a1b", "shop-c3d"}) {
		t.Errorf("order %v", ids)
	}
}

// bd's JSON envelope (BD_JSON_ENVELOPE=1, docs/JSON_SCHEMA.md) reads as
// the bare array does; what is neither is refused.
func TestParseBeadsShapes(t *testing.T) {
	t.Parallel()
	arr, err := os.ReadFile(filepath.Join("testdata", "sources", "beads", "list.json"))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := parseBeads(arr)
	if err != nil {
		t.Fatal(err)
	}
	env, err := parseBeads([]byte(`{"schema_version": 1, "data": ` + string(arr) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bare, env); diff != "" {
		t.Errorf("envelope differs (-bare +envelope):\n%s", diff)
	}
	show, err := parseBeads([]byte(`[{"id": "a", "title": "t", "status": "open", "priority": 2,
		"dependencies": [{"id": "b", "title": "u", "status": "open", "dependency_type": "blocks"}]},
		{"id": "b", "title": "u", "status": "open", "priority": 2}]`))
	if err != nil || !cmp.Equal(show[0].DependsOn, []string{"b"}) {
		t.Errorf("bd show's dependency shape: %v, %v", show, err)
	}
	for _, bad := range []string{`{"issues": []}`, `not json`, `[{"title": "no id"}]`, `[{"id": "a", "priority": "high"}]`} {
		if _, err := parseBeads([]byte(bad)); err == nil || !strings.Contains(err.Error(), "bd list --json") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

func TestCriteriaLines(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"":                                 nil,
		"One sentence.":                    {"One sentence."},
		"Two lines\nof prose.":             {"Two lines\nof prose."},
		"- a\n- b\n  continued\n\n* [x] c": {"a", "b continued", "c"},
		"Intro:\n1. first\n2) second":      {"Intro:", "first", "second"},
	} {
		if got := criteriaLines(in); !cmp.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// MarkDone runs bd close in the merge checkout with a reason naming the
// batch; bd's refusal is an error with what bd said.
func TestBeadsMarkDone(t *testing.T) {
	t.Parallel()
	s := beadsSourceFor(t, standInBD(t))
	merge := t.TempDir()
	ctx := WithNote(context.Background(), Note{Batch: "01JBATCH"})
	if err := s.MarkDone(ctx, merge, Task{ID: "shop-a1b"}); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(merge, "bd-calls.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "close shop-a1b Merged by ralph: its success conditions held on the merged tree (batch 01JBATCH)\n"; string(log) != want {
		t.Errorf("bd was called: %q, want %q", log, want)
	}
	err = s.MarkDone(ctx, merge, Task{ID: "shop-missing"})
	if err == nil || !strings.Contains(err.Error(), "issue not found: shop-missing") {
		t.Errorf("closing a missing bead: %v", err)
	}
	if err := s.MarkDone(ctx, merge, Task{ID: "--force"}); err == nil {
		t.Error("an id that reads as a flag was passed to bd")
	}
}

func TestBeadsWithoutBD(t *testing.T) {
	t.Parallel()
	for _, bd := range []string{filepath.Join(t.TempDir(), "bd"), "ralph-test-no-such-bd"} {
		_, err := beadsSourceFor(t, bd).List(context.Background())
		if err == nil || !strings.Contains(err.Error(), "bd is not installed") {
			t.Errorf("%s: error %v", bd, err)
		}
	}
}
