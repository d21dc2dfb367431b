package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/config"
)

// JobTask makes a job one run of a backlog's task (DESIGN §23, `ralph
// submit --tasks`): the job's config is the batch's loop, and the run
// prompts with Prompt instead of the loop's prompt file, finds the task
// in its plan's context as [intent] params task ({:id :title :text
// :criteria}, unless the loop names a task of its own), and names Batch
// on its record. The submitter's batch merges the run's branch.
type JobTask struct {
	Batch    string   `json:"batch"`
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Text     string   `json:"text,omitempty"`
	Criteria []string `json:"criteria,omitempty"`
	Prompt   string   `json:"prompt"`
}

// maxTaskPrompt bounds a task's prompt in a job message (NATS's default
// maximum payload is 1 MiB).
const maxTaskPrompt = 512 << 10

// Validate says in one sentence what is wrong with t, or nil.
func (t *JobTask) Validate() error {
	if _, err := uuid.Parse(t.Batch); err != nil || len(t.Batch) != 36 {
		return fmt.Errorf("the job's task names batch %q, which is not a run id (a UUID)", t.Batch)
	}
	if strings.TrimSpace(t.ID) == "" {
		return fmt.Errorf("the job's task of batch %s has no id", t.Batch)
	}
	if strings.TrimSpace(t.Prompt) == "" || len(t.Prompt) > maxTaskPrompt {
		return fmt.Errorf("the job's task %s has a prompt of %d bytes; it needs one, of at most %d", t.ID, len(t.Prompt), maxTaskPrompt)
	}
	return nil
}

// Apply makes cfg the config of t's run: its prompt is t's, written to
// dir (the job's own directory, outside the workspace, so the prompt is
// never committed with the work), and it runs as a run, not a batch.
func (t *JobTask) Apply(cfg *config.Config, dir string) error {
	p := filepath.Join(dir, "task-prompt.md")
	if err := os.WriteFile(p, []byte(t.Prompt), 0o600); err != nil {
		return fmt.Errorf("write the prompt of task %s: %w", t.ID, err)
	}
	cfg.Intent.PromptFile = p
	if cfg.Agent != nil {
		a := *cfg.Agent
		a.PromptFile = p
		cfg.Agent = &a
	}
	if _, ok := cfg.Intent.Params["task"]; !ok {
		params := maps.Clone(cfg.Intent.Params)
		if params == nil {
			params = map[string]any{}
		}
		criteria := make([]any, len(t.Criteria))
		for i, c := range t.Criteria {
			criteria[i] = c
		}
		params["task"] = map[string]any{"id": t.ID, "title": t.Title, "text": t.Text, "criteria": criteria}
		cfg.Intent.Params = params
	}
	cfg.Tasks = nil
	return nil
}

// WaitRun follows run runID's state in the runs bucket until it is final,
// telling each (its first, then every change) to each, and returns the
// final one. It ends with ctx.
func WaitRun(ctx context.Context, kv jetstream.KeyValue, runID string, each func(RunState)) (RunState, error) {
	if !validKey(runID) {
		return RunState{}, fmt.Errorf("run id %q is not a run id (letters, digits and - / _ = . only)", runID)
	}
	w, err := kv.Watch(ctx, runID)
	if err != nil {
		return RunState{}, fmt.Errorf("watch the state of run %s in bucket %s: %w", runID, BucketRuns, err)
	}
	defer func() { _ = w.Stop() }() // the wait is over either way; stopping the watch changes no state
	for {
		select {
		case <-ctx.Done():
			return RunState{}, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return RunState{}, fmt.Errorf("the watch of run %s's state in bucket %s ended before the run did", runID, BucketRuns)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // nil: the bucket's current values are all told
			}
			var s RunState
			if err := json.Unmarshal(e.Value(), &s); err != nil {
				return RunState{}, fmt.Errorf("the state of run %s in bucket %s (revision %d) is not a run state: %w", runID, BucketRuns, e.Revision(), err)
			}
			if each != nil {
				each(s)
			}
			if Final(s.State) {
				return s, nil
			}
		}
	}
}

// ApplyTask makes cfg the config of the job's task's run when the job is
// one (JobTask.Apply, with the prompt beside the run's store, in the
// job's directory), and returns the batch the run belongs to ("" when the
// job is a run of its own).
func (s RunSpec) ApplyTask(cfg *config.Config) (batch string, err error) {
	if s.Job.Task == nil {
		return "", nil
	}
	if err := s.Job.Task.Apply(cfg, filepath.Dir(s.StoreDir)); err != nil {
		return "", err
	}
	return s.Job.Task.Batch, nil
}
