package batch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
	"github.com/ralphloop/ralph/tasks"
)

// Started is a batch as its BatchStarted records it: what resuming it
// needs to build its source, target and queue again.
type Started struct {
	ID                          string
	Source, Target              string
	Parallel, Attempts, Retries int
	Integrate                   string
	Shared                      bool
	Dir                         string // the batch's checkouts and prompts
	Config                      string // the loop's config (its snapshot)
	At                          time.Time
}

// ErrNotBatch marks a run id that names no batch on the store.
var ErrNotBatch = fmt.Errorf("not a batch")

// ReadStarted reads batch id's BatchStarted from st; an id with none
// wraps ErrNotBatch.
func ReadStarted(st *ledger.Store, id string) (Started, error) {
	acts, err := st.ByRun(id)
	if err != nil {
		return Started{}, err
	}
	for _, a := range acts {
		if a.Type != ledger.BatchStarted {
			continue
		}
		m := a.Metadata
		return Started{ID: id, Source: m["source"].Str(), Target: m["target"].Str(), Parallel: int(m["parallel"].AsInt()),
			Attempts: int(m["attempts"].AsInt()), Retries: int(m["retries"].AsInt()), Integrate: m["integrate"].Str(),
			Shared: m["shared"].AsBool(), Dir: m["dir"].Str(), Config: m["config"].Str(), At: a.Timestamp}, nil
	}
	return Started{}, fmt.Errorf("run %s: %w", id, ErrNotBatch)
}

// chainTask is what a batch's chain says of one task.
type chainTask struct {
	title    string
	commit   string                // TaskMerged's
	attempts map[int]*chainAttempt // by attempt
	runs     []string
}

// chainAttempt is where one attempt of a task stood: its last run, and
// that run's TaskEnded when it has one.
type chainAttempt struct {
	run          string
	try          int
	ended, final bool
	verdict, why string
}

// readChain reads the batch's TaskStarted, TaskEnded and TaskMerged.
func readChain(acts []ledger.Action) map[string]*chainTask {
	out := map[string]*chainTask{}
	get := func(a *ledger.Action) *chainTask {
		id := a.Metadata[MetaTask].Str()
		if out[id] == nil {
			out[id] = &chainTask{attempts: map[int]*chainAttempt{}}
		}
		return out[id]
	}
	for i := range acts {
		a := &acts[i]
		m := a.Metadata
		switch a.Type {
		case ledger.TaskStarted:
			ct := get(a)
			ct.title = m["title"].Str()
			k, run := max(int(m[MetaAttempt].AsInt()), 1), m[MetaRun].Str()
			if !slices.Contains(ct.runs, run) {
				ct.runs = append(ct.runs, run)
			}
			ct.attempts[k] = &chainAttempt{run: run, try: int(m[MetaTry].AsInt())}
		case ledger.TaskEnded:
			for _, at := range get(a).attempts {
				if at.run == m[MetaRun].Str() {
					at.ended, at.final, at.verdict, at.why = true, m[MetaFinal].AsBool(), m[MetaVerdict].Str(), m["why"].Str()
				}
			}
		case ledger.TaskMerged:
			get(a).commit = m[MetaCommit].Str()
		}
	}
	return out
}

// end is the task's end, when the chain says it ended: merged, or every
// attempt over with a verdict that is not aborted (an aborted run
// resumes).
func (ct *chainTask) end(attempts int) (attemptEnd, bool) {
	if ct.commit != "" {
		return attemptEnd{verdict: VerdictMerged, commit: ct.commit}, true
	}
	ends := make([]attemptEnd, 0, attempts)
	for k := 1; k <= attempts; k++ {
		at := ct.attempts[k]
		if at == nil || !at.final || at.verdict == VerdictAborted {
			return attemptEnd{}, false
		}
		ends = append(ends, attemptEnd{run: at.run, verdict: at.verdict, why: at.why})
	}
	return bestEnd(ends), true
}

