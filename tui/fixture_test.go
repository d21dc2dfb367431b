package tui

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// The scripted run: a quickstart-like loop with fixed ids, times and key,
// so that every hash, duration and elapsed time in a golden file is the
// same on every machine.

var (
	fixtureStart = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	fixtureKey   = ed25519.NewKeyFromSeed([]byte(strings.Repeat("r", ed25519.SeedSize)))
)

const fixtureRun = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f40c2"

const fixtureTOML = `
[intent]
goal = "Count to three, surviving a failure on the way"

[model]
provider = "static"

[plan]
rtfs = '(do (step "Greet" (call :ccos.echo {:message "hello"})))'

[[stop]]
name = "counted-to-three"
kind = "predicate"
rtfs = '(>= (audit.count "Count" :succeeded) 3)'

[[stop]]
name = "keeps-failing"
kind = "consecutive_failures"
count = 2

[[stop]]
name = "enough"
kind = "max_iterations"
max = 3

[[stop]]
name = "budget"
kind = "max_cost"
usd = 5.0
`

func fixtureConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fixtureTOML), "/ralph/ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const fixturePlan = `(do (step "Greet" (call :ccos.echo {:message (str (:greeting ctx) " from iteration " (:iteration ctx))})) ` +
	`(step "Count" (let [key (str "quickstart/" (:run-id ctx) "/count") n (or (call :kv.get {:key key}) 0)] (call :kv.put {:key key :value (inc n)}))) ` +
	`(step "Check" (if (= (:iteration ctx) 2) (throw "simulated failure in iteration 2") :ok)))`

// scripter builds the run's actions.
type scripter struct {
	acts  []ledger.Action
	clock time.Time
	n     int
}

func (s *scripter) id() string {
	s.n++
	return fmt.Sprintf("0193a1b2-0000-7000-8000-%012d", s.n)
}

// add records an action dur milliseconds after the previous one.
func (s *scripter) add(a ledger.Action, ms int64) string {
	if a.ActionID == "" {
		a.ActionID = s.id()
	}
	s.clock = s.clock.Add(time.Duration(ms) * time.Millisecond)
	a.RunID, a.IntentID, a.Timestamp = fixtureRun, fixtureRun, s.clock
	s.acts = append(s.acts, a)
	return a.ActionID
}

func kwv(s string) rtfs.Value { return rtfs.Keyword(s) }

