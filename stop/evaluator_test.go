package stop

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
)

// fake is a checker whose behaviour a test controls.
type fake struct {
	calls    atomic.Int64
	met      func(in *Input) bool
	progress func(in *Input) float64
	external bool
	block    bool // wait until the context ends
}

func (f *fake) check(ctx context.Context, in *Input) outcome {
	f.calls.Add(1)
	if f.block {
		<-ctx.Done()
		return outcome{reason: "interrupted"}
	}
	o := outcome{reason: "fake", detail: "fake"}
	if f.met != nil {
		o.met = f.met(in)
	}
	if f.progress != nil {
		o.progress = f.progress(in)
	}
	return o
}
func (f *fake) fingerprint(in *Input, fp *fp) bool {
	fp.i64(int64(in.Iteration))
	fp.boolean(in.UserSignal)
	return f.external
}
func (f *fake) inputs(in *Input) string { return fmt.Sprintf("iteration=%d", in.Iteration) }

func fakeCond(name string, class Class, priority int, f *fake) *Condition {
	return &Condition{Name: name, Kind: "fake", Class: class, Priority: priority, check: f}
}

func always(v bool) func(*Input) bool { return func(*Input) bool { return v } }

func drain(e *Evaluator) []Event {
	var out []Event
	for {
		select {
		case ev := <-e.Events():
			out = append(out, ev)
		default:
			return out
		}
	}
}

