package batch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
	"github.com/ralphloop/ralph/tasks"
)

// childConfig is cfg for one run of task t: its workdir in the task's
// checkout, its prompt the task's prompt file, and, for plans, the task in
// [intent] params as task ({:id :title :text :criteria} in the plan's
// context) unless the loop's params name a task of their own. Everything
// else (the agent, the stop conditions, governance, the sandbox) is the
// loop's.
func childConfig(cfg *config.Config, t tasks.Task, workdir, prompt string) *config.Config {
	c := *cfg
	c.Loop.Workdir = workdir
	c.Intent.PromptFile = prompt
	if _, ok := cfg.Intent.Params[ParamTask]; !ok {
		c.Intent.Params = maps.Clone(cfg.Intent.Params)
		if c.Intent.Params == nil {
			c.Intent.Params = map[string]any{}
		}
		criteria := make([]any, len(t.Criteria))
		for i, s := range t.Criteria {
			criteria[i] = s
		}
		c.Intent.Params[ParamTask] = map[string]any{"id": t.ID, "title": t.Title, "text": t.Text, "criteria": criteria}
	}
	if cfg.Agent != nil {
		a := *cfg.Agent
		a.PromptFile = prompt
		c.Agent = &a
	}
	// Check fills in the sinks' defaults in place: each run its own copy.
	c.Notify = slices.Clone(cfg.Notify)
	c.Tasks = nil // a task's run is a run, not a batch
	return &c
}

// ParamTask is the [intent] params key a task's run finds its task under.
const ParamTask = "task"

// TaskPrompt is a task's prompt: the loop's own (its PROMPT.md, or its
// goal when it has none), then the task's id, title, description and
// acceptance criteria, then, when the task comes back from the merge
// queue, what happened there (back).
func TaskPrompt(loopPrompt string, t tasks.Task, back string) string {
	var b strings.Builder
	if p := strings.TrimRight(loopPrompt, "\n"); p != "" {
		b.WriteString(p + "\n\n")
	}
	fmt.Fprintf(&b, "## Task %s: %s\n\n", t.ID, t.Title)
	b.WriteString("Work on this task only; ralph merges it when the success conditions hold on the merged tree.\n")
	if text := strings.TrimSpace(t.Text); text != "" {
		b.WriteString("\n" + text + "\n")
	}
	if len(t.Criteria) > 0 {
		b.WriteString("\nAcceptance criteria:\n")
		for _, c := range t.Criteria {
			b.WriteString("- " + strings.TrimSpace(c) + "\n")
		}
	}
	if back = strings.TrimSpace(back); back != "" {
		b.WriteString("\n## Back from the merge queue\n\n" + back + "\n")
	}
	return b.String()
}

// loopPrompt is the text the loop's config prompts with: its prompt file
// (the agent's, else the intent's), else its goal.
func loopPrompt(cfg *config.Config) (string, error) {
	f := cfg.AgentPromptFile()
	if f == "" {
		return cfg.Intent.Goal, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("read the loop's prompt %s: %w", f, err)
	}
	return string(b), nil
}

// childRun is one run of a task: its id, and how it ended (nil when it
// could not run; err says why).
type childRun struct {
	id  string
	out *loop.Outcome
	err error
}

// runChild builds and runs one run of attempt a of t in its checkout,
// whose prompt says back (the merge queue's news, "" for none); or, when
// resume names a run of the attempt that a killed batch left, that run:
// judged as it ended when it did, else resumed (a run the batch died
// before it started starts anew). TaskStarted links the run to the batch
// before it starts.
func (b *Batch) runChild(ctx context.Context, t *taskState, a *attempt, try int, back, resume string) childRun {
	if b.o.Remote != nil {
		return b.startRemote(ctx, t, a, try, back, resume)
	}
	if resume != "" {
		if out, ok := b.runEnd(resume); ok && out.Class != stop.ClassAbort {
			return childRun{id: resume, out: out} // it ended; the batch died before it said so
		}
		cfg, err := b.snapshotConfig(resume)
		if err == nil {
			return b.startChild(ctx, t, a, try, cfg, resume, true)
		}
		if !errors.Is(err, errNeverStarted) {
			return childRun{id: resume, err: err}
		}
		b.mu.Lock()
		t.runs = slices.DeleteFunc(t.runs, func(r string) bool { return r == resume })
		b.mu.Unlock()
	}
	name := fmt.Sprintf("%s-%d.md", t.ref, try)
	if max(b.o.Attempts, 1) > 1 {
		name = fmt.Sprintf("%s-%d-%d.md", t.ref, a.k, try)
	}
	prompt := filepath.Join(b.o.Dir, "prompts", name)
	if err := os.MkdirAll(filepath.Dir(prompt), 0o700); err != nil {
		return childRun{err: fmt.Errorf("write the task's prompt: %w", err)}
	}
	if err := os.WriteFile(prompt, []byte(TaskPrompt(b.prompt, t.task, back)), 0o600); err != nil {
		return childRun{err: fmt.Errorf("write the task's prompt: %w", err)}
	}
	return b.startChild(ctx, t, a, try, childConfig(b.o.Config, t.task, filepath.Join(a.checkout.Dir(), b.rel), prompt), loop.NewID(), false)
}

