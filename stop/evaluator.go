package stop

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ralphloop/ralph/ledger"
)

// Options configure an Evaluator. The zero value evaluates in parallel
// (4 at a time) with the cache on, a 30 s default timeout, 100 history
// entries and a 256-event buffer.
type Options struct {
	Sequential  bool          // evaluate one condition at a time, in priority order
	MaxParallel int           // conditions evaluated at once (default 4)
	StopOnFirst bool          // stop at the first met condition in priority order
	NoCache     bool          // evaluate every condition every time
	CacheTTL    time.Duration // extra bound on cached results of external checks (default 1s)
	Timeout     time.Duration // per-condition timeout when the condition has none (default 30s; commands DefaultCommandTimeout)
	HistorySize int           // evaluations kept in memory (default 100)
	EventBuffer int           // events buffered before new ones are dropped (default 256)
	Debug       bool          // log every condition's inputs, cache decision and duration
	Logger      *slog.Logger  // where debug logs go (nil: slog.Default())
	Ledger      Recorder      // when set, each evaluation is recorded as StopConditionsEvaluated
	RunID       string        // run of the recorded actions (default Input.RunID)
	Now         func() time.Time
}

// Recorder appends actions; *ledger.Store is one.
type Recorder interface {
	Append(ctx context.Context, a *ledger.Action) (ledger.Receipt, error)
}

// Evaluator evaluates a set of conditions against input snapshots and
// decides whether the run stops (seed 003 with the fixes of DESIGN §8).
// Its methods are safe for concurrent use; evaluations are serialized.
type Evaluator struct {
	opts Options
	log  *slog.Logger

	mu    sync.RWMutex
	conds []*Condition // priority order, highest first; ties in insertion order

	evalMu   sync.Mutex // one evaluation at a time: progress and history are sequences
	cache    *cache
	progress map[string]float64
	history  *ring

	events  chan Event
	dropped atomic.Uint64
}

