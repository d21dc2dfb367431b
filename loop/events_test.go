package loop

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
)

// collect reads the bus until the run's closing action has been delivered
// and the final state reported.
func collect(t *testing.T, events <-chan Event) []Event {
	t.Helper()
	var got []Event
	closed := false
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the event stream closed before the run ended")
			}
			got = append(got, e)
			if e.Kind == EventAction && IsRunEnd(e.Action.Type) {
				closed = true
			}
			if closed && e.Kind == EventState && e.State != StateRunning && e.State != StatePaused {
				return got
			}
		case <-timeout:
			t.Fatalf("no final state after 30s; got %d events", len(got))
		}
	}
}

// until reads events up to and including the first that match accepts
// (or until the stream closes) and returns them.
func until(events <-chan Event, match func(Event) bool) []Event {
	var got []Event
	for e := range events {
		got = append(got, e)
		if match(e) {
			break
		}
	}
	return got
}

func isPaused(e Event) bool { return e.Kind == EventState && e.State == StatePaused }

func kinds(evs []Event, k EventKind) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func TestBusDeliversTheRunInOrder(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(do (step "A" (call :ccos.echo {:message "a"})) (step "B" (call :ccos.echo {:message "b"})))'
[[stop]]
name = "three"
kind = "max_iterations"
max = 3
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, events)
	acts, err := fx.store.ByRun(out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	delivered := kinds(got, EventAction)
	if len(delivered) != len(acts) {
		t.Fatalf("%d actions delivered, the run has %d", len(delivered), len(acts))
	}
	for i, e := range delivered {
		if e.Action.Seq != acts[i].Seq || e.RunID != out.RunID {
			t.Fatalf("action %d: seq %d run %s, want seq %d", i, e.Action.Seq, e.RunID, acts[i].Seq)
		}
	}
	if n := len(kinds(got, EventPlan)); n != 3 {
		t.Errorf("%d plan events, want 3", n)
	}
	conds := kinds(got, EventConditions)
	if len(conds) != 3 || conds[2].Evaluation.TriggeredBy != "three" || conds[2].Iteration != 3 {
		t.Errorf("condition events %+v", conds)
	}
	states := stateSeq(got)
	if len(states) != 2 || states[0] != StateRunning || states[1] != StateStopped {
		t.Errorf("states %v, want [running stopped]", states)
	}
	// Each transient event comes after the actions that preceded it: running
	// after RunStarted, stopped after RunStopped.
	for i, e := range got {
		if e.Kind == EventState && e.State == StateStopped && (i == 0 || got[i-1].Kind != EventAction || got[i-1].Action.Type != ledger.RunStopped) {
			t.Errorf("the stopped state is not right after RunStopped: event %d follows %v", i, got[i-1].Kind)
		}
	}
	if got[0].Kind != EventAction || got[0].Action.Type != ledger.RunStarted || got[1].Kind != EventState {
		t.Errorf("the stream starts %v %v, want RunStarted then the running state", got[0].Kind, got[1].Kind)
	}
	if r.Events().State() != StateStopped {
		t.Errorf("bus state %q", r.Events().State())
	}
}

// A consumer that reads nothing while the run goes on never blocks it, and
// afterwards gets every action from the ledger plus a count of the
// transient events it lost.
func TestBusSlowConsumerNeverBlocksTheRunner(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "max_iterations"
max = 50
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	log := slog.New(r.Events().LogHandler(slog.LevelInfo))
	for i := range subscriberQueue + 500 { // the stream's own buffer holds a few more
		log.Info("line", "i", i)
	}
	out, err := r.Run(context.Background()) // nobody reads events meanwhile
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, events)
	acts, _ := fx.store.ByRun(out.RunID)
	if n := len(kinds(got, EventAction)); n != len(acts) {
		t.Errorf("%d actions delivered, the run has %d", n, len(acts))
	}
	dropped := kinds(got, EventDropped)
	if len(dropped) != 1 || dropped[0].Dropped < 400 {
		t.Errorf("dropped events %+v, want one reporting at least 400", dropped)
	}
	logs := kinds(got, EventLog)
	if len(logs) == 0 || logs[0].Log.Msg != "line" || logs[0].Log.Attrs != "i=0" {
		t.Errorf("first log event %+v", logs)
	}
}