// scriptRun scripts a run of iters iterations (iteration 2 fails after a
// compensated reservation) and, when end is set, its closing action
// (max_iterations fires after iteration 3). It stops early after stopAt
// actions when stopAt > 0.
func scriptRun(iters int, end bool) []ledger.Action {
	s := &scripter{clock: fixtureStart}
	run := s.add(ledger.Action{Type: ledger.RunStarted, FunctionName: "Count to three, surviving a failure on the way",
		Success: true, Metadata: map[string]rtfs.Value{"provider": rtfs.String("static"), "model": rtfs.String(""),
			"goal": rtfs.String("Count to three, surviving a failure on the way")}}, 0)
	prev := map[string]float64{}
	for it := 1; it <= iters; it++ {
		iter := s.add(ledger.Action{Type: ledger.IterationStarted, ParentActionID: run, FunctionName: fmt.Sprintf("iteration %d", it),
			Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it))}}, 40)
		s.add(ledger.Action{Type: ledger.PlanGenerated, ParentActionID: iter, FunctionName: "static", Success: true,
			Arguments: []rtfs.Value{rtfs.String(fixturePlan)},
			Metadata:  map[string]rtfs.Value{"mode": rtfs.String("static"), "repairs": rtfs.Int(0), "model": rtfs.String("")}}, 2)
		dec := s.add(ledger.Action{Type: ledger.GovernanceDecision, ParentActionID: iter, FunctionName: "admission", Success: true,
			Metadata: map[string]rtfs.Value{ledger.MetaConstitutionalRuleID: rtfs.String("allow,compiles")}}, 1)
		plan := s.add(ledger.Action{Type: ledger.PlanStarted, ParentActionID: iter, FunctionName: fmt.Sprintf("iteration-%d.rtfs", it),
			Arguments: []rtfs.Value{rtfs.String(fixturePlan)}, Success: true,
			Metadata: map[string]rtfs.Value{ledger.MetaDelegationDecisionID: rtfs.String(dec)}}, 1)
		call := func(parent, fn string, args rtfs.Value, res rtfs.Value, ms int64) {
			s.add(ledger.Action{Type: ledger.CapabilityCall, ParentActionID: parent, FunctionName: fn, Arguments: []rtfs.Value{args},
				Result: res, Success: true, DurationMS: ms, Metadata: map[string]rtfs.Value{
					ledger.MetaCapabilityAttestationID: rtfs.String("att-" + fn), ledger.MetaConstitutionalRuleID: rtfs.String("allow"),
					ledger.MetaDelegationDecisionID: rtfs.String(dec)}}, ms)
		}
		step := func(name string, ms int64, body func(step string), fail string) {
			st := s.add(ledger.Action{Type: ledger.PlanStepStarted, ParentActionID: plan, FunctionName: name, Success: true}, 1)
			body(st)
			end := ledger.Action{Type: ledger.PlanStepCompleted, ParentActionID: st, FunctionName: name, Success: true, DurationMS: ms}
			if fail != "" {
				end.Type, end.Success, end.ErrorMessage = ledger.PlanStepFailed, false, fail
			}
			s.add(end, ms)
		}
		msg := fmt.Sprintf("hello from iteration %d", it)
		step("Greet", 3, func(st string) {
			call(st, "ccos.echo", rtfs.MapValue(rtfs.NewMap(kwv("message"), rtfs.String(msg))), rtfs.String(msg), 1)
		}, "")
		step("Count", 12, func(st string) {
			key := rtfs.MapValue(rtfs.NewMap(kwv("key"), rtfs.String("quickstart/count")))
			call(st, "kv.get", key, rtfs.Int(int64(it-1)), 2)
			call(st, "kv.put", rtfs.MapValue(rtfs.NewMap(kwv("key"), rtfs.String("quickstart/count"), kwv("value"), rtfs.Int(int64(it)))),
				rtfs.Int(int64(it)), 4)
		}, "")
		var reserve string
		step("Reserve", 2, func(st string) {
			reserve = st
			call(st, "kv.put", rtfs.MapValue(rtfs.NewMap(kwv("key"), rtfs.String("quickstart/reserved"), kwv("value"), rtfs.Int(int64(it)))),
				rtfs.Int(int64(it)), 1)
		}, "")
		failed := it == 2
		errMsg := "iteration-2.rtfs:13:7: simulated failure in iteration 2: the reservation is released"
		if failed {
			step("Check", 1, func(string) {}, errMsg)
			comp := s.add(ledger.Action{Type: ledger.CompensationStarted, ParentActionID: reserve, FunctionName: "Release", Success: true}, 1)
			s.add(ledger.Action{Type: ledger.CompensationCompleted, ParentActionID: comp, FunctionName: "Release", Success: true, DurationMS: 2}, 2)
			s.add(ledger.Action{Type: ledger.PlanAborted, ParentActionID: plan, FunctionName: "iteration-2.rtfs", ErrorMessage: errMsg, DurationMS: 25}, 1)
			s.add(ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iter, FunctionName: "iteration 2", ErrorMessage: errMsg,
				DurationMS: 31, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(2), "status": rtfs.String("failed")}}, 1)
		} else {
			step("Check", 1, func(string) {}, "")
			s.add(ledger.Action{Type: ledger.PlanCompleted, ParentActionID: plan, FunctionName: fmt.Sprintf("iteration-%d.rtfs", it),
				Success: true, DurationMS: 24}, 1)
			s.add(ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iter, FunctionName: fmt.Sprintf("iteration %d", it),
				Success: true, DurationMS: 30, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it)), "status": rtfs.String("ok")}}, 1)
		}
		ev := fixtureEvaluation(it, failed, prev)
		s.add(evaluationAction(run, ev), 1)
	}
	if end {
		s.add(ledger.Action{Type: ledger.RunStopped, ParentActionID: run, FunctionName: "enough", ErrorMessage: "max_iterations 3 reached",
			Metadata: map[string]rtfs.Value{"condition": rtfs.String("enough"), "class": rtfs.String("limit"),
				"reason": rtfs.String("max_iterations 3 reached"), "evidence": rtfs.String("3 iterations completed; iteration 3 of at most 3")}}, 1)
	}
	return s.acts
}

// fixtureEvaluation is iteration it's evaluation: the iteration count and
// failure streak grow, the predicate never holds, max_iterations fires at 3.
func fixtureEvaluation(it int, failed bool, prev map[string]float64) stop.Evaluation {
	fails := 0
	if failed {
		fails = 1
	}
	rs := []stop.Result{
		{Name: "enough", Kind: "max_iterations", Class: stop.ClassLimit, Priority: 80, Met: it >= 3,
			Reason: fmt.Sprintf("iteration %d of at most 3", it), Progress: float64(it) / 3, Detail: fmt.Sprintf("%d/3", it),
			Evidence: fmt.Sprintf("iteration %d", it), Duration: 4 * time.Microsecond},
		{Name: "budget", Kind: "max_cost", Class: stop.ClassLimit, Priority: 80, Reason: "$0.00 of $5.00", Detail: "$0.00/$5.00",
			Duration: 3 * time.Microsecond, CacheHit: it > 1},
		{Name: "keeps-failing", Kind: "consecutive_failures", Class: stop.ClassFailure, Priority: 70,
			Reason: fmt.Sprintf("%d of 2 consecutive failures", fails), Progress: float64(fails) / 2,
			Detail: fmt.Sprintf("%d/2 failures", fails), Duration: 2 * time.Microsecond},
		{Name: "counted-to-three", Kind: "predicate", Class: stop.ClassSuccess, Priority: 55, TimedOut: it == 2,
			Reason: "predicate does not hold: (>= (audit.count \"Count\" :succeeded) 3)", Detail: "does not hold",
			Evidence: "(audit.count \"Count\" :succeeded) → true", Duration: 41 * time.Microsecond},
	}
	ev := stop.Evaluation{Iteration: it, Results: rs, At: fixtureStart.Add(time.Duration(it) * time.Second), Duration: 80 * time.Microsecond}
	for _, r := range rs {
		p, seen := prev[r.Name]
		if !seen || p != r.Progress {
			ev.Progressed = append(ev.Progressed, stop.ProgressChange{Condition: r.Name, Previous: p, Current: r.Progress, First: !seen})
		}
		prev[r.Name] = r.Progress
	}
	if it >= 3 {
		ev.ShouldStop, ev.Class, ev.TriggeredBy, ev.Reason = true, stop.ClassLimit, "enough", "max_iterations 3 reached"
	}
	return ev
}

