package rtfs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// testHost records what reaches it and decides which bodies run.
type testHost struct {
	mu      sync.Mutex
	events  []string
	refuse  map[string]bool         // step names whose bodies must not run
	metas   map[string]*Map         // step name → metadata as received
	ctxs    map[string]Value        // step name → ctx at start
	barrier chan struct{}           // closed once two parallel calls have started
	started int                     // parallel calls seen
	failCap map[string]bool         // capability ids that fail
	comps   []func() (Value, error) // compensations kept, run LIFO on failure
	results map[string]func() Value // capability id → result
	calls   map[string][]Value      // capability id → args of last call
}

func newTestHost() *testHost {
	return &testHost{refuse: map[string]bool{}, metas: map[string]*Map{}, ctxs: map[string]Value{},
		failCap: map[string]bool{}, results: map[string]func() Value{}, calls: map[string][]Value{}}
}

func (h *testHost) log(format string, args ...any) {
	h.mu.Lock()
	h.events = append(h.events, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

func (h *testHost) Call(ctx context.Context, req *CallRequest) (Value, error) {
	h.log("call %s %s", req.ID, Print(Vector(req.Args)))
	h.mu.Lock()
	h.calls[req.ID] = req.Args
	h.mu.Unlock()
	if req.ID == "test.rendezvous" { // blocks until two callers are inside at once
		h.mu.Lock()
		h.started++
		if h.started == 2 {
			close(h.barrier)
		}
		h.mu.Unlock()
		select {
		case <-h.barrier:
		case <-time.After(10 * time.Second):
			return Nil, errors.New("parallel branches did not run concurrently")
		}
	}
	if h.failCap[req.ID] {
		return Nil, fmt.Errorf("capability %s failed", req.ID)
	}
	if f := h.results[req.ID]; f != nil {
		return f(), nil
	}
	if len(req.Args) > 0 {
		return req.Args[0], nil
	}
	return Nil, nil
}

func (h *testHost) Step(ctx context.Context, req *StepRequest) (Value, error) {
	h.mu.Lock()
	h.metas[req.Name] = req.Meta
	h.ctxs[req.Name] = req.Ctx
	refused := h.refuse[req.Name]
	h.mu.Unlock()
	if refused {
		h.log("refuse %s", req.Name)
		return Nil, fmt.Errorf("step %s refused", req.Name)
	}
	h.log("step %s", req.Name)
	v, err := req.Body(ctx)
	if err != nil {
		h.log("step-failed %s", req.Name)
		return Nil, err
	}
	h.log("step-done %s", req.Name)
	return v, nil
}

func (h *testHost) Parallel(ctx context.Context, req *ParallelRequest) ([]Value, error) {
	names := make([]string, len(req.Branches))
	for i, b := range req.Branches {
		names[i] = b.Name
	}
	h.log("parallel %s", strings.Join(names, ","))
	return RunParallel(ctx, req)
}

func (h *testHost) Compensated(ctx context.Context, req *CompensationRequest) (Value, error) {
	h.log("compensated %s/%s", req.PrimaryName, req.CompensationName)
	v, err := req.Primary(ctx)
	if err != nil {
		return Nil, err
	}
	h.mu.Lock()
	h.comps = append(h.comps, func() (Value, error) { return req.Compensation(context.Background(), h) })
	h.mu.Unlock()
	return v, nil
}

func (h *testHost) Plan(ctx context.Context, req *PlanRequest) (Value, error) {
	h.log("plan %s", Print(MapValue(req.Props)))
	h.mu.Lock()
	h.metas["<plan>"] = req.Meta
	h.mu.Unlock()
	return req.Body(ctx)
}

func runPlan(t *testing.T, h *testHost, src string, ctx Value) (Value, error) {
	t.Helper()
	p, err := CompileString(src, Options{File: "plan.rtfs", Mode: PlanMode})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p.Run(context.Background(), h, ctx)
}

func TestHostReceivesStepsAndCalls(t *testing.T) {
	t.Parallel()
	h := newTestHost()
	src := `
(plan ^{:invariant (fn [s s'] (>= (:budget s') 0))} :name "demo" :program
  (do
    (step "Greet" ^{:pre (fn [ctx] (contains? ctx :user)) :post (fn [ctx ctx'] true)}
      (call :ccos.echo {:message (str "hi " (:user ctx))}))
    (step "Add" (call :ccos.math.add 2 (:n ctx)))))`
	h.results["ccos.math.add"] = func() Value { return MapValue(NewMap(Keyword("sum"), Int(5))) }
	v, err := runPlan(t, h, src, MapValue(NewMap(Keyword("user"), String("ana"), Keyword("n"), Int(3))))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`plan {:name "demo"}`,
		"step Greet", `call ccos.echo [{:message "hi ana"}]`, "step-done Greet",
		"step Add", "call ccos.math.add [2 3]", "step-done Add",
	}
	if got := h.events; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if Print(v) != "{:sum 5}" {
		t.Errorf("plan value %s", Print(v))
	}
	// Metadata arrives evaluated, with contract fns as uncalled values.
	meta := h.metas["Greet"]
	if meta == nil || meta.GetKey("pre").Kind() != KindFn || meta.GetKey("post").Kind() != KindFn {
		t.Fatalf("Greet metadata %v: want :pre and :post fns", meta)
	}
	ok, err := CallFn(context.Background(), meta.GetKey("pre"), []Value{h.ctxs["Greet"]}, Limits{})
	if err != nil || !ok.Truthy() {
		t.Errorf(":pre on the step's ctx = %s, %v", Print(ok), err)
	}
	if h.metas["<plan>"].GetKey("invariant").Kind() != KindFn {
		t.Error("plan :invariant did not arrive as a fn")
	}
	// The second step saw ctx' of the first: merged result and :result.
	if got := Print(h.ctxs["Add"].AsMap().GetKey("result")); got != `{:message "hi ana"}` {
		t.Errorf("ctx :result at Add = %s", got)
	}
	if got := h.ctxs["Add"].AsMap().GetKey("message").Str(); got != "hi ana" {
		t.Errorf("ctx :message at Add = %q (map results merge into ctx)", got)
	}
}

func TestHostDecidesWhetherBodiesRun(t *testing.T) {
	t.Parallel()
	h := newTestHost()
	h.refuse["Danger"] = true
	_, err := runPlan(t, h, `(do (step "Safe" (call :a 1)) (step "Danger" (call :b 2)) (step "Never" (call :c 3)))`, Nil)
	if err == nil || !strings.Contains(err.Error(), "plan.rtfs:1:31: step Danger refused") {
		t.Fatalf("error %v, want the refusal positioned at the Danger step", err)
	}
	for _, ev := range h.events {
		if strings.HasPrefix(ev, "call :b") || strings.Contains(ev, "Never") || strings.HasPrefix(ev, "call b") {
			t.Errorf("a refused or later body ran: %q", ev)
		}
	}
}

func TestStepParallelIsConcurrentAndOrdered(t *testing.T) {
	t.Parallel()
	h := newTestHost()
	h.barrier = make(chan struct{})
	v, err := runPlan(t, h, `
(step-parallel
  (step "A" (call :test.rendezvous {:a 1}))
  (step "B" (call :test.rendezvous {:b 2}))
  (let [x 40] (+ x 2)))`, Nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := Print(v); got != "[{:a 1} {:b 2} 42]" {
		t.Errorf("results %s, want branch order", got)
	}
	if h.events[0] != "parallel A,B," {
		t.Errorf("first event %q", h.events[0])
	}
}

func TestStepLoop(t *testing.T) {
	t.Parallel()
	h := newTestHost()
	n := 0
	var mu sync.Mutex
	h.results["counter.next"] = func() Value {
		mu.Lock()
		defer mu.Unlock()
		n++
		return MapValue(NewMap(Keyword("n"), Int(int64(n))))
	}
	v, err := runPlan(t, h, `(step-loop "Poll" {:max 10 :until (fn [r] (>= (:n r) 3))} (call :counter.next))`, Nil)
	if err != nil {
		t.Fatal(err)
	}
	if Print(v) != "{:n 3}" {
		t.Errorf("loop value %s", Print(v))
	}
	var steps []string
	for _, ev := range h.events {
		if strings.HasPrefix(ev, "step ") {
			steps = append(steps, strings.TrimPrefix(ev, "step "))
		}
	}
	if got := strings.Join(steps, ","); got != "Poll,Poll#1,Poll#2,Poll#3" {
		t.Errorf("steps %s", got)
	}
	_, err = runPlan(t, newTestHost(), `(step-loop "Never" {:max 2 :until (fn [r] false)} 1)`, Nil)
	if err == nil || !strings.Contains(err.Error(), "ran :max 2 passes without :until holding") {
		t.Errorf("exhausted loop: %v", err)
	}
}

func TestCompensationRunsLater(t *testing.T) {
	t.Parallel()
	h := newTestHost()
	h.results["orders.create"] = func() Value { return MapValue(NewMap(Keyword("order-id"), String("o-7"))) }
	h.failCap["bank.charge"] = true
	_, err := runPlan(t, h, `
(do
  (let [user "u1"]
    (step.with-compensation
      (step "CreateOrder" (call :orders.create {:user user}))
      (step "CancelOrder" (call :orders.cancel {:id (:order-id ctx) :user user}))))
  (step "Charge" (call :bank.charge {})))`, Nil)
	if err == nil || !strings.Contains(err.Error(), "capability bank.charge failed") {
		t.Fatalf("want the Charge failure, got %v", err)
	}
	// The plan's evaluation is over; the kept compensation still runs with
	// the ctx after its primary and the let binding it closed over.
	if len(h.comps) != 1 {
		t.Fatalf("%d compensations kept", len(h.comps))
	}
	if _, err := h.comps[0](); err != nil {
		t.Fatal(err)
	}
	if got := Print(Vector(h.calls["orders.cancel"])); got != `[{:id "o-7" :user "u1"}]` {
		t.Errorf("compensation args %s", got)
	}
}

func TestPureModeRejectsPlanForms(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want string }{
		{"(+ 1\n  (call :x))", "e.rtfs:2:3: call is not allowed in pure code"},
		{"(step \"a\" 1)", "e.rtfs:1:1: step is not allowed in pure code"},
		{"[(step-parallel 1)]", "e.rtfs:1:2: step-parallel is not allowed"},
		{"(do (step-loop \"x\" {:max 1} 1))", "e.rtfs:1:5: step-loop is not allowed"},
		{"(step.with-compensation 1 2)", "e.rtfs:1:1: step.with-compensation is not allowed"},
	}
	for _, tc := range cases {
		_, err := CompileString(tc.src, Options{File: "e.rtfs"})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
	// Contracts inside a plan are pure too.
	_, err := CompileString(`(step "s" ^{:pre (fn [c] (call :x))} 1)`, Options{File: "e.rtfs", Mode: PlanMode})
	if err == nil || !strings.Contains(err.Error(), "e.rtfs:1:26: call is not allowed in contracts") {
		t.Errorf("impure contract: %v", err)
	}
}

func TestDefnContracts(t *testing.T) {
	t.Parallel()
	src := `
(defn withdraw ^{:pre (fn [bal amt] (>= bal amt)) :post (fn [bal amt r] (>= r 0))} [bal amt]
  (- bal amt))
[(withdraw 10 3) (try (withdraw 1 5) (catch e (:type e)))]`
	p, err := CompileString(src, Options{File: "c.rtfs"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Eval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := Print(v); got != "[7 :contract/precondition-failed]" {
		t.Errorf("got %s", got)
	}
}

func TestCancellationStopsEvaluation(t *testing.T) {
	t.Parallel()
	p, err := CompileString("(defn spin [n] (if (< n 0) n (spin (inc n)))) (spin 0)", Options{Limits: Limits{Fuel: 1 << 40, MaxDepth: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.Eval(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Type != ErrCancelled {
		t.Fatalf("got %v, want %s", err, ErrCancelled)
	}
}

func TestFatalErrorsAreNotCaught(t *testing.T) {
	t.Parallel()
	p, err := CompileString("(defn f [n] (f n)) (try (f 1) (catch e :caught))", Options{File: "d.rtfs"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Eval(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Type != ErrDepth || !strings.HasPrefix(err.Error(), "d.rtfs:1:13:") {
		t.Fatalf("got %v, want an uncaught depth error at d.rtfs:1:13", err)
	}
}
