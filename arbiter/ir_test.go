package arbiter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// irSteps builds a Mode B document from step objects.
func irDoc(steps ...string) string { return `{"steps": [` + strings.Join(steps, ",") + `]}` }

func TestDecodeIR(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, doc, pos, msg string }{
		{"not json", `{"steps": [}`, "1:12", "not valid JSON"},
		{"truncated", `{"steps": [{"id": "a"`, "1:22", "ends before the object is closed"},
		{"trailing text", `{"steps": []} and more`, "$", "more text after"},
		{"array", `[{"id": "a"}]`, "$", "the IR is an array, not an object"},
		{"no steps", `{"plan": []}`, "$.plan", "unknown key"},
		{"steps not array", `{"steps": {}}`, "steps", "must be an array"},
		{"empty steps", `{"steps": []}`, "steps", "is empty"},
		{"step not object", `{"steps": [1]}`, "steps[0]", "must be an object, got a number"},
		{"unknown step key", irDoc(`{"id": "a", "capability": ":ccos.echo", "description": "x"}`), "steps[0].description", "unknown key"},
		{"no id", irDoc(`{"capability": ":ccos.echo"}`), "steps[0]", "has no id"},
		{"empty id", irDoc(`{"id": "", "capability": ":ccos.echo"}`), "steps[0].id", "is empty"},
		{"id not string", irDoc(`{"id": 3, "capability": ":ccos.echo"}`), "steps[0].id", "must be a string, got a number"},
		{"no capability", irDoc(`{"id": "a"}`), "steps[0]", "has no capability"},
		{"deps not array", irDoc(`{"id": "a", "capability": ":ccos.echo", "deps": "b"}`), "steps[0].deps", "must be an array of step ids"},
		{"dep not string", irDoc(`{"id": "a", "capability": ":ccos.echo", "deps": [1]}`), "steps[0].deps[0]", "must be a step id string"},
		{"options not object", irDoc(`{"id": "a", "capability": ":ccos.echo", "options": []}`), "steps[0].options", "must be an object"},
		{"too big", `{"steps": "` + strings.Repeat("x", maxIRBytes) + `"}`, "$", "over the"},
		{"too many steps", `{"steps": [` + strings.Repeat(`{},`, maxIRSteps) + `{}]}`, "steps", "over the limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, ds := decodeIR([]byte(tc.doc))
			if len(ds) == 0 {
				t.Fatal("no diagnostic")
			}
			if d := ds[0]; d.Pos != tc.pos || !strings.Contains(d.Message, tc.msg) || d.Fix == "" || d.Stage != "ir" {
				t.Fatalf("diagnostic = %+v, want pos %q message %q", d, tc.pos, tc.msg)
			}
		})
	}
}