// NewEvaluator returns an evaluator over conds.
func NewEvaluator(conds []*Condition, opts Options) *Evaluator {
	if opts.MaxParallel <= 0 {
		opts.MaxParallel = 4
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.HistorySize <= 0 {
		opts.HistorySize = 100
	}
	if opts.EventBuffer <= 0 {
		opts.EventBuffer = 256
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Evaluator{opts: opts, log: opts.Logger, cache: newCache(), progress: map[string]float64{},
		history: newRing(opts.HistorySize), events: make(chan Event, opts.EventBuffer)}
	if e.log == nil {
		e.log = slog.Default()
	}
	for _, c := range conds {
		e.insert(c)
	}
	return e
}

func (e *Evaluator) insert(c *Condition) {
	i, _ := slices.BinarySearchFunc(e.conds, c.Priority, func(x *Condition, p int) int {
		if x.Priority >= p {
			return -1 // equal priorities keep insertion order: the new one goes after them
		}
		return 1
	})
	e.conds = slices.Insert(e.conds, i, c)
}

// Add adds a condition at run time; the next evaluation includes it. A
// name already in use is an error.
func (e *Evaluator) Add(c *Condition) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.conds {
		if x.Name == c.Name {
			return fmt.Errorf("stop condition %q already exists", c.Name)
		}
	}
	e.insert(c)
	return nil
}

// Remove removes the named condition and its cached result; it reports
// whether there was one. An evaluation already running finishes with the
// conditions it started with.
func (e *Evaluator) Remove(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, x := range e.conds {
		if x.Name == name {
			e.conds = slices.Delete(e.conds, i, i+1)
			e.cache.drop(x)
			return true
		}
	}
	return false
}

// Conditions returns the conditions in priority order.
func (e *Evaluator) Conditions() []*Condition {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return slices.Clone(e.conds)
}

// ClearCache forgets every cached result.
func (e *Evaluator) ClearCache() { e.cache.clear() }

// Events returns the event channel. Events are sent without blocking: when
// the buffer is full the event is dropped and counted (Dropped), so a slow
// reader never delays an evaluation.
func (e *Evaluator) Events() <-chan Event { return e.events }

// Dropped returns how many events were dropped because the buffer was full.
func (e *Evaluator) Dropped() uint64 { return e.dropped.Load() }

// History returns the kept evaluations, oldest first.
func (e *Evaluator) History() []Evaluation { return e.history.all() }

func (e *Evaluator) emit(ev Event) {
	select {
	case e.events <- ev:
	default:
		e.dropped.Add(1)
	}
}

// Evaluate evaluates every condition against in and decides. Results come
// back in priority order however they were scheduled. The error is non-nil
// only when ctx ended (the evaluation is then incomplete) or recording to
// the ledger failed.
func (e *Evaluator) Evaluate(ctx context.Context, in Input) (Evaluation, error) {
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	start := e.opts.Now()
	if in.Now.IsZero() {
		in.Now = start
	}
	conds := e.Conditions()
	e.emit(Event{Kind: EventStarted, Iteration: in.Iteration, Count: len(conds)})

	results := make([]Result, len(conds))
	done := make([]bool, len(conds))
	// Conditions that read the others' verdicts (no_progress) are checked
	// second, with the verdicts of the first phase.
	later := make([]bool, len(conds))
	anyLater := false
	for i, c := range conds {
		later[i] = readsVerdicts(c)
		anyLater = anyLater || later[i]
	}
	e.evalPhase(ctx, conds, &in, results, done, func(i int) bool { return later[i] })
	if anyLater {
		second := in
		firstMet := len(conds)
		for i := range conds {
			if !done[i] {
				continue
			}
			r := &results[i]
			second.verdicts = append(second.verdicts, verdict{name: r.Name, met: r.Met, class: r.Class})
			if r.Met && firstMet == len(conds) {
				firstMet = i
			}
		}
		e.evalPhase(ctx, conds, &second, results, done, func(i int) bool {
			return !later[i] || (e.opts.StopOnFirst && i > firstMet) // stop_on_first cuts there anyway
		})
	}
	n := len(conds)
	for i := range results { // stop_on_first: keep what precedes the first met, in priority order
		if !done[i] || (e.opts.StopOnFirst && results[i].Met) {
			n = i
			if done[i] {
				n++
			}
			break
		}
	}
	results = results[:n]

	ev := Evaluation{Iteration: in.Iteration, Results: results, At: start}
	ev.Progressed = e.trackProgress(in.Iteration, results)
	if t := decide(results); t >= 0 {
		r := results[t]
		ev.ShouldStop, ev.Class, ev.TriggeredBy, ev.Reason = true, r.Class, r.Name, r.Reason
		e.emit(Event{Kind: EventStopTriggered, Iteration: in.Iteration, Condition: r.Name, Class: r.Class, Reason: r.Reason, Result: r})
	}
	ev.Duration = e.opts.Now().Sub(start)
	e.history.add(ev)
	var err error
	if e.opts.Ledger != nil {
		err = e.record(ctx, in, ev)
	}
	e.emit(Event{Kind: EventCompleted, Iteration: in.Iteration, ShouldStop: ev.ShouldStop, Class: ev.Class, Duration: ev.Duration})
	if ctx.Err() != nil {
		return ev, ctx.Err()
	}
	return ev, err
}

// evalPhase checks the conditions that skip does not leave out, one at a
// time or in parallel as the options say.
func (e *Evaluator) evalPhase(ctx context.Context, conds []*Condition, in *Input, results []Result, done []bool, skip func(int) bool) {
	if !e.opts.Sequential {
		e.evalParallel(ctx, conds, in, results, done, skip)
		return
	}
	for i, c := range conds {
		if skip(i) {
			continue
		}
		results[i], done[i] = e.evalOne(ctx, c, in), true
		if e.opts.StopOnFirst && results[i].Met {
			break
		}
	}
}

// evalParallel answers cache hits inline, then runs the misses
// MaxParallel at a time, started in priority order. With StopOnFirst a met
// condition cancels every lower-priority one.
func (e *Evaluator) evalParallel(ctx context.Context, conds []*Condition, in *Input, results []Result, done []bool, skip func(int) bool) {
	type miss struct {
		i        int
		key      uint64
		external bool
		start    time.Time
	}
	var misses []miss
	for i, c := range conds {
		if skip(i) {
			continue
		}
		start := e.opts.Now()
		key, external, r, hit := e.probe(c, in, start)
		if !hit {
			misses = append(misses, miss{i, key, external, start})
			continue
		}
		results[i], done[i] = r, true
		if e.opts.StopOnFirst && r.Met {
			break // everything after it is cut anyway
		}
	}
	if len(misses) == 0 {
		return
	}
	var mu sync.Mutex // guards done and cancels
	cancels := make([]context.CancelFunc, len(conds))
	var g errgroup.Group
	g.SetLimit(e.opts.MaxParallel)
	for _, m := range misses {
		if ctx.Err() != nil {
			break
		}
		cctx := ctx
		if e.opts.StopOnFirst {
			var cancel context.CancelFunc
			cctx, cancel = context.WithCancel(ctx)
			mu.Lock()
			cancels[m.i] = cancel
			mu.Unlock()
			defer cancel()
		}
		g.Go(func() error {
			if cctx.Err() != nil { // cancelled by a met, higher-priority condition
				return nil
			}
			r := e.run(cctx, conds[m.i], in, m.key, m.external, m.start)
			mu.Lock()
			defer mu.Unlock()
			results[m.i], done[m.i] = r, true
			if e.opts.StopOnFirst && r.Met {
				for _, cancel := range cancels[m.i+1:] {
					if cancel != nil {
						cancel()
					}
				}
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines never return errors: each outcome is in results
}

// decide picks the triggering result: the strongest class, then the
// highest priority, then the earliest. It returns -1 when none is met.
func decide(rs []Result) int {
	best := -1
	for i := range rs {
		r := &rs[i]
		if !r.Met {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &rs[best]
		if r.Class.rank() > b.Class.rank() || (r.Class.rank() == b.Class.rank() && r.Priority > b.Priority) {
			best = i
		}
	}
	return best
}

// timeoutFor is the condition's own bound (ownTimeout), else the
// evaluator's default.
// A composite without one gets its children's budget plus the default, so
// each bounded child times out on its own bound, inside the composite's,
// and its siblings still have time to run.
func (e *Evaluator) timeoutFor(c *Condition) time.Duration {
	if cc, ok := c.check.(*composite); ok && c.Timeout == 0 {
		return cc.budget() + e.opts.Timeout
	}
	if d := ownTimeout(c); d > 0 {
		return d
	}
	return e.opts.Timeout
}

// evalOne evaluates one condition: cache look-up by fingerprint, else the
// check under its timeout.
func (e *Evaluator) evalOne(ctx context.Context, c *Condition, in *Input) Result {
	start := e.opts.Now()
	key, external, r, hit := e.probe(c, in, start)
	if hit {
		return r
	}
	return e.run(ctx, c, in, key, external, start)
}

// probe fingerprints c's inputs and looks the result up in the cache. A hit
// is logged and emitted here.
func (e *Evaluator) probe(c *Condition, in *Input, now time.Time) (key uint64, external bool, r Result, hit bool) {
	f := newFP()
	f.str(c.Kind)
	external = c.check.fingerprint(in, &f)
	key = f.sum()
	if _, failed := in.Failed[c.Name]; failed || e.opts.NoCache {
		return key, external, Result{}, false
	}
	if r, hit = e.cache.get(c, key, now, e.opts.CacheTTL); hit {
		r.CacheHit, r.Duration = true, 0
		e.debug(c, in, "hit", key, 0)
		e.emit(Event{Kind: EventConditionEvaluated, Iteration: in.Iteration, Condition: c.Name, Result: r})
	}
	return key, external, r, hit
}

// run checks c under its timeout and caches, logs and emits the result.
func (e *Evaluator) run(ctx context.Context, c *Condition, in *Input, key uint64, external bool, start time.Time) Result {
	timeout := e.timeoutFor(c)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	var o outcome
	if err := in.Failed[c.Name]; err != nil {
		o = outcome{err: err, detail: "error"}
	} else {
		o = c.check.check(cctx, in)
	}
	timedOut := cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	dur := e.opts.Now().Sub(start)
	r := Result{Name: c.Name, Kind: c.Kind, Class: c.Class, Priority: c.Priority, Met: o.met, Reason: o.reason,
		Progress: o.progress, Detail: o.detail, Evidence: o.evidence, Duration: dur}
	switch {
	case timedOut:
		r.TimedOut, r.Met, r.Detail = true, false, "timed out"
		r.Reason = fmt.Sprintf("timed out after %s; counts as not met (timeout_class)", timeout)
		if tc := Class(c.TimeoutClass); tc != "" && tc != "not_met" {
			r.Met, r.Class = true, tc
			r.Reason = fmt.Sprintf("timed out after %s; counts as %s (timeout_class)", timeout, tc)
		}
		e.emit(Event{Kind: EventConditionTimeout, Iteration: in.Iteration, Condition: c.Name, Duration: timeout, Result: r})
	case ctx.Err() != nil:
		cause := context.Cause(ctx).Error()
		r.Met, r.Err, r.Detail = false, "cancelled: "+cause, "cancelled"
		r.Reason = "not evaluated to the end: cancelled (" + cause + ")"
	case o.err != nil:
		errored(c, &r, o.err)
	}
	decision := "miss"
	if e.opts.NoCache {
		decision = "off"
	} else if !timedOut && ctx.Err() == nil && o.err == nil {
		e.cache.put(c, key, external, start, r)
	}
	e.debug(c, in, decision, key, dur)
	e.emit(Event{Kind: EventConditionEvaluated, Iteration: in.Iteration, Condition: c.Name, Result: r})
	return r
}

// errored makes r the result of a check that could not run: the error,
// at the condition's own position, and the class its error_class names
// (failure unless the config says otherwise; not_met lets the run go on).
func errored(c *Condition, r *Result, err error) {
	r.Err = c.where() + ": " + err.Error()
	r.Detail, r.Progress = "error", 0
	class := Class(c.ErrorClass)
	if c.ErrorClass == "" {
		class = ClassFailure
	}
	if c.ErrorClass == "not_met" {
		r.Met = false
		r.Reason = "could not be evaluated: " + r.Err + "; counts as not met (error_class)"
		return
	}
	r.Met, r.Class = true, class
	r.Reason = "could not be evaluated: " + r.Err + "; counts as " + string(class) + " (error_class)"
}

func (e *Evaluator) debug(c *Condition, in *Input, decision string, key uint64, dur time.Duration) {
	if !e.opts.Debug {
		return
	}
	e.log.LogAttrs(context.Background(), slog.LevelDebug, "stop condition",
		slog.String("name", c.Name), slog.String("kind", c.Kind), slog.Int("iteration", in.Iteration),
		slog.String("inputs", c.check.inputs(in)), slog.String("fingerprint", fmt.Sprintf("%016x", key)),
		slog.String("cache", decision), slog.Duration("duration", dur))
}

// trackProgress compares each result's progress with the previous
// evaluation's and reports (and emits) the changes.
func (e *Evaluator) trackProgress(iteration int, rs []Result) []ProgressChange {
	var out []ProgressChange
	for _, r := range rs {
		prev, seen := e.progress[r.Name]
		if d := r.Progress - prev; d > 0.001 || d < -0.001 {
			pc := ProgressChange{Condition: r.Name, Previous: prev, Current: r.Progress, First: !seen}
			out = append(out, pc)
			e.emit(Event{Kind: EventConditionProgressed, Iteration: iteration, Condition: r.Name, Previous: prev, Current: r.Progress})
		}
		e.progress[r.Name] = r.Progress
	}
	return out
}

func (e *Evaluator) record(ctx context.Context, in Input, ev Evaluation) error {
	run := e.opts.RunID
	if run == "" {
		run = in.RunID
	}
	a := evaluationAction(run, ev)
	if _, err := e.opts.Ledger.Append(context.WithoutCancel(ctx), a); err != nil {
		return fmt.Errorf("record stop evaluation: %w", err)
	}
	return nil
}

// restorer is a condition that carries state from one iteration to the
// next and can take it back from its last recorded result.
type restorer interface {
	restore(iteration int, r Result)
}

// Restore seeds the evaluator from a run's last recorded evaluation, so a
// resumed run carries on where the dead process stopped: progress changes
// are measured from the recorded values, and stateful conditions
// (no_progress) keep their counts instead of starting over.
func (e *Evaluator) Restore(ev Evaluation) {
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, r := range ev.Results {
		e.progress[r.Name] = r.Progress
		for _, c := range e.conds {
			if s, ok := c.check.(restorer); ok && c.Name == r.Name {
				s.restore(ev.Iteration, r)
			}
		}
	}
}
