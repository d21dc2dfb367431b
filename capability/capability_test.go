package capability

import (
	"context"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/rtfs"
)

func TestInputFrom(t *testing.T) {
	t.Parallel()
	mapSpec := &Spec{ID: "x.map", Input: rtfs.MustParseType("[:map [:a :int] [:b {:optional true} :string]]")}
	tupleSpec := &Spec{ID: "x.tuple", Input: rtfs.MustParseType("[:tuple :number :number]")}
	cases := []struct {
		name string
		spec *Spec
		args []rtfs.Value
		want string
		err  string
	}{
		{"map passes", mapSpec, []rtfs.Value{rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("a"), rtfs.Int(1)))}, "{:a 1}", ""},
		{"positional becomes map", mapSpec, []rtfs.Value{rtfs.Int(1), rtfs.String("s")}, `{:a 1 :b "s"}`, ""},
		{"too many positional", mapSpec, []rtfs.Value{rtfs.Int(1), rtfs.String("s"), rtfs.Nil}, "", "x.map takes at most 2 positional arguments ([:a :b]), got 3"},
		{"wrong type names path", mapSpec, []rtfs.Value{rtfs.String("1")}, "", "x.map: :a expected int, got string"},
		{"tuple", tupleSpec, []rtfs.Value{rtfs.Int(1), rtfs.Float(2)}, "[1 2.0]", ""},
		{"tuple arity", tupleSpec, []rtfs.Value{rtfs.Int(1)}, "", "x.tuple: expected a vector of 2, got vector"},
	}
	for _, tc := range cases {
		v, err := tc.spec.InputFrom(tc.args)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || rtfs.Print(v) != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.name, rtfs.Print(v), err, tc.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	h := func(context.Context, rtfs.Value) (Result, error) { return Result{}, nil }
	if err := r.Register(&Capability{Spec: &Spec{ID: "b.two"}, Handler: h}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(&Capability{Spec: &Spec{ID: "a.one"}, Handler: h}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(&Capability{Spec: &Spec{ID: "a.one"}, Handler: h}); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("duplicate: %v", err)
	}
	if err := r.Register(&Capability{Spec: &Spec{ID: ":bad"}, Handler: h}); err == nil {
		t.Error("accepted an id with a colon")
	}
	if r.Get(":a.one") == nil || r.Get("a.one") == nil || r.Get("nope") != nil {
		t.Error("Get")
	}
	specs := r.Specs()
	if len(specs) != 2 || specs[0].ID != "a.one" {
		t.Errorf("Specs not sorted: %v", specs)
	}
}

func TestCommandAllowed(t *testing.T) {
	allow := []string{"go", "/usr/bin/make"}
	for _, tc := range []struct {
		cmd  string
		want bool
	}{{"go", true}, {"/usr/bin/make", true}, {"make", false}, {"/usr/bin/go", false}, {"", false}, {"go ", false}} {
		if got := CommandAllowed(tc.cmd, allow); got != tc.want {
			t.Errorf("CommandAllowed(%q) = %v, want %v", tc.cmd, got, tc.want)
		}
	}
	if CommandAllowed("", []string{""}) {
		t.Error("an empty command is never allowed")
	}
}