// Resume continues a batch that was killed or stopped: tasks that ended
// keep their end; a task's run that was running (or aborted) resumes; a
// run that ended without its TaskEnded is judged as it ended (a green one
// goes to the queue again, which finds a merge that landed before the
// kill); a run the queue had sent back goes back to its loop; tasks never
// started start. o.ID names the batch; its source, target and queue are
// built as its BatchStarted says (ReadStarted).
func (b *Batch) Resume(ctx context.Context) (*Summary, error) {
	st, err := ReadStarted(b.o.Store, b.id)
	if err != nil {
		return nil, &RefusedError{Err: err}
	}
	acts, err := b.o.Store.ByRun(b.id)
	if err != nil {
		return nil, err
	}
	for _, a := range acts {
		if a.Type == ledger.BatchStarted {
			b.startedID = a.ActionID
		}
	}
	listed, err := b.o.Source.List(ctx)
	if err != nil {
		return nil, &RefusedError{Err: err}
	}
	ordered, err := b.o.Order(listed)
	if err != nil {
		return nil, &RefusedError{Err: err}
	}
	b.started, b.resumed = st.At, true
	chain := readChain(acts)
	b.setTasks(withChainTasks(ordered, chain))
	for _, t := range b.tasks {
		ct := chain[t.task.ID]
		if ct == nil {
			continue
		}
		t.prior, t.runs = ct, slices.Clone(ct.runs)
		if end, ok := ct.end(max(b.o.Attempts, 1)); ok {
			t.state, t.why, t.commit = end.verdict, end.why, end.commit
		}
	}
	b.tally()
	return b.runTasks(ctx)
}

// withChainTasks adds to ordered the tasks the chain has that the source
// no longer lists to run (marked done since, by this batch's merges).
func withChainTasks(ordered []tasks.Task, chain map[string]*chainTask) []tasks.Task {
	out := slices.Clone(ordered)
	for id, ct := range chain {
		if !slices.ContainsFunc(out, func(t tasks.Task) bool { return t.ID == id }) {
			out = append(out, tasks.Task{ID: id, Title: ct.title})
		}
	}
	return out
}

// tally adds the iterations and spend of the tasks' earlier runs, from
// their closing actions; an attempt's last run that goes on (resumed, or
// judged now) is counted when it ends (account).
func (b *Batch) tally() {
	for _, t := range b.tasks {
		goesOn := map[string]bool{}
		if t.prior != nil && t.state == VerdictQueued {
			for _, at := range t.prior.attempts {
				goesOn[at.run] = !at.ended || at.verdict == VerdictAborted
			}
		}
		for _, run := range t.runs {
			if goesOn[run] {
				continue
			}
			if out, ok := b.runEnd(run); ok {
				t.iterations += out.Iterations
				t.cost += out.CostUSD
				t.tokens += out.Tokens
			}
		}
	}
}

// runEnd is how run ended, from its closing action on the chain; false
// while it has none (it was running when the batch died).
func (b *Batch) runEnd(run string) (*loop.Outcome, bool) {
	acts, err := b.o.Store.ByRun(run)
	if err != nil {
		return nil, false
	}
	for i := len(acts) - 1; i >= 0; i-- {
		a := &acts[i]
		if a.Type == ledger.IterationStarted {
			return nil, false // a resumed run went on after its end
		}
		if !loop.IsRunEnd(a.Type) {
			continue
		}
		m := a.Metadata
		return &loop.Outcome{RunID: run, Class: stop.Class(m["class"].Str()), TriggeredBy: m["condition"].Str(), Reason: m["reason"].Str(),
			Evidence: m["evidence"].Str(), Iterations: int(m["iterations"].AsInt()), CostUSD: a.Cost, Tokens: m["tokens"].AsInt()}, true
	}
	return nil, false
}

// resumePoint is where attempt a of t picks up: the try it is at, the run
// to resume ("" for a new one), the merge queue's news for a new one, or
// its end when it is over.
func (b *Batch) resumePoint(ctx context.Context, t *taskState, a *attempt) (try int, run, back string, end *attemptEnd, err error) {
	if t.prior == nil || t.prior.attempts[a.k] == nil {
		return 1, "", "", nil, nil
	}
	at := t.prior.attempts[a.k]
	switch {
	case !at.ended || at.verdict == VerdictAborted:
		return at.try, at.run, "", nil, nil
	case at.final:
		return 0, "", "", &attemptEnd{run: at.run, verdict: at.verdict, why: at.why}, nil
	}
	outcome := Conflicted
	if at.verdict == VerdictRed {
		outcome = Red
	}
	back, err = b.o.Merger.Reset(ctx, a.checkout, MergeResult{Outcome: outcome, Evidence: at.why})
	return at.try + 1, "", back, nil, err
}