func TestValidateIR(t *testing.T) {
	t.Parallel()
	echo := func(id string, deps string) string {
		return `{"id": "` + id + `", "name": "` + strings.ToUpper(id) + `", "capability": ":ccos.echo", "args": {"message": "hi"}, "deps": [` + deps + `]}`
	}
	cases := []struct{ name, doc, pos, msg, fix string }{
		{"duplicate id", irDoc(echo("a", ""), echo("a", "")), "steps[1].id", `id "a" is already used by steps[0]`, "its own id"},
		{"missing dep", irDoc(echo("a", ""), echo("b", `"c"`)), "steps[1].deps[0]", `no step has id "c"`, "only ids"},
		{"missing dep suggestion", irDoc(echo("fetch", ""), echo("b", `"fetc"`)), "steps[1].deps[0]", `no step has id "fetc"`, `did you mean "fetch"?`},
		{"self dep", irDoc(echo("a", `"a"`)), "steps[0].deps[0]", "depends on itself", "remove it"},
		{"dep twice", irDoc(echo("a", ""), echo("b", `"a", "a"`)), "steps[1].deps[1]", "listed twice", "once"},
		{"two-cycle", irDoc(echo("a", `"b"`), echo("b", `"a"`)), "steps[1].deps", "cycle: a → b → a", `remove "a" from the deps of "b"`},
		{"three-cycle", irDoc(echo("x", ""), echo("a", `"c"`), echo("b", `"a"`), echo("c", `"b"`)), "steps[2].deps", "cycle: a → c → b → a", `remove "a" from the deps of "b"`},
		{"unknown capability", irDoc(`{"id": "a", "capability": ":ccos.ecko", "args": {"message": "x"}}`), "steps[0].capability", "unknown capability :ccos.ecko", "did you mean :ccos.echo?"},
		{"args wrong type", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": 1}}`), "steps[0].args", ":message expected string, got int", "{:message string}"},
		{"args unknown key", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "x", "volume": 11}}`), "steps[0].args", ":volume is not a known key", ""},
		{"args missing key", irDoc(`{"id": "a", "capability": ":fs.write", "args": {"path": "x"}}`), "steps[0].args", ":content is required", ""},
		{"positional arity", irDoc(`{"id": "a", "capability": ":ccos.math.add", "args": [1, 2, 3]}`), "steps[0].args", "takes 2 arguments, got 3", ""},
		{"big int", irDoc(`{"id": "a", "capability": ":ccos.math.add", "args": [1, 99999999999999999999]}`), "steps[0].args", "does not fit in 64 bits", ""},
		{"bad $rtfs", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": {"$rtfs": "(str"}}}`), "steps[0].args", "does not read", ""},
		{"two $rtfs forms", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": {"$rtfs": "1 2"}}}`), "steps[0].args", "exactly one form", ""},
		{"deep args", irDoc(`{"id": "a", "capability": ":kv.put", "args": {"key": "k", "value": ` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `}}`), "steps[0].args", "nested deeper than 64", ""},
		{"unknown option", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "x"}, "options": {"parallel": true}}`), "steps[0].options.parallel", "unknown option", "options are"},
		{"bad retry", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "x"}, "options": {"retry": {"max": 500}}}`), "steps[0].options.retry", "0 ≤ n ≤ 100", ""},
		{"bad contract", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "x"}, "options": {"contracts": {"pre": "true"}}}`), "steps[0].options.contracts.pre", "one (fn …) form", ""},
		{"bad isolation", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "x"}, "options": {"isolation": "none"}}`), "steps[0].options.isolation", `"inherit" or "isolated"`, ""},
		{"bad idempotency scope", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "x"}, "options": {"idempotency": {"key": "k", "scope": "world"}}}`), "steps[0].options.idempotency", `"scope"`, ""},
		{"key twice once with colon", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "a", ":message": "b"}}`), "steps[0].args", `key :message is written twice`, ""},
		{"map-of key twice once with colon", irDoc(`{"id": "a", "capability": ":kv.put", "args": {"key": "k", "value": {"x": 1, ":x": 2}}}`), "steps[0].args", `key :x is written twice`, ""},
		{"meta shadows option", irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": "x"}, "options": {"meta": {"retry": 1}}}`), "steps[0].options.meta.retry", "has its own option", ""},
	}
	reg := testRegistry(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			steps, ds := decodeIR([]byte(tc.doc))
			if len(ds) > 0 {
				t.Fatalf("decode: %+v", ds)
			}
			_, _, ds = validateIR(steps, reg, nil)
			if len(ds) == 0 {
				t.Fatal("no diagnostic")
			}
			if d := ds[0]; d.Pos != tc.pos || !strings.Contains(d.Message, tc.msg) || !strings.Contains(d.Fix, tc.fix) || d.Fix == "" {
				t.Fatalf("diagnostic = %+v, want pos %q message %q fix %q", d, tc.pos, tc.msg, tc.fix)
			}
		})
	}
}

