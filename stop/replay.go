package stop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// A replay evaluates a stop configuration against a recorded run through
// the same Evaluator the runner uses, fed from the chain instead of live
// events (DESIGN §19). Budgets, predicates, on_error, output_pattern and
// consecutive_failures read only what the chain holds and are exact.
// no_progress reads each iteration's checkpoint tree (else the recorded
// fingerprint). command, file_exists and file_contains take the recorded
// verdict when the condition and its workdir are those of the run, else an
// answer from a rerun against the iteration's checkpoint, else unknown.

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Specs and Conditions are the new configuration's [[stop]] tables and
	// the conditions built from them (FromConfig).
	Specs      []config.Stop
	Conditions []*Condition
	Workdir    string // the new configuration's workdir
	// RecordedSpecs and RecordedWorkdir are the run's own, from its config
	// snapshot: a world-reading condition identical to a recorded one takes
	// the recorded verdict.
	RecordedSpecs   []config.Stop
	RecordedWorkdir string
	// Workspace identifies the workdir's content after iteration n (a
	// checkpoint's tree), "" when unknown.
	Workspace func(n int) string
	// Rerun, when set, checks the world-reading conditions the record
	// cannot answer against each iteration's checkpoint; nil leaves them
	// unknown.
	Rerun *Rerun
	// EchoesStored is the run's Input.EchoesStored: which capabilities'
	// results only echo stored text.
	EchoesStored func(capability string) bool
}

// Rerun runs world-reading checks against iterations' checkpoints.
type Rerun struct {
	// Dir returns the directory that stands for the workdir as it was
	// after iteration n (inside a temporary worktree of its checkpoint),
	// and a function that removes it.
	Dir  func(ctx context.Context, n int) (dir string, release func(), err error)
	Jobs int // iterations checked at once (default 1)
}

// replayState is what the replayed conditions share: the recorded
// evaluations, the rerun answers and the conditions nothing answered.
type replayState struct {
	recorded map[int]*Evaluation
	u        unknowns
	answers  map[rerunKey]outcome // written before the evaluations start
}

type rerunKey struct {
	leaf      string
	iteration int
}

// ReplayStep is one iteration of a replay.
type ReplayStep struct {
	Iteration  int         `json:"iteration"`
	Evaluation Evaluation  `json:"evaluation"`         // the new configuration's
	Recorded   *Evaluation `json:"recorded,omitempty"` // the run's own, when it recorded one
	Unknown    []string    `json:"unknown,omitempty"`  // conditions neither the record nor a rerun could answer
	Decision
}