// evaluationAction is the ledger form of an evaluation, as the stop
// package records it (StopConditionsEvaluated; see stop/history.go).
func evaluationAction(parent string, ev stop.Evaluation) ledger.Action {
	results := make([]rtfs.Value, len(ev.Results))
	for i, r := range ev.Results {
		results[i] = rtfs.MapValue(rtfs.NewMap(
			kwv("name"), rtfs.String(r.Name), kwv("kind"), rtfs.String(r.Kind), kwv("class"), rtfs.String(string(r.Class)),
			kwv("priority"), rtfs.Int(int64(r.Priority)), kwv("met"), rtfs.Bool(r.Met), kwv("reason"), rtfs.String(r.Reason),
			kwv("progress"), rtfs.Float(r.Progress), kwv("detail"), rtfs.String(r.Detail), kwv("evidence"), rtfs.String(r.Evidence),
			kwv("duration-us"), rtfs.Int(r.Duration.Microseconds()), kwv("cache-hit"), rtfs.Bool(r.CacheHit),
			kwv("timed-out"), rtfs.Bool(r.TimedOut)))
	}
	progressed := make([]rtfs.Value, len(ev.Progressed))
	for i, p := range ev.Progressed {
		progressed[i] = rtfs.MapValue(rtfs.NewMap(kwv("condition"), rtfs.String(p.Condition),
			kwv("previous"), rtfs.Float(p.Previous), kwv("current"), rtfs.Float(p.Current), kwv("first"), rtfs.Bool(p.First)))
	}
	res := rtfs.MapValue(rtfs.NewMap(
		kwv("iteration"), rtfs.Int(int64(ev.Iteration)), kwv("should-stop"), rtfs.Bool(ev.ShouldStop),
		kwv("class"), rtfs.String(string(ev.Class)), kwv("triggered-by"), rtfs.String(ev.TriggeredBy),
		kwv("reason"), rtfs.String(ev.Reason), kwv("results"), rtfs.Vector(results),
		kwv("progressed"), rtfs.Vector(progressed), kwv("at"), rtfs.String(ev.At.UTC().Format(time.RFC3339Nano)),
		kwv("duration-us"), rtfs.Int(ev.Duration.Microseconds())))
	return ledger.Action{Type: ledger.StopConditionsEvaluated, ParentActionID: parent, FunctionName: "stop", Success: true,
		Result: res, Metadata: map[string]rtfs.Value{
			"iteration": rtfs.Int(int64(ev.Iteration)), "should_stop": rtfs.Bool(ev.ShouldStop),
			"class": rtfs.String(string(ev.Class)), "triggered_by": rtfs.String(ev.TriggeredBy)}}
}

// fixtureStore appends acts, one commit each, to an in-memory store
// signed with the fixed key, and returns them as stored.
func fixtureStore(t testing.TB, acts []ledger.Action) (*ledger.Store, []ledger.Action) {
	t.Helper()
	st, err := ledger.Open(ledger.Options{InMemory: true, PrivateKey: fixtureKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i := range acts {
		a := acts[i]
		if _, err := st.Append(context.Background(), &a); err != nil {
			t.Fatal(err)
		}
	}
	stored := make([]ledger.Action, 0, len(acts))
	if err := st.Range(1, func(a ledger.Action) error { stored = append(stored, a); return nil }); err != nil {
		t.Fatal(err)
	}
	return st, stored
}

// testModel is a model over a recorded or live-looking run with the ASCII
// profile and a fixed clock, sized w×h.
func testModel(t testing.TB, st *ledger.Store, live bool, w, h int) *model {
	t.Helper()
	o := &Options{Store: st, Config: fixtureConfig(t), RunID: fixtureRun,
		Now: func() time.Time { return fixtureStart.Add(4*time.Minute + 12*time.Second) }}
	m := newModel(o, newStyles(&strings.Builder{}, termenv.Ascii))
	if live {
		// A live run without a runner: the model shows what the bus says.
		m.live, m.loading = true, false
		m.keys.live(true)
		m.chain.now = m.now
	}
	m.Update(sizeMsg(w, h))
	return m
}

// feed sends acts to m as bus events, as the forwarder does.
func feed(m *model, acts []ledger.Action) {
	evs := make([]loop.Event, len(acts))
	for i := range acts {
		evs[i] = loop.Event{Kind: loop.EventAction, Action: &acts[i], Time: acts[i].Timestamp}
	}
	m.Update(eventsMsg{events: evs})
}
