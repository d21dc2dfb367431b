package batch

import (
	"context"
	"errors"
	"fmt"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/tasks"
)

// Remote runs a task's run somewhere other than this process: a fleet's
// worker (DESIGN §23). The batch records the run's TaskStarted, hands it
// over, and judges the outcome Run returns as a local run's: a green one
// goes to the batch's merge queue, which takes the work from the task's
// checkout, so Run leaves the run's work there (Carrier.Receive).
type Remote interface {
	Run(ctx context.Context, r RemoteRun) (*loop.Outcome, error)
}

// RemoteRun is one run of a task handed to a Remote.
type RemoteRun struct {
	// ID is the run's id, on TaskStarted before Run is called.
	ID    string
	Batch string
	Task  tasks.Task
	// Prompt is the run's prompt (TaskPrompt): the loop's, the task's,
	// and what the merge queue said when it sent the task back.
	Prompt string
	// Try counts the task's runs from 1; Attempt its attempts.
	Try, Attempt int
	// Checkout is the task's checkout: Send carries its work to where the
	// run starts, Receive brings the run's work back.
	Checkout Carrier
	// OnIteration is told each iteration the run ends, in order.
	OnIteration func(iteration int, status string, costUSD float64)
}

// Carrier is a task's checkout as a Remote uses it (*tasks.Checkout's
// Send and Receive).
type Carrier interface {
	Send(ctx context.Context, url string) (branch, commit string, err error)
	Receive(ctx context.Context, url, branch string) (string, error)
}

func (c checkout) Send(ctx context.Context, url string) (string, string, error) {
	return c.c.Send(ctx, url)
}

func (c checkout) Receive(ctx context.Context, url, branch string) (string, error) {
	return c.c.Receive(ctx, url, branch)
}

// errRemoteResume refuses to resume a run a Remote ran: its life is the
// remote's, which the batch cannot rebuild here.
var errRemoteResume = errors.New("a task's run on a fleet is not resumed by its batch; submit the backlog again")

// startRemote records the TaskStarted of a new run of t and has the
// Remote run it, telling the batch's events of its iterations.
func (b *Batch) startRemote(ctx context.Context, t *taskState, a *attempt, try int, back, resume string) childRun {
	if resume != "" {
		return childRun{id: resume, err: errRemoteResume}
	}
	cr := childRun{id: loop.NewID()}
	carrier, ok := a.checkout.(Carrier)
	if !ok {
		cr.err = fmt.Errorf("the checkout of task %s cannot be carried to a fleet worker", t.task.ID)
		return cr
	}
	if cr.err = b.recordTaskStarted(ctx, t, a, cr.id, try, false); cr.err != nil {
		return cr
	}
	b.emit(Event{Kind: EventTaskStarted, Task: t.task.ID, Title: t.task.Title, Run: cr.id, Try: try, Attempt: a.k})
	cr.out, cr.err = b.o.Remote.Run(ctx, RemoteRun{ID: cr.id, Batch: b.id, Task: t.task, Prompt: TaskPrompt(b.prompt, t.task, back),
		Try: try, Attempt: a.k, Checkout: carrier,
		OnIteration: func(n int, status string, cost float64) {
			b.emit(Event{Kind: EventIteration, Task: t.task.ID, Attempt: a.k, Run: cr.id, Iteration: n, Status: status, CostUSD: cost})
		}})
	return cr
}
