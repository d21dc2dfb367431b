package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/tasks"
)

// Options configure a Batch.
type Options struct {
	// ID is the batch's run id ("" makes one).
	ID string
	// Config is the loop's config: each task's run is built from a copy
	// of it (childConfig), its success conditions re-run on the merged
	// tree, its workdir inside Repo.
	Config *config.Config
	// Store is the open store every run of the batch records on (one
	// process owns it; Badger has one writer); StoreDir is its directory,
	// which sandboxes never show, with Hidden; StoreMoved says it was
	// moved out of the workdir for the sandbox (assemble.StorePlace).
	Store      *ledger.Store
	StoreDir   string
	Hidden     []string
	StoreMoved bool
	// Source lists the tasks and marks them done; Target is the branch
	// they land on; Merger is the merge queue in front of it.
	Source Source
	Target Target
	Merger Merger
	// Repo is the repository's top directory; Dir is the batch's own
	// directory (outside Repo and the store): task checkouts and prompts.
	Repo, Dir string
	// Parallel is how many tasks run at once (at least 1); Attempts how
	// many loops work on each (at least 1: the first the queue merges
	// wins); Retries how many times a run goes back to its loop after a
	// conflict or a red re-run; Shared makes checkouts clone --shared (a
	// sandboxed run); Integrate is the queue's way ("rebase" or "merge"),
	// for the record.
	Parallel, Attempts, Retries int
	Shared                      bool
	Integrate                   string
	// Order puts the listed tasks that are to run in the order they run
	// (dependencies, then priority, then file order), leaving out those
	// done already (which meet the dependencies on them) and those that
	// cannot run, refusing cycles and unknown dependencies; RefName makes
	// a task id safe as a ref component.
	Order   func([]tasks.Task) ([]tasks.Task, error)
	RefName func(id string) string
	// Remote, when set, runs each task's runs in place of this process
	// (a fleet's workers); the merge queue stays here.
	Remote Remote
	// OnEvent is told every event of the batch, from one goroutine at a
	// time (nil: none).
	OnEvent func(Event)
	Now     func() time.Time
	Logger  *slog.Logger // the runs' logger (nil: slog.Default())
}

// Batch runs a backlog: each task a child run in its own checkout, the
// green ones merged one at a time by the queue, only when their
// conditions hold on the merged tree.
type Batch struct {
	o         Options
	id        string
	rel       string // the workdir below the repository's top
	prompt    string // the loop's prompt
	check     *checker
	goal      string
	started   time.Time
	startedID string

	mu      sync.Mutex // guards tasks' states and the record
	tasks   []*taskState
	emitMu  sync.Mutex // one OnEvent at a time
	resumed bool       // Resume, not Run
	slots   *slots     // the loops running at once (schedule)
}

// taskState is where one task stands.
type taskState struct {
	task       tasks.Task
	ref        string // RefName(task.ID)
	branch     string // ralph/<batch>/task/<ref>
	state      string // a Verdict*, or "running"
	why        string
	commit     string
	runs       []string
	iterations int
	cost       float64
	tokens     int64
	// mergeMu lets one attempt of the task into the queue at a time; won
	// says one merged, and the others have lost.
	mergeMu sync.Mutex
	won     bool
	// prior is what the chain says of the task when the batch resumes
	// (nil: it starts afresh).
	prior *chainTask
	// slot says the task holds one of the batch's slots (the goroutine
	// that works on it reads and writes it).
	slot bool
}

const stateRunning = "running"

// New checks what a batch needs before anything is recorded: the workdir
// inside the repository, the loop's prompt, and a success condition that
// reads the work tree. Its errors are the user's to fix (a refusal).
func New(o Options) (*Batch, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Parallel = max(o.Parallel, 1)
	if o.ID == "" {
		o.ID = loop.NewID()
	}
	b := &Batch{o: o, id: o.ID}
	rel, err := filepath.Rel(o.Repo, o.Config.Loop.Workdir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s: the workdir %s is outside the repository %s, where the tasks' checkouts are made; run the batch from the repository that holds the workdir",
			o.Config.FileName(), o.Config.Loop.Workdir, o.Repo)
	}
	b.rel = rel
	if b.prompt, err = loopPrompt(o.Config); err != nil {
		return nil, err
	}
	sbx, err := sandboxFor(o.Config, o.StoreDir, o.Hidden)
	if err != nil {
		return nil, err
	}
	if b.check, err = newChecker(o.Config, rel, sbx); err != nil {
		return nil, err
	}
	return b, nil
}

// ID is the batch's run id.
func (b *Batch) ID() string { return b.id }

// Run lists the tasks, records BatchStarted, runs the tasks that are
// ready, up to Parallel at once, each to its end (merged, or failed,
// conflict, stopped, …), and returns the summary. An error is one the
// batch could not go on with (the source could not be listed, the store
// refused a record); a task's own failure is in the summary.
func (b *Batch) Run(ctx context.Context) (*Summary, error) {
	listed, err := b.o.Source.List(ctx)
	if err != nil {
		return nil, &RefusedError{Err: err}
	}
	ordered, err := b.o.Order(listed)
	if err != nil {
		return nil, &RefusedError{Err: err}
	}
	b.started = b.o.Now()
	b.setTasks(ordered)
	if err := b.recordStarted(ctx, len(ordered)); err != nil {
		return nil, err
	}
	return b.runTasks(ctx)
}

