package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ralphloop/ralph/config"
)

func netTask() *JobTask {
	return &JobTask{Batch: uuid.Must(uuid.NewV7()).String(), ID: "US-1", Title: "Add", Text: "Make Add add.",
		Criteria: []string{"go test passes"}, Prompt: "Loop prompt.\n\n## Task US-1: Add\n"}
}

// A task's job goes through ParseJob whole, and a bad task is refused in
// one sentence.
func TestJobTaskValidate(t *testing.T) {
	t.Parallel()
	j := netJob(t)
	j.Task = netTask()
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseJob(data)
	if err != nil || back.Task == nil || back.Task.Prompt != j.Task.Prompt || back.Task.Criteria[0] != "go test passes" {
		t.Fatalf("ParseJob = %+v, %v", back.Task, err)
	}
	for _, c := range []struct {
		name string
		mod  func(*JobTask)
		want string
	}{
		{"batch not a uuid", func(t *JobTask) { t.Batch = "b1" }, "not a run id"},
		{"no id", func(t *JobTask) { t.ID = " " }, "has no id"},
		{"no prompt", func(t *JobTask) { t.Prompt = "" }, "needs one"},
		{"huge prompt", func(t *JobTask) { t.Prompt = strings.Repeat("x", maxTaskPrompt+1) }, "at most"},
	} {
		j := netJob(t)
		j.Task = netTask()
		c.mod(j.Task)
		if err := j.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// ApplyTask gives the run the task's prompt from outside the workspace,
// the task in its params, no [tasks], and names the batch.
func TestRunSpecApplyTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "[intent]\ngoal = \"g\"\nprompt_file = \"PROMPT.md\"\n[agent]\ncli = \"claude\"\n[tasks]\nsource = \"prd.json\"\n"
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "ws", "ralph.toml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := RunSpec{Job: netJob(t), StoreDir: filepath.Join(dir, "store")}
	if batch, err := spec.ApplyTask(cfg); err != nil || batch != "" || cfg.Tasks == nil {
		t.Fatalf("a job without a task changed its config: %q %v", batch, err)
	}
	spec.Job.Task = netTask()
	batch, err := spec.ApplyTask(cfg)
	if err != nil || batch != spec.Job.Task.Batch {
		t.Fatalf("ApplyTask = %q, %v", batch, err)
	}
	p := filepath.Join(dir, "task-prompt.md")
	if cfg.Intent.PromptFile != p || cfg.AgentPromptFile() != p || cfg.Tasks != nil {
		t.Fatalf("config: prompt %q, agent prompt %q, tasks %v", cfg.Intent.PromptFile, cfg.AgentPromptFile(), cfg.Tasks)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != spec.Job.Task.Prompt {
		t.Fatalf("prompt file %q, %v", b, err)
	}
	task, _ := cfg.Intent.Params["task"].(map[string]any)
	if task["id"] != "US-1" || task["title"] != "Add" || task["criteria"].([]any)[0] != "go test passes" {
		t.Fatalf("params task = %v", task)
	}
}

// WaitRun tells each state of a run until a final one, and ends with its
// context.
func TestWaitRun(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)
	id := netJob(t).RunID
	if err := PutState(ctx, h.Runs, RunState{RunID: id, State: StateQueued}); err != nil {
		t.Fatal(err)
	}
	seen := make(chan RunState, 8)
	done := make(chan error, 1)
	var final RunState
	go func() {
		var err error
		final, err = WaitRun(ctx, h.Runs, id, func(s RunState) { seen <- s })
		done <- err
	}()
	if s := <-seen; s.State != StateQueued {
		t.Fatalf("first state %+v", s)
	}
	for _, s := range []RunState{{RunID: id, State: StateRunning, Deliveries: 1, Iteration: 1}, {RunID: id, State: StateSucceeded, Deliveries: 1, Iteration: 2, Condition: "tests"}} {
		if err := PutState(ctx, h.Runs, s); err != nil {
			t.Fatal(err)
		}
		if got := <-seen; got.State != s.State || got.Iteration != s.Iteration {
			t.Fatalf("told %+v, want %+v", got, s)
		}
	}
	if err := <-done; err != nil || final.State != StateSucceeded || final.Condition != "tests" {
		t.Fatalf("WaitRun = %+v, %v", final, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := WaitRun(cctx, h.Runs, netJob(t).RunID, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRun after cancel: %v", err)
	}
	if _, err := WaitRun(ctx, h.Runs, "a b", nil); err == nil {
		t.Fatal("WaitRun took a bad run id")
	}
}

// FuzzParseJobTask: a job with a task decodes only when its task is valid,
// and applying a parsed task never fails on its content.
func FuzzParseJobTask(f *testing.F) {
	f.Add([]byte(`{"run_id":"0190a0b2-7c3e-7def-8abc-0123456789ab","config":"goal = 1","config_path":"ralph.toml","workspace":"/r","ref":"abc1","submitted":"2026-01-01T00:00:00Z","task":{"batch":"0190a0b2-7c3e-7def-8abc-0123456789ac","id":"US-1","title":"Add","criteria":["a"],"prompt":"p"}}`))
	f.Add([]byte(`{"run_id":"0190a0b2-7c3e-7def-8abc-0123456789ab","config":"goal = 1","task":{"batch":"b","id":"","prompt":""}}`))
	f.Add([]byte(`{"run_id":"0190a0b2-7c3e-7def-8abc-0123456789ab","config":"goal = 1","task":{"extra":1}}`))
	f.Add([]byte(`{"run_id":"0190a0b2-7c3e-7def-8abc-0123456789ab","config":"goal = 1","task":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJob(data)
		if err != nil || j.Task == nil {
			return
		}
		if verr := j.Task.Validate(); verr != nil {
			t.Fatalf("ParseJob accepted an invalid task: %v", verr)
		}
		cfg, perr := config.Parse([]byte("[intent]\ngoal = \"g\"\n[agent]\ncli = \"claude\"\n"), filepath.Join(t.TempDir(), "ralph.toml"), nil)
		if perr != nil {
			t.Fatal(perr)
		}
		if _, aerr := (RunSpec{Job: j, StoreDir: filepath.Join(t.TempDir(), "store")}).ApplyTask(cfg); aerr != nil {
			t.Fatalf("ApplyTask of a valid task: %v", aerr)
		}
	})
}