func TestPauseTakesEffectAfterTheCurrentStep(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(do (step "A" (call :test.wait {})) (step "B" (call :ccos.echo {:message "b"})))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	fx.hold, fx.waiting = make(chan struct{}), make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	done := runInBackground(t, r)
	<-fx.waiting // step A is running
	r.Pause()
	close(fx.hold) // A completes; B must wait
	until(events, isPaused)
	acts, _ := fx.store.ByRun(r.RunID())
	for _, a := range acts {
		if a.Type == ledger.PlanStepStarted && a.FunctionName == "B" {
			t.Fatal("step B started while the run was paused")
		}
	}
	rec, _, _ := fx.store.KV().Get(ctx, RunKVPrefix+r.RunID())
	if s := rec.AsMap().GetKey("state").Str(); s != StatePaused {
		t.Errorf("stored state %q while paused", s)
	}
	r.Resume()
	out := <-done
	if out.ExitCode != ExitLimit || out.Iterations != 1 {
		t.Fatalf("outcome %+v", out)
	}
	started := runTypes(t, fx, out.RunID, ledger.PlanStepCompleted)
	if len(started) != 2 {
		t.Errorf("%d steps completed, want A and B", len(started))
	}
}

func TestSkipIterationCancelsOnlyTheCurrentIteration(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "A" (call :test.wait {}))'
[[stop]]
kind = "max_iterations"
max = 2
`, nil)
	fx.hold, fx.waiting = make(chan struct{}), make(chan struct{}, 2)
	done := runInBackground(t, r)
	<-fx.waiting
	r.SkipIteration()
	<-fx.waiting // iteration 2 is waiting: let it finish
	close(fx.hold)
	out := <-done
	if out.Iterations != 2 || out.ExitCode != ExitLimit {
		t.Fatalf("outcome %+v", out)
	}
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if len(iters) != 2 || iters[0].Metadata["status"].Str() != "skipped" || iters[1].Metadata["status"].Str() != "ok" {
		t.Fatalf("iterations %v %v", iters[0].Metadata["status"], iters[1].Metadata["status"])
	}
}

func TestAbortEndsTheRunAsAborted(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "A" (call :test.wait {}))'
[[stop]]
kind = "never"
`, nil)
	fx.hold, fx.waiting = make(chan struct{}), make(chan struct{}, 1)
	done := runInBackground(t, r)
	<-fx.waiting
	r.Abort()
	out := <-done
	if out.ExitCode != ExitAborted || out.TriggeredBy != "user_abort" || out.Reason != "aborted by the user" {
		t.Fatalf("outcome %+v", out)
	}
	if n := len(runTypes(t, fx, out.RunID, ledger.RunAborted)); n != 1 {
		t.Errorf("%d RunAborted", n)
	}
}

// Abort while paused still ends the run.
func TestAbortWhilePaused(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, `
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "never"
`, nil)
	r.Pause()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, 1)
	done := runInBackground(t, r)
	until(events, isPaused)
	r.Abort()
	if out := <-done; out == nil || out.ExitCode != ExitAborted || out.Iterations != 0 {
		t.Fatalf("outcome %+v", out)
	}
}

func stateSeq(evs []Event) []string {
	var out []string
	for _, e := range kinds(evs, EventState) {
		out = append(out, e.State)
	}
	return out
}

// A run aborted while paused goes from paused to aborted: it never runs
// again, so it never reports running in between.
func TestAbortWhilePausedNeverReportsRunning(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "never"
`, nil)
	r.Pause()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	done := runInBackground(t, r)
	got := until(events, isPaused)
	r.Abort()
	got = append(got, collect(t, events)...)
	<-done
	if s := strings.Join(stateSeq(got), " "); s != "running paused aborted" {
		t.Errorf("states %q, want \"running paused aborted\"", s)
	}
}

// SkipIteration while paused cancels the iteration; the run stays paused
// (it does not report running) until Resume, and the next iteration waits.
func TestSkipWhilePausedStaysPaused(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(do (step "A" (call :test.wait {})) (step "B" (call :ccos.echo {:message "b"})))'
[[stop]]
kind = "max_iterations"
max = 2
`, nil)
	fx.hold, fx.waiting = make(chan struct{}), make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	done := runInBackground(t, r)
	<-fx.waiting
	r.Pause()
	close(fx.hold) // A completes; the run pauses before B
	got := until(events, isPaused)
	r.SkipIteration()
	// iteration 1 closes as skipped while the run stays paused
	got = append(got, until(events, func(e Event) bool {
		return e.Kind == EventAction && e.Action.Type == ledger.IterationCompleted
	})...)
	if !r.Paused() || r.Events().State() != StatePaused {
		t.Fatalf("after the skip: paused %v, state %q", r.Paused(), r.Events().State())
	}
	r.Resume()
	got = append(got, collect(t, events)...)
	out := <-done
	if out.Iterations != 2 {
		t.Fatalf("outcome %+v", out)
	}
	if s := strings.Join(stateSeq(got), " "); s != "running paused running stopped" {
		t.Errorf("states %q, want \"running paused running stopped\"", s)
	}
	iters := runTypes(t, fx, out.RunID, ledger.IterationCompleted)
	if iters[0].Metadata["status"].Str() != "skipped" || iters[1].Metadata["status"].Str() != "ok" {
		t.Errorf("iterations %v %v", iters[0].Metadata["status"], iters[1].Metadata["status"])
	}
}