// Decision is where a run stops, or would have.
type Decision struct {
	Stop        bool   `json:"stop"`
	Class       Class  `json:"class,omitempty"`
	TriggeredBy string `json:"triggered_by,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Before      bool   `json:"before_next,omitempty"` // a budget forbade the next iteration
}

// ReplayResult is the whole replay, beside how the run really ended.
type ReplayResult struct {
	RunID     string       `json:"run_id"`
	Steps     []ReplayStep `json:"iterations"`
	Stopped   bool         `json:"stopped"`             // the new configuration would have stopped within the recorded iterations
	Iteration int          `json:"iteration,omitempty"` // after which
	Decision  Decision     `json:"decision"`
	// Recorded is how the run really ended (Stop false: it has not).
	RecordedIterations int      `json:"recorded_iterations"`
	Recorded           Decision `json:"recorded"`
}

// recordedIteration is one counted iteration as the chain holds it.
type recordedIteration struct {
	n         int
	last      []ledger.Action // from its (last) IterationStarted to its IterationCompleted
	endSeq    uint64          // its IterationCompleted
	at        time.Time       // when its conditions were evaluated (else its end)
	spent     Spent           // after it
	failures  int             // consecutive failed iterations, it included
	recorded  *Evaluation
	preceding []ledger.Action // the run's actions after the previous iteration's end, up to and including this one's
}

// Replay evaluates o's conditions against the run whose actions (in seq
// order, RunStarted first) are acts.
func Replay(ctx context.Context, acts []ledger.Action, o ReplayOptions) (*ReplayResult, error) {
	if len(acts) == 0 || acts[0].Type != ledger.RunStarted {
		return nil, errors.New("the run has no RunStarted action on this chain")
	}
	runID, started := acts[0].RunID, acts[0].Timestamp
	iters, closing := splitIterations(acts)
	res := &ReplayResult{RunID: runID, RecordedIterations: len(iters)}
	if closing != nil {
		res.Recorded = Decision{Stop: true, Class: Class(closing.Metadata["class"].Str()),
			TriggeredBy: closing.Metadata["condition"].Str(), Reason: closing.Metadata["reason"].Str()}
	}
	rs := &replayState{recorded: map[int]*Evaluation{}, answers: map[rerunKey]outcome{}}
	for _, it := range iters {
		if it.recorded != nil {
			rs.recorded[it.n] = it.recorded
		}
	}
	conds, tasks := replayConditions(o, rs, iters)
	if o.Rerun != nil && len(tasks) > 0 {
		if err := rs.rerun(ctx, o.Rerun, tasks); err != nil {
			return nil, err
		}
	}
	ev := NewEvaluator(conds, Options{NoCache: true})
	index := NewIndex()
	preds, err := bindSuccessPredicates(conds, index)
	if err != nil {
		return nil, err
	}
	for _, it := range iters {
		trig, trigName, failed := feedPredicates(ctx, index, preds, it.preceding)
		in := Input{RunID: runID, Iteration: it.n, Started: started, Now: it.at, CostUSD: it.spent.Cost,
			Tokens: it.spent.Tokens, ConsecutiveFailures: it.failures, LastActions: it.last, Audit: index,
			Workdir: o.Workdir, HeadSeq: it.endSeq, Failed: failed, Workspace: workspaceOf(o, it), EchoesStored: o.EchoesStored}
		evaluation, err := ev.Evaluate(ctx, in)
		if err != nil {
			return nil, err
		}
		step := ReplayStep{Iteration: it.n, Evaluation: evaluation, Recorded: it.recorded, Unknown: rs.u.names(it.n),
			Decision: replayDecision(&evaluation, trig, trigName, o.Conditions, it.spent)}
		res.Steps = append(res.Steps, step)
		if step.Stop {
			res.Stopped, res.Iteration, res.Decision = true, it.n, step.Decision
			break
		}
	}
	return res, nil
}

// bindSuccessPredicates binds the success-class completion predicates to
// index, as the runner watches them.
func bindSuccessPredicates(conds []*Condition, index *Index) ([]namedBound, error) {
	var preds []namedBound
	for _, c := range conds {
		if p := c.Predicate(); p != nil && c.Class == ClassSuccess {
			b, err := p.Bind(index)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.where(), err)
			}
			preds = append(preds, namedBound{c.Name, b})
		}
	}
	return preds, nil
}

// feedPredicates adds an iteration's actions to the index and evaluates
// the completion predicates after every action, as the runner's feed
// does: the action after which one first held, its name, and the
// predicates that could not be evaluated (nil when none).
func feedPredicates(ctx context.Context, index *Index, preds []namedBound, acts []ledger.Action) (trig *ledger.Action, trigName string, failed map[string]error) {
	failed = map[string]error{}
	for i := range acts {
		a := &acts[i]
		if a.Type == ledger.RunCompleted {
			continue
		}
		index.Observe(a)
		if trig != nil {
			continue
		}
		for _, p := range preds {
			if _, done := failed[p.name]; done {
				continue
			}
			holds, err := p.b.Eval(ctx)
			switch {
			case err != nil:
				failed[p.name] = fmt.Errorf("%w (evaluated after seq %d)", err, a.Seq)
			case holds:
				c := *a
				trig, trigName = &c, p.name
			}
			if trig != nil {
				break
			}
		}
	}
	if len(failed) == 0 {
		failed = nil
	}
	return trig, trigName, failed
}

// replayDecision is what the runner would have decided after an
// iteration: a completion predicate that held, unless an abort or failure
// condition fired too; else the evaluation's stop; else a budget the next
// iteration would cross.
func replayDecision(evaluation *Evaluation, trig *ledger.Action, trigName string, conds []*Condition, spent Spent) Decision {
	strong := evaluation.ShouldStop && (evaluation.Class == ClassAbort || evaluation.Class == ClassFailure)
	switch {
	case trig != nil && !strong:
		return Decision{Stop: true, Class: ClassSuccess, TriggeredBy: trigName,
			Reason: fmt.Sprintf("the completion predicate held after %s %s (seq %d)", trig.Type, trig.FunctionName, trig.Seq)}
	case evaluation.ShouldStop:
		return Decision{Stop: true, Class: evaluation.Class, TriggeredBy: evaluation.TriggeredBy, Reason: evaluation.Reason}
	default:
		if f := BeforeIteration(conds, spent); f != nil {
			return Decision{Stop: true, Class: f.Class, TriggeredBy: f.Cond.Name, Reason: f.Reason, Before: true}
		}
	}
	return Decision{}
}

type namedBound struct {
	name string
	b    *Bound
}

// splitIterations reads the counted iterations of a run and its closing
// action, if it has one. The actions of an attempt a crash interrupted (an
// IterationStarted followed by another with no IterationCompleted between)
// are left out of every iteration's preceding actions: the resumed runner's
// audit index never saw them.
func splitIterations(acts []ledger.Action) ([]recordedIteration, *ledger.Action) {
	var out []recordedIteration
	var closing *ledger.Action
	var sp Spent
	var interrupted []ledger.Action // the preceding actions so far, without interrupted attempts
	failures, lastStart, from, open := 0, -1, 0, false
	for i := range acts {
		a := &acts[i]
		switch a.Type {
		case ledger.IterationStarted:
			if open { // the attempt that started at lastStart never completed
				interrupted = append(interrupted, acts[from:lastStart]...)
				from = i
			}
			lastStart, open = i, true
		case ledger.IterationCompleted:
			sum := a.Result.AsMap()
			var tokens int64
			if a.Result.Kind() == rtfs.KindMap && sum != nil {
				tokens = sum.GetKey("tokens").AsInt()
			}
			sp.Cost += a.Cost
			sp.Tokens += tokens
			open = false
			status := ledger.StatusOf(a)
			if status == ledger.StatusUsageLimit { // spent, not counted: the iteration runs again under its number
				continue
			}
			sp.Iteration++
			sp.DoneIters, sp.DoneCost, sp.DoneTokens = sp.DoneIters+1, sp.DoneCost+a.Cost, sp.DoneTokens+tokens
			if status.Succeeded() {
				failures = 0
			} else {
				failures++
			}
			preceding := acts[from : i+1]
			if len(interrupted) > 0 {
				preceding = append(interrupted, preceding...)
				interrupted = nil
			}
			it := recordedIteration{n: int(a.Metadata["iteration"].AsInt()), endSeq: a.Seq, at: a.Timestamp,
				spent: sp, failures: failures, preceding: preceding}
			if lastStart >= 0 {
				it.last = acts[lastStart : i+1]
			}
			from = i + 1
			out = append(out, it)
		case ledger.StopConditionsEvaluated:
			ev, err := EvaluationFromAction(a)
			if err != nil || len(out) == 0 {
				continue
			}
			if last := &out[len(out)-1]; ev.Iteration == last.n {
				last.recorded = &ev
				if !ev.At.IsZero() {
					last.at = ev.At
				}
			}
		case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
			closing = a
		}
	}
	return out, closing
}

// workspaceOf is what no_progress reads of iteration it's workdir: the
// checkpoint's tree, else the fingerprint the run recorded, else a value
// of its own (nothing is known to be unchanged).
func workspaceOf(o ReplayOptions, it recordedIteration) string {
	if o.Workspace != nil {
		if w := o.Workspace(it.n); w != "" {
			return "tree " + w
		}
	}
	if it.recorded != nil {
		for _, r := range it.recorded.Results {
			var sum uint64
			if k, ok := Lookup(r.Kind); ok && k.Fingerprints {
				if _, err := fmt.Sscanf(r.Evidence, "fingerprint %x", &sum); err == nil {
					return fmt.Sprintf("recorded %016x", sum)
				}
			}
		}
	}
	return fmt.Sprintf("unknown %d", it.n)
}

// unknowns collects, per iteration, the conditions nothing could answer.
type unknowns struct {
	mu sync.Mutex
	by map[int]map[string]bool
}

func (u *unknowns) add(n int, name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by = map[int]map[string]bool{}
	}
	if u.by[n] == nil {
		u.by[n] = map[string]bool{}
	}
	u.by[n][name] = true
}

func (u *unknowns) names(n int) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for name := range u.by[n] {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// worldLeaves reports whether c or any condition inside it reads the world
// (its kind's ReadsWorld).
func worldLeaves(c *Condition) bool {
	if c.row().Reads == FromWorld {
		return true
	}
	if cc, ok := c.check.(*composite); ok {
		for _, k := range cc.kids {
			if worldLeaves(k) {
				return true
			}
		}
	}
	return false
}

// SpecKey is a [[stop]] table's identity for a replay: every field but
// its line.
func SpecKey(s config.Stop) string {
	b, _ := json.Marshal(withoutLines(s)) // plain fields: cannot fail
	return string(b)
}

// withoutLines is s with every line number zeroed, its own and its
// children's (copied: s's are left alone).
func withoutLines(s config.Stop) config.Stop {
	s.Line = 0
	if len(s.Conditions) > 0 {
		kids := make([]config.Stop, len(s.Conditions))
		for i, k := range s.Conditions {
			kids[i] = withoutLines(k)
		}
		s.Conditions = kids
	}
	return s
}

// replayConditions are o's conditions with every world-reading check
// replaced by its recorded verdict or its rerun answer, and the checks a
// rerun would have to run, by iteration.
func replayConditions(o ReplayOptions, rs *replayState, iters []recordedIteration) ([]*Condition, map[int][]leafTask) {
	recorded := map[string]string{} // name → spec key
	for i, s := range o.RecordedSpecs {
		recorded[SpecName(o.RecordedSpecs, i)] = SpecKey(s)
	}
	tasks := map[int][]leafTask{}
	out := make([]*Condition, len(o.Conditions))
	for i, c := range o.Conditions {
		cp := *c
		out[i] = &cp
		if !worldLeaves(c) {
			continue
		}
		same := i < len(o.Specs) && recorded[c.Name] == SpecKey(o.Specs[i]) && o.Workdir == o.RecordedWorkdir
		var leaves []leafTask
		cp.check = wrapWorld(c, c.Name, same, rs, &leaves)
		for _, it := range iters {
			for _, l := range leaves {
				if l.fromRecord {
					if _, ok := rs.recordedResult(it.n, l.c.Name); ok {
						continue
					}
				}
				tasks[it.n] = append(tasks[it.n], l)
			}
		}
	}
	return out, tasks
}

// leafTask is one world-reading check a rerun runs.
type leafTask struct {
	c          *Condition
	leaf       string
	fromRecord bool
}

// wrapWorld returns c's check with its world-reading parts answered by
// the record (fromRecord: c is the run's own top-level condition) or the
// rerun, and adds those parts to leaves. leaf names c's place in the tree.
func wrapWorld(c *Condition, leaf string, fromRecord bool, rs *replayState, leaves *[]leafTask) checker {
	if cc, ok := c.check.(*composite); ok && !fromRecord {
		kids := make([]*Condition, len(cc.kids))
		for j, k := range cc.kids {
			kp := *k
			kids[j] = &kp
			if worldLeaves(k) {
				kp.check = wrapWorld(k, fmt.Sprintf("%s/%d", leaf, j), false, rs, leaves)
			}
		}
		return &composite{op: cc.op, kids: kids}
	}
	*leaves = append(*leaves, leafTask{c: c, leaf: leaf, fromRecord: fromRecord})
	return &worldAnswer{c: c, leaf: leaf, fromRecord: fromRecord, rs: rs}
}

// recordedResult is the result the run recorded for the condition named
// name at iteration n.
func (rs *replayState) recordedResult(n int, name string) (Result, bool) {
	ev := rs.recorded[n]
	if ev == nil {
		return Result{}, false
	}
	for _, r := range ev.Results {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}

// rerun runs tasks against each iteration's checkpoint, o.Jobs iterations
// at a time, and keeps the answers.
func (rs *replayState) rerun(ctx context.Context, o *Rerun, tasks map[int][]leafTask) error {
	jobs := max(o.Jobs, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	var mu sync.Mutex
	for n, ts := range tasks {
		g.Go(func() error {
			dir, release, err := o.Dir(gctx, n)
			if err != nil {
				return err
			}
			defer release()
			in := &Input{Iteration: n, Workdir: dir}
			for _, t := range ts {
				out := checkChild(gctx, t.c, in)
				mu.Lock()
				rs.answers[rerunKey{t.leaf, n}] = out
				mu.Unlock()
			}
			return nil
		})
	}
	return g.Wait()
}

// worldAnswer answers a world-reading check from the recorded evaluation
// of the same iteration, else from a rerun, else as unknown.
type worldAnswer struct {
	c          *Condition
	leaf       string
	fromRecord bool
	rs         *replayState
}

func (w *worldAnswer) check(_ context.Context, in *Input) outcome {
	if w.fromRecord {
		if r, ok := w.rs.recordedResult(in.Iteration, w.c.Name); ok {
			o := outcome{met: r.Met, reason: r.Reason, progress: r.Progress, detail: r.Detail, evidence: r.Evidence}
			if r.Err != "" {
				o.err = errors.New(strings.TrimPrefix(r.Err, w.c.where()+": "))
			}
			return o
		}
	}
	if o, ok := w.rs.answers[rerunKey{w.leaf, in.Iteration}]; ok {
		return o
	}
	w.rs.u.add(in.Iteration, w.c.Name)
	why := "the condition or its workdir is not the run's"
	if w.fromRecord {
		why = "the run recorded no verdict of it for this iteration"
	}
	return outcome{detail: "unknown", reason: fmt.Sprintf("unknown: %s; pass --rerun to check it against the iteration's checkpoint", why),
		evidence: "not evaluated"}
}

func (w *worldAnswer) fingerprint(in *Input, f *fp) bool {
	f.i64(int64(in.Iteration))
	return false
}

func (w *worldAnswer) inputs(in *Input) string {
	return fmt.Sprintf("replay of %s at iteration %d", w.c.Name, in.Iteration)
}