// snapshotConfig is the config run was started with (its RunStarted's
// snapshot), which its resume runs with.
func (b *Batch) snapshotConfig(run string) (*config.Config, error) {
	acts, err := b.o.Store.ByRun(run)
	if err != nil {
		return nil, err
	}
	for _, a := range acts {
		if a.Type == ledger.RunStarted {
			cfg, err := config.Parse([]byte(a.Metadata["config"].Str()), "run "+run+" config snapshot", nil)
			if err != nil {
				return nil, err
			}
			cfg.Store.Dir = b.o.StoreDir
			return cfg, nil
		}
	}
	return nil, fmt.Errorf("run %s: %w", run, errNeverStarted)
}

// errNeverStarted marks a task's run that has its TaskStarted but no
// RunStarted: the batch died between the two.
var errNeverStarted = errors.New("it has no RunStarted on the chain: it never started")

// startChild builds the run id of cfg (resumed: it continues from its
// last completed iteration), records its TaskStarted, and runs it.
func (b *Batch) startChild(ctx context.Context, t *taskState, a *attempt, try int, cfg *config.Config, id string, resumed bool) childRun {
	cr := childRun{id: id}
	rs, err := assemble.NewRun(ctx, cfg, assemble.RunOptions{
		Open: func() (*ledger.Store, error) { return b.o.Store, nil }, Dir: b.o.StoreDir, RunID: id, Resume: resumed,
		Hidden: b.o.Hidden, StoreMoved: b.o.StoreMoved, EngineOptions: assemble.EngineOptions{SharedStore: true}})
	if err != nil {
		cr.err = err
		return cr
	}
	defer rs.CloseSandbox() // the run has ended; a close error leaves nothing for the batch to do
	rs.Options.Batch = b.id
	rs.Options.Logger = b.o.Logger
	runner, err := rs.NewRunner()
	if err != nil {
		rs.Discard()
		cr.err = err
		return cr
	}
	if err := b.recordTaskStarted(ctx, t, a, id, try, resumed); err != nil {
		cr.err = err
		return cr
	}
	b.emit(Event{Kind: EventTaskStarted, Task: t.task.ID, Title: t.task.Title, Run: id, Try: try, Attempt: a.k, Resumed: resumed})
	cr.out, cr.err = b.follow(ctx, t, a.k, runner)
	return cr
}

// follow runs runner, telling the batch's events of each iteration it
// ends, and returns how it ended.
func (b *Batch) follow(ctx context.Context, t *taskState, k int, runner *loop.Runner) (*loop.Outcome, error) {
	fctx, stopFollowing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollowing()
	events := runner.Events().Subscribe(fctx, b.o.Store.Head().Seq+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range events {
			if e.Kind != loop.EventAction {
				continue
			}
			if a := e.Action; a.Type == ledger.IterationCompleted {
				b.emit(Event{Kind: EventIteration, Task: t.task.ID, Attempt: k, Run: runner.RunID(), Iteration: int(a.Metadata["iteration"].AsInt()),
					Status: string(ledger.StatusOf(a)), CostUSD: a.Cost})
			} else if loop.IsRunEnd(a.Type) {
				return
			}
		}
	}()
	out, err := runner.Run(ctx)
	if err != nil {
		stopFollowing() // no closing action will come
	}
	<-done
	return out, err
}

// runVerdict is how a run ended, for the task: green when its success
// conditions held (it goes to the merge queue), else what stopped it and
// why.
func runVerdict(ctx context.Context, cr childRun) (verdict, why string) {
	var c *loop.Cancelled
	if errors.As(context.Cause(ctx), &c) && c.By == loop.CancelSuperseded {
		return VerdictCancelled, c.Reason
	}
	if cr.err != nil {
		return VerdictError, cr.err.Error()
	}
	out := cr.out
	why = out.TriggeredBy + ": " + out.Reason
	if len(out.StillFailing) > 0 {
		why += "; " + stop.UnmetText(out.StillFailing)
	}
	switch out.Class {
	case stop.ClassSuccess:
		return VerdictGreen, out.TriggeredBy + " held"
	case stop.ClassFailure:
		return VerdictFailed, why
	case stop.ClassAbort:
		return VerdictAborted, why
	}
	return VerdictStopped, why
}