func names(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// Requirement 1: sequential evaluation respects priority order.
func TestSequentialRespectsPriority(t *testing.T) {
	t.Parallel()
	fs := map[string]*fake{}
	var conds []*Condition
	for i, p := range []int{10, 90, 50, 90, 0} {
		name := fmt.Sprintf("c%d-p%d", i, p)
		fs[name] = &fake{}
		conds = append(conds, fakeCond(name, ClassSuccess, p, fs[name]))
	}
	e := NewEvaluator(conds, Options{Sequential: true})
	ev, err := e.Evaluate(context.Background(), Input{Iteration: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c1-p90", "c3-p90", "c2-p50", "c0-p10", "c4-p0"}
	if got := names(ev.Results); !slices.Equal(got, want) {
		t.Errorf("results %v, want %v", got, want)
	}
	var order []string
	for _, x := range drain(e) {
		if x.Kind == EventConditionEvaluated {
			order = append(order, x.Condition)
		}
	}
	if !slices.Equal(order, want) {
		t.Errorf("evaluated in %v, want %v", order, want)
	}

	// stop_on_first: nothing after the first met condition is evaluated.
	fs["c2-p50"].met = always(true)
	e = NewEvaluator(conds, Options{Sequential: true, StopOnFirst: true, NoCache: true})
	ev, _ = e.Evaluate(context.Background(), Input{Iteration: 2})
	if got := names(ev.Results); !slices.Equal(got, want[:3]) || ev.TriggeredBy != "c2-p50" {
		t.Errorf("stop_on_first: %v triggered by %q", got, ev.TriggeredBy)
	}
	if fs["c0-p10"].calls.Load() != 1 || fs["c4-p0"].calls.Load() != 1 {
		t.Errorf("conditions after the first met one were evaluated")
	}
}

// realConds is one condition of most kinds, against a workdir.
func realConds(t *testing.T) []*Condition {
	cs, err := FromConfig([]config.Stop{
		{Kind: "max_iterations", Max: 10}, {Kind: "max_cost", USD: 2}, {Kind: "max_tokens", Tokens: 1000},
		{Kind: "consecutive_failures", Count: 3}, {Kind: "user_signal"}, {Kind: "never"},
		{Kind: "file_exists", Path: "nope"}, {Kind: "output_pattern", Pattern: "DONE"},
		{Kind: "command", Cmd: []string{"true"}, Priority: intp(55)},
		{Kind: "predicate", RTFS: `(audit.succeeded? "shell.exec")`},
		{Kind: "any", Conditions: []config.Stop{{Kind: "max_iterations", Max: 4}, {Kind: "never"}}},
	}, "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Requirement 2: parallel evaluation produces the same results.
func TestParallelMatchesSequential(t *testing.T) {
	t.Parallel()
	in := Input{Iteration: 4, CostUSD: 1, Tokens: 10, ConsecutiveFailures: 1, Workdir: t.TempDir(), Audit: traceIndex(), RunID: "run-1"}
	seq, err := NewEvaluator(realConds(t), Options{Sequential: true}).Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	par, err := NewEvaluator(realConds(t), Options{MaxParallel: 3}).Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	ignore := cmpopts.IgnoreFields(Result{}, "Duration")
	if d := cmp.Diff(seq.Results, par.Results, ignore); d != "" {
		t.Errorf("parallel differs from sequential (-seq +par):\n%s", d)
	}
	if !seq.ShouldStop || seq.TriggeredBy != par.TriggeredBy || seq.TriggeredBy != "command-9" {
		t.Errorf("decisions: %q vs %q", seq.TriggeredBy, par.TriggeredBy)
	}
}

// Requirement 3: the cache returns valid cached results — and only those:
// a changed input misses.
func TestCacheHitsOnSameInputs(t *testing.T) {
	t.Parallel()
	f := &fake{progress: func(in *Input) float64 { return float64(in.Iteration) / 10 }}
	e := NewEvaluator([]*Condition{fakeCond("f", ClassSuccess, 1, f)}, Options{})
	ctx := context.Background()
	first, _ := e.Evaluate(ctx, Input{Iteration: 1})
	second, _ := e.Evaluate(ctx, Input{Iteration: 1})
	if f.calls.Load() != 1 || first.Results[0].CacheHit || !second.Results[0].CacheHit || second.Results[0].Progress != 0.1 {
		t.Fatalf("calls %d, results %+v then %+v", f.calls.Load(), first.Results[0], second.Results[0])
	}
	third, _ := e.Evaluate(ctx, Input{Iteration: 2})
	if f.calls.Load() != 2 || third.Results[0].CacheHit || third.Results[0].Progress != 0.2 {
		t.Errorf("a new iteration was served from the cache: %+v", third.Results[0])
	}
	e.ClearCache()
	e.Evaluate(ctx, Input{Iteration: 2})
	if f.calls.Load() != 3 {
		t.Errorf("ClearCache kept the result")
	}
}

// Requirement 4: cached results of external checks expire after the TTL;
// pure ones do not need to.
func TestCacheTTLForExternalChecks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ext, pure := &fake{external: true}, &fake{}
	e := NewEvaluator([]*Condition{fakeCond("ext", ClassSuccess, 2, ext), fakeCond("pure", ClassSuccess, 1, pure)},
		Options{CacheTTL: 5 * time.Second, Now: clock})
	ctx := context.Background()
	in := Input{Iteration: 1}
	e.Evaluate(ctx, in)
	advance(4 * time.Second)
	ev, _ := e.Evaluate(ctx, in)
	if !ev.Results[0].CacheHit || ext.calls.Load() != 1 {
		t.Fatalf("within the TTL: %+v", ev.Results[0])
	}
	advance(time.Second)
	ev, _ = e.Evaluate(ctx, in)
	if ev.Results[0].CacheHit || ext.calls.Load() != 2 {
		t.Errorf("after the TTL the external check was not re-run: %+v", ev.Results[0])
	}
	if !ev.Results[1].CacheHit || pure.calls.Load() != 1 {
		t.Errorf("the pure check's unchanged inputs missed the cache: %+v", ev.Results[1])
	}
}

// Requirement 5: progress tracking detects changes.
func TestProgressTracking(t *testing.T) {
	t.Parallel()
	c := mustCond(t, config.Stop{Name: "iters", Kind: "max_iterations", Max: 4})
	e := NewEvaluator([]*Condition{c, mustCond(t, config.Stop{Kind: "never"})}, Options{})
	ctx := context.Background()
	var progressed [][]ProgressChange
	for _, it := range []int{1, 2, 2, 4} {
		ev, _ := e.Evaluate(ctx, Input{Iteration: it})
		progressed = append(progressed, ev.Progressed)
	}
	want := [][]ProgressChange{
		{{Condition: "iters", Current: 0.25, First: true}},
		{{Condition: "iters", Previous: 0.25, Current: 0.5}},
		nil,
		{{Condition: "iters", Previous: 0.5, Current: 1}},
	}
	if d := cmp.Diff(want, progressed); d != "" {
		t.Errorf("progress (-want +got):\n%s", d)
	}
	var evs []string
	for _, x := range drain(e) {
		if x.Kind == EventConditionProgressed {
			evs = append(evs, fmt.Sprintf("%s %.2f→%.2f", x.Condition, x.Previous, x.Current))
		}
	}
	if got := strings.Join(evs, ", "); got != "iters 0.00→0.25, iters 0.25→0.50, iters 0.50→1.00" {
		t.Errorf("progress events: %s", got)
	}
}

// Requirement 6: history keeps the last HistorySize evaluations in order.
func TestHistoryRing(t *testing.T) {
	t.Parallel()
	e := NewEvaluator([]*Condition{mustCond(t, config.Stop{Kind: "max_iterations", Max: 100})}, Options{HistorySize: 3})
	if len(e.History()) != 0 {
		t.Fatal("history not empty")
	}
	for i := 1; i <= 5; i++ {
		e.Evaluate(context.Background(), Input{Iteration: i})
	}
	var its []int
	for _, h := range e.History() {
		its = append(its, h.Iteration)
		if len(h.Results) != 1 {
			t.Errorf("entry %d has %d results", h.Iteration, len(h.Results))
		}
	}
	if !slices.Equal(its, []int{3, 4, 5}) {
		t.Errorf("history iterations %v, want [3 4 5]", its)
	}
	if d := NewEvaluator(nil, Options{}); cap(d.history.items) != 100 {
		t.Errorf("default history size %d", cap(d.history.items))
	}
}

// Requirement 7: every state change is an event, in order.
func TestEventsForEveryStateChange(t *testing.T) {
	t.Parallel()
	e := NewEvaluator([]*Condition{
		fakeCond("slow", ClassFailure, 90, &fake{block: true}),
		fakeCond("done", ClassSuccess, 50, &fake{met: always(true), progress: func(*Input) float64 { return 1 }}),
	}, Options{Sequential: true})
	e.conds[0].Timeout = 10 * time.Millisecond
	ev, err := e.Evaluate(context.Background(), Input{Iteration: 7})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, x := range drain(e) {
		if x.Iteration != 7 {
			t.Errorf("event %s has iteration %d", x.Kind, x.Iteration)
		}
		kinds = append(kinds, string(x.Kind)+":"+x.Condition)
	}
	want := "started:,condition_timeout:slow,condition_evaluated:slow,condition_evaluated:done,condition_progressed:done,stop_triggered:done,completed:"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	if !ev.ShouldStop || ev.Class != ClassSuccess {
		t.Errorf("evaluation %+v", ev)
	}
}

// Events never block: a full buffer drops and counts.
func TestEventsDropWhenFull(t *testing.T) {
	t.Parallel()
	e := NewEvaluator([]*Condition{mustCond(t, config.Stop{Kind: "never"})}, Options{EventBuffer: 2})
	for i := 1; i <= 3; i++ {
		if _, err := e.Evaluate(context.Background(), Input{Iteration: i}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(drain(e)); got != 2 || e.Dropped() != 7 { // 3 evaluations × (started, evaluated, completed) + 1 progress-free
		t.Errorf("kept %d events, dropped %d", got, e.Dropped())
	}
}

// Requirement 8: a condition that overruns its timeout is reported as
// timed out — not met by default, met with timeout_class.
func TestTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeoutClass string
		met          bool
		class        Class
	}{{"", false, ClassSuccess}, {"not_met", false, ClassSuccess}, {"failure", true, ClassFailure}} {
		c := fakeCond("slow", ClassSuccess, 60, &fake{block: true})
		c.Timeout, c.TimeoutClass = 20*time.Millisecond, tc.timeoutClass
		e := NewEvaluator([]*Condition{c}, Options{})
		ev, err := e.Evaluate(context.Background(), Input{Iteration: 1})
		if err != nil {
			t.Fatal(err)
		}
		r := ev.Results[0]
		if !r.TimedOut || r.Met != tc.met || r.Class != tc.class || !strings.Contains(r.Reason, "timed out after 20ms") {
			t.Errorf("timeout_class %q: %+v", tc.timeoutClass, r)
		}
		if ev.ShouldStop != tc.met {
			t.Errorf("timeout_class %q: should_stop %t", tc.timeoutClass, ev.ShouldStop)
		}
		// A timed-out result is not cached: the next evaluation tries again.
		ev, _ = e.Evaluate(context.Background(), Input{Iteration: 1})
		if ev.Results[0].CacheHit {
			t.Errorf("timed-out result was cached")
		}
	}
}

// A sleeping command is killed at its timeout; in parallel the other
// conditions finish first and are not held back.
func TestSlowCommandDelaysOthersOnlyUntilItsTimeout(t *testing.T) {
	t.Parallel()
	needShell(t)
	conds, err := FromConfig([]config.Stop{
		{Name: "slow", Kind: "command", Cmd: []string{"sh", "-c", "sleep 60 & sleep 60"}, Priority: intp(99), Timeout: dur(time.Second)},
		{Name: "iters", Kind: "max_iterations", Max: 3},
		{Name: "fast", Kind: "command", Cmd: []string{"true"}},
	}, "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, sequential := range []bool{false, true} {
		e := NewEvaluator(conds, Options{Sequential: sequential, NoCache: true})
		ev, err := e.Evaluate(context.Background(), Input{Iteration: 3, Workdir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(ev.Results); !slices.Equal(got, []string{"slow", "iters", "fast"}) {
			t.Fatalf("results out of priority order: %v", got)
		}
		slow := ev.Results[0]
		if !slow.TimedOut || slow.Met || !strings.Contains(slow.Evidence, "sleep 60") {
			t.Errorf("slow: %+v", slow)
		}
		if !ev.Results[2].Met || ev.TriggeredBy != "fast" { // success beats the limit of iters
			t.Errorf("decision %q, fast %+v", ev.TriggeredBy, ev.Results[2])
		}
		var order []string
		for _, x := range drain(e) {
			if x.Kind == EventConditionEvaluated || x.Kind == EventConditionTimeout {
				order = append(order, string(x.Kind)+":"+x.Condition)
			}
		}
		if !sequential && (order[len(order)-1] != "condition_evaluated:slow" || order[len(order)-2] != "condition_timeout:slow") {
			t.Errorf("parallel: the others waited for the slow command: %v", order)
		}
	}
}

func TestFailureBeatsSuccess(t *testing.T) {
	t.Parallel()
	for _, opts := range []Options{{Sequential: true}, {}} {
		e := NewEvaluator([]*Condition{
			fakeCond("tests-green", ClassSuccess, 60, &fake{met: always(true)}),
			fakeCond("budget", ClassLimit, 80, &fake{met: always(true)}),
			fakeCond("errors", ClassFailure, 10, &fake{met: always(true)}),
			fakeCond("errors-high", ClassFailure, 20, &fake{met: always(true)}),
		}, opts)
		ev, _ := e.Evaluate(context.Background(), Input{Iteration: 1})
		if !ev.ShouldStop || ev.Class != ClassFailure || ev.TriggeredBy != "errors-high" || ev.Trigger().Priority != 20 {
			t.Errorf("%+v: triggered by %q (%s)", opts, ev.TriggeredBy, ev.Class)
		}
	}
	e := NewEvaluator([]*Condition{
		fakeCond("budget", ClassLimit, 80, &fake{met: always(true)}),
		fakeCond("done", ClassSuccess, 10, &fake{met: always(true)}),
		fakeCond("ctrl-c", ClassAbort, 0, &fake{met: func(in *Input) bool { return in.UserSignal }}),
	}, Options{})
	if ev, _ := e.Evaluate(context.Background(), Input{Iteration: 1}); ev.TriggeredBy != "done" {
		t.Errorf("success should beat limit: %q", ev.TriggeredBy)
	}
	if ev, _ := e.Evaluate(context.Background(), Input{Iteration: 1, UserSignal: true}); ev.TriggeredBy != "ctrl-c" || ev.Class != ClassAbort {
		t.Errorf("abort should beat everything: %q", ev.TriggeredBy)
	}
}

func TestStopOnFirstParallel(t *testing.T) {
	t.Parallel()
	low := &fake{block: true}
	e := NewEvaluator([]*Condition{
		fakeCond("first", ClassSuccess, 90, &fake{met: always(true)}),
		fakeCond("blocked", ClassSuccess, 10, low),
	}, Options{StopOnFirst: true, MaxParallel: 1})
	ev, err := e.Evaluate(context.Background(), Input{Iteration: 1})
	if err != nil || !slices.Equal(names(ev.Results), []string{"first"}) {
		t.Fatalf("results %v, %v", names(ev.Results), err)
	}
}

func TestAddRemoveDuringEvaluation(t *testing.T) {
	t.Parallel()
	e := NewEvaluator([]*Condition{mustCond(t, config.Stop{Kind: "never", Name: "base"})}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ctx.Err() == nil; i++ {
			if _, err := e.Evaluate(ctx, Input{Iteration: i}); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		}
	}()
	for i := range 200 {
		name := fmt.Sprintf("c%d", i%7)
		if i%2 == 0 {
			_ = e.Add(mustCond(t, config.Stop{Name: name, Kind: "max_iterations", Max: 1000, Priority: intp(i % 5)})) // a duplicate is refused
		} else {
			e.Remove(name)
		}
	}
	cancel()
	wg.Wait()
	if err := e.Add(mustCond(t, config.Stop{Kind: "never", Name: "base"})); err == nil {
		t.Error("duplicate name accepted")
	}
	cs := e.Conditions()
	if !slices.IsSortedFunc(cs, func(a, b *Condition) int { return b.Priority - a.Priority }) {
		t.Errorf("conditions out of priority order")
	}
	if !e.Remove("base") || e.Remove("base") {
		t.Error("Remove reports wrongly")
	}
}

func TestDebugLogsInputsCacheAndDuration(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := NewEvaluator([]*Condition{mustCond(t, config.Stop{Name: "iters", Kind: "max_iterations", Max: 9})}, Options{Debug: true, Logger: log})
	e.Evaluate(context.Background(), Input{Iteration: 2})
	e.Evaluate(context.Background(), Input{Iteration: 2})
	out := buf.String()
	for _, want := range []string{`name=iters`, `inputs="iteration=2 max=9"`, `cache=miss`, `cache=hit`, `duration=`, `fingerprint=`} {
		if !strings.Contains(out, want) {
			t.Errorf("debug log lacks %s:\n%s", want, out)
		}
	}
	buf.Reset()
	NewEvaluator(e.Conditions(), Options{Logger: log}).Evaluate(context.Background(), Input{Iteration: 2})
	if buf.Len() != 0 {
		t.Errorf("logged without Debug: %s", buf.String())
	}
}

func TestEvaluationsRecordedInLedger(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := NewEvaluator([]*Condition{
		mustCond(t, config.Stop{Name: "iters", Kind: "max_iterations", Max: 2}),
		mustCond(t, config.Stop{Name: "never", Kind: "never"}),
	}, Options{Ledger: st})
	var evs []Evaluation
	for i := 1; i <= 2; i++ {
		ev, err := e.Evaluate(context.Background(), Input{Iteration: i, RunID: "run-9"})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	acts, err := st.ByRun("run-9")
	if err != nil || len(acts) != 2 {
		t.Fatalf("%d actions, %v", len(acts), err)
	}
	for i, a := range acts {
		got, err := EvaluationFromAction(&a)
		if err != nil {
			t.Fatal(err)
		}
		want := evs[i]
		opts := []cmp.Option{cmpopts.EquateApproxTime(time.Microsecond), cmpopts.IgnoreFields(Result{}, "Duration"),
			cmpopts.IgnoreFields(Evaluation{}, "Duration")}
		if d := cmp.Diff(want, got, opts...); d != "" {
			t.Errorf("evaluation %d read back differs (-want +got):\n%s", i+1, d)
		}
	}
	if acts[1].Metadata["triggered_by"].Str() != "iters" || !acts[1].Metadata["should_stop"].AsBool() {
		t.Errorf("metadata %v", acts[1].Metadata)
	}
}