// Pause during the delay between iterations takes effect at once: there is
// no step executing, so the state becomes paused without waiting the delay out.
func TestPauseDuringTheDelayTakesEffectAtOnce(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[loop]
delay = "1h"
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "max_iterations"
max = 2
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	done := runInBackground(t, r)
	until(events, func(e Event) bool { return e.Kind == EventConditions }) // iteration 1 evaluated: the delay begins
	r.Pause()
	timeout := time.After(10 * time.Second)
wait:
	for {
		select {
		case e := <-events:
			if isPaused(e) {
				break wait
			}
		case <-timeout:
			r.Abort()
			<-done
			t.Fatal("no paused state 10s after Pause during the delay")
		}
	}
	r.Abort()
	if out := <-done; out == nil || out.ExitCode != ExitAborted || out.Iterations != 1 {
		t.Fatalf("outcome %+v", out)
	}
}

// A consumer that subscribes while the run waits for an approval learns
// the state and gets the pending request.
func TestLateSubscriberGetsStateAndPendingApproval(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "max_iterations"
max = 1
`, nil)
	asked, answer := make(chan struct{}), make(chan bool)
	r.o.Approve = func(ctx context.Context, _ int, _ string) (bool, error) {
		close(asked)
		return <-answer, nil
	}
	done := runInBackground(t, r)
	<-asked
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	first, second := <-events, <-events
	if first.Kind != EventState || first.State != StateRunning {
		t.Errorf("first event %v %q, want the running state", first.Kind, first.State)
	}
	if second.Kind != EventApprove || second.Plan == nil || second.Plan.Iteration != 1 {
		t.Errorf("second event %v %+v, want the pending approval", second.Kind, second.Plan)
	}
	answer <- true
	if out := <-done; out.ExitCode != ExitLimit {
		t.Errorf("outcome %+v", out)
	}
}

// runInBackground runs r and delivers its outcome (nil when Run failed,
// which fails the test).
func runInBackground(t *testing.T, r *Runner) <-chan *Outcome {
	t.Helper()
	done := make(chan *Outcome, 1)
	go func() {
		out, err := r.Run(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	return done
}

// The delay between iterations is published with when it ends, for a
// countdown; a consumer that subscribes during the delay gets it too.
func TestDelayIsPublished(t *testing.T) {
	t.Parallel()
	r, fx := newRunner(t, `
[loop]
delay = "1h"
[plan]
rtfs = '(step "A" (call :ccos.echo {:message "a"}))'
[[stop]]
kind = "max_iterations"
max = 2
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events().Subscribe(ctx, fx.store.Head().Seq+1)
	done := runInBackground(t, r)
	evs := until(events, func(e Event) bool { return e.Kind == EventDelay })
	d := evs[len(evs)-1]
	if d.Iteration != 1 || d.Until.Sub(d.Time) != time.Hour || !strings.Contains(d.Text, "before iteration 2") {
		t.Errorf("delay event %+v", d)
	}
	late := until(r.Events().Subscribe(ctx, fx.store.Head().Seq+1), func(e Event) bool { return e.Kind == EventDelay })
	if got := late[len(late)-1]; !got.Until.Equal(d.Until) {
		t.Errorf("late subscriber's delay until %v, want %v", got.Until, d.Until)
	}
	r.Abort()
	if out := <-done; out == nil || out.ExitCode != ExitAborted {
		t.Fatalf("outcome %+v", out)
	}
}

// A consumer that subscribes while an agent call runs gets what the call
// streamed so far (the latest call's only, within the scrollback's bounds),
// then what comes after.
func TestLateSubscriberGetsTheRunningCallsOutput(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := NewBus(st, "run-1")
	say := func(call, text string) {
		b.publish(Event{Kind: EventAgent, CallID: call, Agent: &agent.Event{Kind: agent.EventText, Text: text}, Time: time.Now()})
	}
	say("call-1", "from the call before")
	say("call-2", "line 1")
	say("call-2", "line 2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := b.Subscribe(ctx, 1)
	for _, want := range []string{"line 1", "line 2"} {
		e := <-events
		if e.Kind != EventAgent || e.CallID != "call-2" || e.Agent.Text != want {
			t.Fatalf("late subscriber got %v %q %+v, want call-2's %q", e.Kind, e.CallID, e.Agent, want)
		}
	}
	say("call-2", "line 3")
	if e := <-events; e.Agent == nil || e.Agent.Text != "line 3" {
		t.Fatalf("then %+v, want line 3", e)
	}
	for i := range scrollEvents + 10 {
		say("call-3", strings.Repeat("x", i%7))
	}
	b.mu.Lock()
	n := len(b.scroll)
	b.mu.Unlock()
	if n != scrollEvents {
		t.Errorf("the scrollback holds %d events, want its bound %d", n, scrollEvents)
	}
}
