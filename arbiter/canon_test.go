package arbiter

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/rtfs"
)

func canonOf(t *testing.T, src string) *IR {
	t.Helper()
	ir, err := CanonicalizeSource(src, "plan.rtfs")
	if err != nil {
		t.Fatal(err)
	}
	return ir
}

// brief renders each step as "id<-deps" with its capability.
func brief(ir *IR) string {
	var parts []string
	for _, s := range ir.Steps {
		p := s.ID + "<-" + strings.Join(s.Deps, ",")
		if s.Capability != "" {
			p += " " + s.Capability
		}
		if s.Kind != "" {
			p += " kind=" + s.Kind
		}
		if s.Parent != "" {
			p += " parent=" + s.Parent
		}
		if s.Compensates != "" {
			p += " undoes=" + s.Compensates
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func TestCanonicalDeps(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src, want string }{
		{"sequence", `(do (step "A" (call :ccos.echo {:message "a"})) (step "B" (call :ccos.echo {:message "b"})))`,
			"a<- :ccos.echo; b<-a :ccos.echo"},
		{"parallel layer", `(do (step "A" (call :ccos.echo "a")) (step-parallel (step "B" (call :ccos.echo "b")) (step "C" (call :ccos.echo "c"))) (step "D" (call :ccos.echo "d")))`,
			"a<- :ccos.echo; b<-a :ccos.echo; c<-a :ccos.echo; d<-b,c :ccos.echo"},
		{"nested steps", `(do (step "Outer" (step "In 1" (call :ccos.echo "x")) (step "In 2" (call :ccos.echo "y"))) (step "After" (call :ccos.echo "z")))`,
			"outer<-; in-1<- :ccos.echo parent=outer; in-2<-in-1 :ccos.echo parent=outer; after<-outer :ccos.echo"},
		{"loop", `(do (step-loop "Tests" {:max 3 :until (fn [r] (= 0 (:exit r)))} (call :shell.exec {:cmd "go"})))`,
			"tests<- :shell.exec kind=loop"},
		{"compensation", `(do (step.with-compensation (step "Put" (call :kv.put {:key "k" :value 1})) (step "Undo" (call :kv.put {:key "k" :value nil}))) (step "Next" (call :ccos.echo "n")))`,
			"put<- :kv.put; undo<- :kv.put kind=compensation undoes=put; next<-put :ccos.echo"},
		{"if branches share deps", `(do (step "A" (call :ccos.echo "a")) (if (= 1 (:iteration ctx)) (step "B" (call :ccos.echo "b")) (step "C" (call :ccos.echo "c"))) (step "D" (call :ccos.echo "d")))`,
			"a<- :ccos.echo; b<-a :ccos.echo; c<-a :ccos.echo; d<-b,c :ccos.echo"},
		{"bare call", `(do (call :ccos.echo "x") (step "A" (call :ccos.echo "a")))`,
			"call-ccos-echo<- :ccos.echo kind=call; a<-call-ccos-echo :ccos.echo"},
		{"duplicate names", `(do (step "Run tests" (call :ccos.echo "a")) (step "Run tests" (call :ccos.echo "b")) (step "!!" (call :ccos.echo "c")))`,
			"run-tests<- :ccos.echo; run-tests-2<-run-tests :ccos.echo; step<-run-tests-2 :ccos.echo"},
		{"plan wrapper", `(plan :program (do (step "A" (call :ccos.echo "a"))))`, "a<- :ccos.echo"},
		{"step with no call", `(do (step "Check" (if true :ok (throw "no"))))`, "check<-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := brief(canonOf(t, tc.src)); got != tc.want {
				t.Fatalf("canonical IR:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestCanonicalStepContents(t *testing.T) {
	t.Parallel()
	ir := canonOf(t, `(do
	  (step "Count" ^{:retry {:max 2 :backoff-ms 10} :timeout-ms 500 :idempotency {:key "c" :scope :plan} :owner "me"}
	    (let [n (or (call :kv.get {:key "n"}) 0)]
	      (call :kv.put {:key "n" :value (inc n)})))
	  (step "Add" ^{:pre (fn [ctx] true) :deterministic true :isolation :inherit} (call :ccos.math.add 1 2.0))
	  (step "Odd" (call :kv.put {"k" 1 :value :v})))`)
	got := ir.JSON()
	want := `{"steps":[` +
		`{"id":"count","name":"Count","deps":[],"options":{"retry":{"max":2,"backoff_ms":10},"timeout_ms":500,"idempotency":{"key":"c","scope":"plan"},"meta":{"owner":"me"}},` +
		`"calls":[{"capability":":kv.get","args":{"key":"n"}},{"capability":":kv.put","args":{"key":"n","value":{"$rtfs":"(inc n)"}}}],` +
		`"body":"(let [n (or (call :kv.get {:key \"n\"}) 0)] (call :kv.put {:key \"n\" :value (inc n)}))"},` +
		`{"id":"add","name":"Add","capability":":ccos.math.add","args":[1,2.0],"deps":["count"],"options":{"deterministic":true,"isolation":"inherit","contracts":{"pre":"(fn [ctx] true)"}}},` +
		`{"id":"odd","name":"Odd","capability":":kv.put","args":[{"$rtfs":"{\"k\" 1 :value :v}"}],"deps":["add"]}]}`
	if got != want {
		t.Fatalf("canonical IR:\n got %s\nwant %s", got, want)
	}
	if again := canonOf(t, `(do (step "Count" ^{:owner "me" :idempotency {:scope :plan :key "c"} :timeout-ms 500 :retry {:backoff-ms 10 :max 2}} (let [n (or (call :kv.get {:key "n"}) 0)] (call :kv.put {:value (inc n) :key "n"}))) (step "Add" ^{:isolation :inherit :deterministic true :pre (fn [ctx] true)} (call :ccos.math.add 1 2.0)) (step "Odd" (call :kv.put {:value :v "k" 1})))`).JSON(); again != got {
		t.Fatalf("the same plan written differently must give the same IR:\n%s\n%s", again, got)
	}
}

// A plan compiled from IR canonicalises back to that IR: no diff, and
// compiling the canonical IR again gives the same plan.
func TestCompileCanonRoundTrip(t *testing.T) {
	t.Parallel()
	reg := testRegistry(t)
	docs := []string{
		irDoc(`{"id": "a", "name": "A", "capability": ":ccos.echo", "args": {"message": "hi"}}`),
		irDoc(`{"id": "x", "name": "Fetch", "capability": ":fs.read", "args": {"path": "in"}, "deps": []}`,
			`{"id": "y", "name": "Write", "capability": ":fs.write", "args": {"path": "out", "content": {"$rtfs": "(:result ctx)"}}, "deps": ["x"], "options": {"retry": {"max": 1}}}`,
			`{"id": "z", "name": "Sum", "capability": ":ccos.math.add", "args": [1, 2], "deps": []}`,
			`{"id": "w", "name": "Done", "capability": ":kv.put", "args": {"key": "done", "value": [true, 1.5, {"$rtfs": ":ok"}]}, "deps": ["y", "z"], "options": {"contracts": {"post": "(fn [a b] true)"}, "meta": {"tag": "t"}}}`),
	}
	for _, doc := range docs {
		steps, ds := decodeIR([]byte(doc))
		checked, ls, ds2 := validateIR(steps, reg, nil)
		if len(ds)+len(ds2) > 0 {
			t.Fatalf("%+v %+v", ds, ds2)
		}
		src := FormatPlan([]*rtfs.Node{compileSteps(checked, ls)})
		canonical := canonOf(t, src)
		if d := DiffIR(modelIR(checked), canonical, reg); d != "" {
			t.Fatalf("diff of a compiled plan:\n%s\nplan:\n%s", d, src)
		}
		plain := &IR{}
		for _, s := range canonical.Steps {
			s.Kind, s.Parent, s.Calls, s.Body = "", "", nil, ""
			plain.Steps = append(plain.Steps, s)
		}
		again, err := CompileIR([]byte(plain.JSON()), reg)
		if err != nil {
			t.Fatalf("compile canonical IR: %v\n%s", err, plain.JSON())
		}
		if again != src {
			t.Fatalf("compile(canon(compile(ir))) differs:\n%s\nwant\n%s", again, src)
		}
	}
}

func TestFormatPlan(t *testing.T) {
	t.Parallel()
	srcs := []string{
		`(do (step "A" (call :ccos.echo {:message "a"})) (step-parallel (step "B" (call :ccos.echo "b")) (step "C" (call :ccos.echo "c"))))`,
		`(plan ^{:invariant (fn [a b] true)} :name "x" :program (do (step "A" (call :ccos.echo "a"))))`,
		`(do (step.with-compensation (step "P" (call :kv.put {:key "k" :value 1})) (step "U" (call :kv.put {:key "k" :value nil}))))`,
		`(do (step "Outer" ^{:retry {:max 1}} (let [x (call :kv.get {:key "a-very-long-key-name-to-push-this-line-past-the-limit"})] (step "Inner" (call :ccos.echo {:message (str x)})))))`,
		`(do [(step "V1" (call :ccos.echo "x")) (step "V2" (call :ccos.echo "y"))] ; comment
		 #_ (ignored) (step "Q" 'quoted))`,
	}
	for _, src := range srcs {
		forms, err := rtfs.Read(src, "p")
		if err != nil {
			t.Fatal(err)
		}
		out := FormatPlan(forms)
		again, err := rtfs.Read(out, "p")
		if err != nil {
			t.Fatalf("formatted plan does not read: %v\n%s", err, out)
		}
		if rtfs.PrintProgram(again) != rtfs.PrintProgram(forms) {
			t.Fatalf("formatting changed the plan:\n%s", out)
		}
		if FormatPlan(again) != out {
			t.Fatalf("formatting is not idempotent:\n%s", out)
		}
	}
	forms, _ := rtfs.Read(srcs[0], "p")
	want := "(do\n  (step \"A\" (call :ccos.echo {:message \"a\"}))\n  (step-parallel\n    (step \"B\" (call :ccos.echo \"b\"))\n    (step \"C\" (call :ccos.echo \"c\"))))\n"
	if got := FormatPlan(forms); got != want {
		t.Fatalf("layout:\n%s\nwant\n%s", got, want)
	}
}
