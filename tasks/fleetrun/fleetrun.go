package fleetrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
	"github.com/ralphloop/ralph/tasks/batch"
)

// Options are what a Remote needs: the fleet, and the loop every task's
// run is.
type Options struct {
	// NC is the submitter's connection, Signer its identity (the keeper
	// takes only signed submits); Runs is the fleet's bucket of run
	// states.
	NC     *nats.Conn
	Signer *fleet.Signer
	Runs   jetstream.KeyValue
	// Workspace is the git repository (a URL, or a path on the workers'
	// machine) the workers clone and the submitter sends each task's
	// work to; it may be the user's repository itself, by path.
	Workspace string
	// Config is the loop's ralph.toml text; ConfigPath is where it lies
	// in the repository; Agent is the agent CLI its runs need ("" none).
	Config, ConfigPath, Agent string
	// AbortWait bounds the abort sent to a run the batch stops (0: 10s).
	AbortWait time.Duration
}

// Remote runs each task's run as a fleet job (batch.Remote).
type Remote struct{ o Options }

// New is a Remote over o.
func New(o Options) *Remote {
	if o.AbortWait <= 0 {
		o.AbortWait = 10 * time.Second
	}
	return &Remote{o: o}
}

// Run sends the task's checkout to the workspace, queues the run as a
// job that starts from it, follows the run to its end, and, when it ended
// green, brings its branch back into the checkout.
func (r *Remote) Run(ctx context.Context, rr batch.RemoteRun) (*loop.Outcome, error) {
	_, commit, err := rr.Checkout.Send(ctx, r.o.Workspace)
	if err != nil {
		return nil, fmt.Errorf("send the task's work to the workspace %s: %w", r.o.Workspace, err)
	}
	job := fleet.Job{RunID: rr.ID, Config: r.o.Config, ConfigPath: r.o.ConfigPath, Workspace: r.o.Workspace, Ref: commit, Agent: r.o.Agent,
		Task: &fleet.JobTask{Batch: rr.Batch, ID: rr.Task.ID, Title: rr.Task.Title, Text: rr.Task.Text, Criteria: rr.Task.Criteria, Prompt: rr.Prompt}}
	if err := fleet.Submit(ctx, r.o.NC, r.o.Signer, job); err != nil {
		return nil, fmt.Errorf("queue run %s on the fleet: %w", rr.ID, err)
	}
	end, err := r.wait(ctx, rr)
	if err != nil {
		return nil, err
	}
	out := outcome(end)
	if end.Error != "" && out.Class != stop.ClassSuccess {
		return out, fmt.Errorf("run %s on worker %s: %s", rr.ID, end.Worker, end.Error)
	}
	if out.Class == stop.ClassSuccess {
		if _, err := rr.Checkout.Receive(ctx, r.o.Workspace, fleet.BranchName(rr.ID)); err != nil {
			return nil, fmt.Errorf("bring run %s's work back from the workspace: %w", rr.ID, err)
		}
	}
	return out, nil
}

// wait follows the run's state to its end, telling rr of each iteration
// it completed; when ctx ends first the run is sent an abort.
func (r *Remote) wait(ctx context.Context, rr batch.RemoteRun) (fleet.RunState, error) {
	told, cost := 0, 0.0
	end, err := fleet.WaitRun(ctx, r.o.Runs, rr.ID, func(s fleet.RunState) {
		for ; told < s.Iteration && rr.OnIteration != nil; told++ {
			rr.OnIteration(told+1, "ok", max(s.CostUSD-cost, 0)/float64(s.Iteration-told))
		}
		cost = max(cost, s.CostUSD)
	})
	if err != nil && ctx.Err() != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.AbortWait)
		defer cancel()
		if aerr := fleet.Control(actx, r.o.NC, r.o.Signer, rr.ID, fleet.OpAbort); aerr != nil && !errors.Is(aerr, fleet.ErrNoWorker) {
			err = errors.Join(err, fmt.Errorf("abort run %s: %w", rr.ID, aerr))
		}
	}
	if err != nil {
		return fleet.RunState{}, fmt.Errorf("follow run %s on the fleet: %w", rr.ID, err)
	}
	return end, nil
}

// outcome is a run's final state as the batch judges a run's end.
func outcome(s fleet.RunState) *loop.Outcome {
	class := stop.Class(s.Class)
	if class == "" {
		class = map[string]stop.Class{fleet.StateSucceeded: stop.ClassSuccess, fleet.StateLimit: stop.ClassLimit, fleet.StateAborted: stop.ClassAbort}[s.State]
		if class == "" {
			class = stop.ClassFailure
		}
	}
	reason := s.Reason
	if reason == "" {
		reason = s.Error
	}
	return &loop.Outcome{RunID: s.RunID, State: s.State, Class: class, TriggeredBy: s.Condition, Reason: reason,
		Iterations: s.Iteration, CostUSD: s.CostUSD, Tokens: s.Tokens}
}