func TestTopologicalLayers(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	step := func(id, deps string) string {
		return `{"id": "` + id + `", "capability": ":ccos.echo", "args": {"message": "` + id + `"}, "deps": [` + deps + `]}`
	}
	cases := []struct{ name, doc, want string }{
		{"independent", irDoc(step("a", ""), step("b", ""), step("c", "")), "[a b c]"},
		{"chain declared backwards", irDoc(step("c", `"b"`), step("b", `"a"`), step("a", "")), "[a] [b] [c]"},
		{"diamond", irDoc(step("d", `"b", "c"`), step("b", `"a"`), step("c", `"a"`), step("a", "")), "[a] [b c] [d]"},
		{"ties by declaration order", irDoc(step("z", ""), step("y", `"z"`), step("x", ""), step("w", `"x"`)), "[z x] [y w]"},
		{"longest path decides", irDoc(step("a", ""), step("b", `"a"`), step("c", `"b"`), step("d", `"a"`), step("e", `"c", "d"`)), "[a] [b d] [c] [e]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			steps, ds := decodeIR([]byte(tc.doc))
			checked, ls, ds2 := validateIR(steps, reg, nil)
			if len(ds)+len(ds2) > 0 {
				t.Fatalf("diagnostics: %+v %+v", ds, ds2)
			}
			var parts []string
			for _, l := range ls {
				var ids []string
				for _, i := range l {
					ids = append(ids, checked[i].id)
				}
				parts = append(parts, "["+strings.Join(ids, " ")+"]")
			}
			if got := strings.Join(parts, " "); got != tc.want {
				t.Fatalf("layers = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCompileIR(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	doc := `{"steps": [
	  {"id": "save", "name": "Save", "capability": ":fs.write", "args": {"path": "sum.txt", "content": {"$rtfs": "(str (:result ctx))"}}, "deps": ["greet", "add"],
	   "options": {"contracts": {"pre": "(fn [ctx] (map? ctx))"}, "retry": {"max": 2, "backoff_ms": 100}, "timeout_ms": 5000}},
	  {"id": "greet", "name": "Greet", "capability": "ccos.echo", "args": ["hi"]},
	  {"id": "add", "name": "Add", "capability": ":ccos.math.add", "args": [2, 3.5], "deps": []},
	  {"id": "tests", "name": "Tests", "capability": ":shell.exec", "args": {"cmd": "go", "args": ["test"], "env": {"GOFLAGS": "-count=1"}}, "deps": ["save"],
	   "options": {"idempotency": {"key": "t", "scope": "intent"}, "isolation": "isolated", "deterministic": false, "meta": {"owner": "ci"}}}
	]}`
	got, err := CompileIR([]byte(doc), reg)
	if err != nil {
		t.Fatal(err)
	}
	want := `(do
  (step-parallel
    (step "Greet" (call :ccos.echo "hi"))
    (step "Add" (call :ccos.math.add 2 3.5)))
  (step "Save" ^{:post nil :pre (fn [ctx] (map? ctx)) :retry {:backoff-ms 100 :max 2} :timeout-ms 5000} (call :fs.write {:content (str (:result ctx)) :path "sum.txt"}))
  (step "Tests" ^{:deterministic false :idempotency {:key "t" :scope :intent} :isolation :isolated :owner "ci"} (call :shell.exec {:args ["test"] :cmd "go" :env {"GOFLAGS" "-count=1"}})))
`
	want = strings.Replace(want, ":post nil ", "", 1)
	if got != want {
		t.Fatalf("compiled:\n%s\nwant:\n%s", got, want)
	}
	if _, err := CompileIR([]byte(irDoc(`{"id": "a", "capability": ":nope"}`)), reg); err == nil || !strings.Contains(err.Error(), "steps[0].capability: unknown capability :nope; use only listed capabilities") {
		t.Fatalf("error = %v", err)
	}
	var ie *IRError
	if _, err := CompileIR([]byte(`{"steps": [{"id": "a", "capability": ":nope"}, {"id": "a", "capability": ":nope"}]}`), reg); !errors.As(err, &ie) || len(ie.Diagnostics) < 2 || !strings.Contains(err.Error(), "more problem") {
		t.Fatalf("several problems: %v", err)
	}
}

func TestArgShaping(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	cases := []struct{ capID, args, want string }{
		{"ccos.echo", `{"message": "hi"}`, `{:message "hi"}`},
		{"ccos.echo", `{":message": "hi"}`, `{:message "hi"}`},
		{"ccos.echo", `["hi"]`, `"hi"`},
		{"ccos.echo", `[{"message": "hi"}]`, `{:message "hi"}`},
		{"ccos.echo", `"hi"`, `"hi"`},
		{"ccos.math.add", `[1, 2.0]`, `1 2.0`},
		{"ccos.math.add", `[1e3, -0.5]`, `1000.0 -0.5`},
		{"shell.exec", `{"cmd": "go", "env": {"A": "b"}}`, `{:cmd "go" :env {"A" "b"}}`},
		{"kv.put", `{"key": "k", "value": {"a": [true, null, {"$rtfs": ":kw"}]}}`, `{:key "k" :value {:a [true nil :kw]}}`},
	}
	for _, tc := range cases {
		s := &irStep{capability: tc.capID, hasArgs: true}
		var err error
		if s.args, err = decodeJSONValue(tc.args); err != nil {
			t.Fatal(err)
		}
		nodes, err := argNodes(s, reg.Get(tc.capID).Spec)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.capID, tc.args, err)
		}
		var parts []string
		for _, n := range nodes {
			parts = append(parts, printNode(n))
		}
		if got := strings.Join(parts, " "); got != tc.want {
			t.Errorf("%s %s = %s, want %s", tc.capID, tc.args, got, tc.want)
		}
	}
}

func TestRTFSArgsArePure(t *testing.T) {
	t.Parallel()
	doc := irDoc(`{"id": "a", "capability": ":ccos.echo", "args": {"message": {"$rtfs": "(str (call :shell.exec {:cmd \"go\"}))"}}}`)
	_, err := CompileIR([]byte(doc), testRegistry(t))
	if err == nil || !strings.Contains(err.Error(), "holds a (call …) form") {
		t.Fatalf("err = %v", err)
	}
}

// A string the schema wants as a keyword becomes a keyword only when it
// is one: anything else would be printed as RTFS source, and a crafted
// string could write forms — calls — the IR does not have.
func TestKeywordArgsAreNotSource(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	noop := func(context.Context, rtfs.Value) (capability.Result, error) { return capability.Result{}, nil }
	if err := reg.Register(&capability.Capability{Spec: &capability.Spec{ID: "x.mode", Version: "1",
		Input: rtfs.MustParseType("[:map [:mode :keyword]]")}, Handler: noop}); err != nil {
		t.Fatal(err)
	}
	src, err := CompileIR([]byte(irDoc(`{"id": "a", "capability": "x.mode", "args": {"mode": ":fast"}}`)), reg)
	if err != nil || !strings.Contains(src, "{:mode :fast}") {
		t.Fatalf("keyword arg: %q, %v", src, err)
	}
	for _, mode := range []string{
		`a}) (call :shell.exec {:cmd \"rm\" :args [\"-rf\" \".\"]}) (str {:b 1`,
		`a b`, `a;b`, `\"a\"`, ``, `:`,
	} {
		src, err := CompileIR([]byte(irDoc(`{"id": "a", "capability": "x.mode", "args": {"mode": "`+mode+`"}}`)), reg)
		if err == nil {
			t.Errorf("mode %q compiled to %s", mode, src)
			continue
		}
		if !strings.Contains(err.Error(), "steps[0].args") {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
}
