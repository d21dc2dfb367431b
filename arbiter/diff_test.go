package arbiter

import (
	"encoding/json"
	"strings"
	"testing"
)

func irOf(t *testing.T, doc string) *IR {
	t.Helper()
	var ir IR
	if err := json.Unmarshal([]byte(doc), &ir); err != nil {
		t.Fatal(err)
	}
	return &ir
}

func TestDiffIR(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	plan := canonOf(t, `(do
	  (step "Fetch" (call :fs.read {:path "in"}))
	  (step-parallel
	    (step "Echo" (call :ccos.echo {:message "hi"}))
	    (step "Add" (call :ccos.math.add 1 2)))
	  (step "Save" (call :fs.write {:path "out" :content "x"})))`)
	cases := []struct {
		name, model string
		want        []string // lines the diff must hold; none means equivalent
	}{
		{"equivalent, renamed ids, fewer deps", `{"steps": [
			{"id": "s1", "name": "Fetch", "capability": ":fs.read", "args": {"path": "in"}, "deps": []},
			{"id": "s2", "name": "Echo", "capability": "ccos.echo", "args": ["hi"], "deps": ["s1"]},
			{"id": "s3", "name": "Add", "capability": ":ccos.math.add", "args": [1, 2], "deps": []},
			{"id": "s4", "name": "Save", "capability": ":fs.write", "args": {"content": "x", "path": "out"}, "deps": ["s2"]}]}`, nil},
		{"missing and extra steps", `{"steps": [
			{"id": "fetch", "name": "Fetch", "capability": ":fs.read", "args": {"path": "in"}, "deps": []},
			{"id": "echo", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "hi"}, "deps": []},
			{"id": "add", "name": "Add", "capability": ":ccos.math.add", "args": [1, 2], "deps": []},
			{"id": "list", "name": "List", "capability": ":fs.list", "args": {"path": "."}, "deps": []}]}`,
			[]string{`- step "list" ("List", :fs.list) is in the IR but not in the plan`, `+ step "save" ("Save", :fs.write) is in the plan but not in the IR`}},
		{"dependency the plan breaks", `{"steps": [
			{"id": "fetch", "name": "Fetch", "capability": ":fs.read", "args": {"path": "in"}, "deps": ["save"]},
			{"id": "echo", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "hi"}},
			{"id": "add", "name": "Add", "capability": ":ccos.math.add", "args": [1, 2], "deps": ["echo"]},
			{"id": "save", "name": "Save", "capability": ":fs.write", "args": {"path": "out", "content": "x"}}]}`,
			[]string{`~ step "fetch": depends on "save" in the IR, but the plan can run it before "save" ("Save", :fs.write)`,
				`~ step "add": depends on "echo" in the IR, but the plan can run it before "echo" ("Echo", :ccos.echo)`}},
		{"args and capability changed", `{"steps": [
			{"id": "fetch", "name": "Fetch", "capability": ":fs.list", "args": {"path": "in"}},
			{"id": "echo", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "bye"}},
			{"id": "add", "name": "Add", "capability": ":ccos.math.add", "args": [2, 1]},
			{"id": "save", "name": "Save", "capability": ":fs.write", "args": {"path": "out", "content": "x"}, "options": {"retry": {"max": 1}}}]}`,
			[]string{`~ step "fetch": capability :fs.list in the IR, :fs.read in the plan`,
				`~ step "echo": args {"message":"bye"} in the IR, {"message":"hi"} in the plan`,
				`~ step "add": args [2,1] in the IR, [1,2] in the plan`,
				`~ step "save": options {"retry":{"max":1}} in the IR, none in the plan`}},
		{"renamed step matched by capability", `{"steps": [
			{"id": "fetch", "name": "Read input", "capability": ":fs.read", "args": {"path": "in"}},
			{"id": "echo", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "hi"}},
			{"id": "add", "name": "Add", "capability": ":ccos.math.add", "args": [1, 2]},
			{"id": "save", "name": "Save", "capability": ":fs.write", "args": {"path": "out", "content": "x"}}]}`,
			[]string{`~ step "fetch": named "Read input" in the IR, "Fetch" in the plan`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := DiffIR(irOf(t, tc.model), plan, reg)
			if tc.want == nil {
				if got != "" {
					t.Fatalf("diff of equivalent IR:\n%s", got)
				}
				return
			}
			lines := strings.Split(got, "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("diff:\n%s\nwant lines:\n%s", got, strings.Join(tc.want, "\n"))
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Fatalf("diff:\n%s\nlacks %q", got, w)
				}
			}
		})
	}
}

// Compilation reorders steps by layer. Steps that share a name (and
// capability) must still be paired with the ones they compiled to, or a
// faithful compile shows a diff — which the docs call worth a bug report.
func TestDiffOfCompiledIRWithSameNamesIsEmpty(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	p := NewPipeline(script(), PipelineOptions{Registry: reg}).(*pipeline)
	for _, doc := range []string{
		`{"steps": [
			{"id": "second", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "2"}, "deps": ["first"]},
			{"id": "first", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "1"}}]}`,
		`{"steps": [
			{"id": "b", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "x"}, "deps": ["a"]},
			{"id": "a", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "x"}},
			{"id": "c", "name": "Echo", "capability": ":ccos.echo", "args": {"message": "x"}, "deps": ["b"]}]}`,
	} {
		out := p.checkIR(doc)
		if len(out.diags) > 0 {
			t.Fatalf("diagnostics %+v", out.diags)
		}
		if diff := DiffIR(out.model, Canonicalize(out.forms), reg); diff != "" {
			t.Errorf("diff of a faithful compile:\n%s\nplan:\n%s", diff, out.src)
		}
	}
}
