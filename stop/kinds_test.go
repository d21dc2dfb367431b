package stop

import (
	"context"
	"slices"
	"testing"

	"github.com/ralphloop/ralph/config"
)

// Every kind config declares has a builder here, and no builder is for a
// kind config does not declare.
func TestEveryKindHasABuilder(t *testing.T) {
	kinds := config.StopKinds()
	for _, k := range kinds {
		if _, ok := builders[k]; !ok {
			t.Errorf("config declares stop kind %q, which has no builder in stop", k)
		}
	}
	for k := range builders {
		if !slices.Contains(kinds, k) {
			t.Errorf("stop builds kind %q, which config does not declare", k)
		}
	}
}

// evenIteration is a kind that exists only in this test.
type evenIteration struct{ every int }

func (e evenIteration) check(_ context.Context, in *Input) outcome {
	return outcome{met: in.Iteration%e.every == 0, reason: "iteration is a multiple"}
}
func (e evenIteration) fingerprint(in *Input, f *fp) bool { f.i64(int64(in.Iteration)); return false }
func (e evenIteration) inputs(in *Input) string           { return "iteration" }

// A new kind is one declaration in config and one builder here: with just
// those, a config using it parses, is checked (its required field, its
// default class and priority), and evaluates.
func TestAKindIsOneEntryInEachTable(t *testing.T) {
	if err := config.DeclareStopKind(config.StopKind{Name: "test_every", Required: []string{"count"}, Priority: 65, Class: "limit"}); err != nil {
		t.Fatal(err)
	}
	builders["test_every"] = func(s *config.Stop, _ string, _ int) (checker, error) { return evenIteration{s.Count}, nil }
	t.Cleanup(func() { delete(builders, "test_every") })

	cfg, err := config.Parse([]byte("[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"test_every\"\ncount = 3\n"), "ralph.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	conds, err := FromConfig(cfg.Stop, "ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(conds) != 1 || conds[0].Class != ClassLimit || conds[0].Priority != 65 {
		t.Fatalf("the new kind built as %+v", conds)
	}
	for it, want := range map[int]bool{1: false, 3: true} {
		out := conds[0].check.check(context.Background(), &Input{Iteration: it})
		if out.met != want {
			t.Errorf("iteration %d: met %v, want %v", it, out.met, want)
		}
	}
	_, err = config.Parse([]byte("[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"test_every\"\n"), "ralph.toml", nil)
	if err == nil || err.Error() != `ralph.toml:3: [[stop]] (kind "test_every"): kind "test_every" needs a positive count` {
		t.Errorf("the new kind without its field: %v", err)
	}
}
