package arbiter

import (
	"context"
	"testing"
)

func TestIRErrorListing(t *testing.T) {
	t.Parallel()
	e := &IRError{Diagnostics: []Diagnostic{
		{Pos: "3:7", Message: "unknown capability", Fix: "use one of the registry's"},
		{Pos: "steps[1].deps", Message: "cycle"},
		{Message: "no steps", Fix: "add one"},
	}}
	want := "plan.json:3:7: unknown capability; use one of the registry's\nplan.json: steps[1].deps: cycle\nplan.json: no steps; add one"
	if got := e.Listing("plan.json"); got != want {
		t.Fatalf("Listing =\n%s\nwant\n%s", got, want)
	}
	if _, err := (Offline{}).Complete(context.Background(), Completion{}, nil); err == nil {
		t.Fatal("the offline model answered")
	}
}