// setTasks makes the batch's tasks, queued, in the order they run.
func (b *Batch) setTasks(ordered []tasks.Task) {
	b.goal = fmt.Sprintf("batch: %d tasks from %s", len(ordered), b.o.Source.String())
	for _, t := range ordered {
		ref := b.o.RefName(t.ID)
		b.tasks = append(b.tasks, &taskState{task: t, ref: ref, branch: "ralph/" + b.id + "/task/" + ref, state: VerdictQueued})
	}
}

// runTasks runs a started (or resumed) batch to its end: its record, its
// start event, the tasks, the summary.
func (b *Batch) runTasks(ctx context.Context) (*Summary, error) {
	b.mu.Lock()
	err := b.saveRecord(ctx, loop.StateRunning, nil)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b.emit(Event{Kind: EventBatchStarted, Source: b.o.Source.String(), Target: b.o.Target.Branch(), Tasks: len(b.tasks),
		Parallel: b.o.Parallel, Attempts: max(b.o.Attempts, 1), Retries: b.o.Retries, Integrate: b.o.Integrate, Resumed: b.resumed})
	if err := b.schedule(ctx); err != nil {
		return nil, err
	}
	return b.finish(ctx)
}

// schedule runs the ready tasks, Parallel loops at once, until none is
// running and none is ready; it returns the first error that stops the
// batch (a record the store refused). A task takes a slot to start, and
// (with one attempt) gives it back while it waits in the merge queue, so
// that the queue's one-at-a-time merges do not keep loops from running.
func (b *Batch) schedule(ctx context.Context) error {
	b.slots = newSlots(b.o.Parallel)
	done := make(chan error)
	running := 0
	var first error
	for {
		for ctx.Err() == nil && first == nil && b.slots.tryTake() {
			t := b.next()
			if t == nil {
				b.slots.drop()
				break
			}
			running++
			go func() { done <- b.safeWork(ctx, t) }()
		}
		if running == 0 {
			return first
		}
		select {
		case err := <-done:
			running--
			if err != nil && first == nil {
				first = err
			}
		case <-b.slots.wake:
		}
	}
}

// slots are the loops that may run at once.
type slots struct {
	c    chan struct{}
	wake chan struct{} // a slot was given back
}

func newSlots(n int) *slots {
	return &slots{c: make(chan struct{}, n), wake: make(chan struct{}, 1)}
}

// tryTake takes a slot if one is free.
func (s *slots) tryTake() bool {
	select {
	case s.c <- struct{}{}:
		return true
	default:
		return false
	}
}

// take waits for a slot, or ctx's end.
func (s *slots) take(ctx context.Context) error {
	select {
	case s.c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give gives a slot back and wakes the scheduler.
func (s *slots) give() {
	s.drop()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drop gives a slot back without waking the scheduler (it took it and
// found no task ready).
func (s *slots) drop() { <-s.c }

// next is the first queued task whose dependencies have merged (or were
// done in the source already), marked running; nil when none is ready.
func (b *Batch) next() *taskState {
	b.mu.Lock()
	defer b.mu.Unlock()
	merged := map[string]bool{}
	for _, t := range b.tasks {
		if t.state == VerdictMerged {
			merged[t.task.ID] = true
		}
	}
	for _, t := range b.tasks {
		if t.state != VerdictQueued {
			continue
		}
		ready := true
		for _, d := range t.task.DependsOn {
			if !merged[d] && b.pending(d) {
				ready = false
			}
		}
		if ready {
			t.state = stateRunning
			return t
		}
	}
	return nil
}

// pending says whether the task with id is in this batch and not merged
// (a dependency outside the batch was done in its source). The caller
// holds b.mu.
func (b *Batch) pending(id string) bool {
	for _, t := range b.tasks {
		if t.task.ID == id {
			return t.state != VerdictMerged
		}
	}
	return false
}

// safeWork is work with a panic turned into the task's error, so one
// task's bug never takes the batch (and its other runs) down.
func (b *Batch) safeWork(ctx context.Context, t *taskState) (err error) {
	t.slot = true // schedule took it for the task
	defer func() {
		if t.slot {
			t.slot = false
			b.slots.give()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			b.o.Logger.Error("a task's work panicked", "task", t.task.ID, "panic", p, "stack", string(debug.Stack()))
			end, rerr := b.endRun(ctx, t, "", VerdictError, fmt.Sprintf("ralph failed: %v", p), true)
			err = errors.Join(rerr, b.endTask(ctx, t, end))
		}
	}()
	return b.work(ctx, t)
}

// RefusedError is a batch refused before it started: its source could not
// be listed or ordered, its target or a checkout could not be had (exit 2).
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// IsRefused says whether err refuses the batch (RefusedError).
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// emit tells OnEvent of e.
func (b *Batch) emit(e Event) {
	if b.o.OnEvent == nil {
		return
	}
	e.Batch = b.id
	if e.Time.IsZero() {
		e.Time = b.o.Now()
	}
	b.emitMu.Lock()
	defer b.emitMu.Unlock()
	b.o.OnEvent(e)
}
