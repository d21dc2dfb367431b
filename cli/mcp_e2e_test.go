package cli_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/e2e"
)

// mcpSession starts `ralph mcp args...` and connects the SDK's own client
// to it over stdio.
func mcpSession(t *testing.T, e *e2e.E, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := e.Ralph(append([]string{"mcp"}, args...)...).Exec()
	client := mcp.NewClient(&mcp.Implementation{Name: "ralph-e2e", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to ralph mcp: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and returns its structured result, or its error text
// when the tool failed.
func call(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any, out any) (errText string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err.Error()
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v in %s", tool, err, b)
		}
	}
	return ""
}

// Every read-only tool, driven by the SDK's client over stdio against the
// real binary, on a store with one ended run; controls are refused without
// --allow-control; an unknown run and a bad request are one sentence each.
var _ = suite.Add(e2e.Test{Name: "MCPReadOnly", Needs: []e2e.Need{e2e.Tool("git")}, Serial: true, Run: func(t *testing.T, e *e2e.E) {
	dir := writeConfig(t, `[plan]
rtfs = '(step "Write" (call :fs.write {:path (str "it-" (:iteration ctx) ".txt") :content "hi"}))'
[[stop]]
name = "tests"
kind = "file_exists"
path = "DONE"
[[stop]]
name = "two"
kind = "max_iterations"
max = 2
[[hook]]
at = "after_iteration"
cmd = ["true"]
`)
	store := filepath.Join(dir, ".ralph")
	// A git work tree: each iteration is checkpointed, so its diff is there.
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	writeFile(t, filepath.Join(dir, ".gitignore"), ".ralph/\n")
	if _, stderr, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).Run(); code != 3 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	s := mcpSession(t, e, "--store", store)
	ctx := context.Background()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, " "); got != "abort_run chain_query iteration_history list_runs pause_run resume_run run_state skip_iteration verify_chain why_stopped" {
		t.Errorf("tools: %s", got)
	}

	var runs struct {
		Runs []struct {
			ID, State, Condition string
			Iterations           int
		} `json:"runs"`
	}
	if msg := call(t, s, "list_runs", nil, &runs); msg != "" || len(runs.Runs) != 1 || runs.Runs[0].State != "stopped" || runs.Runs[0].Iterations != 2 {
		t.Fatalf("list_runs: %q %+v", msg, runs)
	}
	id := runs.Runs[0].ID
	prefix := map[string]any{"run_id": id[:13]}

	var state struct {
		Run                     struct{ ID, State string }
		EvaluatedAfterIteration int `json:"evaluated_after_iteration"`
		Conditions              []struct {
			Name, Detail, Evidence string
			Met                    bool
		}
	}
	if msg := call(t, s, "run_state", prefix, &state); msg != "" || state.Run.ID != id || state.EvaluatedAfterIteration != 2 || len(state.Conditions) != 2 {
		t.Fatalf("run_state: %q %+v", msg, state)
	}
	for _, c := range state.Conditions {
		if c.Name == "tests" && (c.Met || !strings.Contains(c.Evidence, "DONE")) {
			t.Errorf("the failing condition's verdict: %+v", c)
		}
	}

	var why struct {
		Ended                     bool
		Condition, Class, Summary string
		Trigger                   *struct{ Name string }
	}
	if msg := call(t, s, "why_stopped", prefix, &why); msg != "" || !why.Ended || why.Condition != "two" || why.Class != "limit" ||
		why.Trigger == nil || why.Trigger.Name != "two" || !strings.Contains(why.Summary, "after 2 iteration(s): limit by two") {
		t.Fatalf("why_stopped: %q %+v", msg, why)
	}

	var hist struct {
		Iteration int
		Status    string
		Actions   []struct{ Type, Function string }
		Files     []struct {
			Path           string
			Added, Deleted int
		}
		Diff     string
		DiffNote string `json:"diff_note"`
	}
	if msg := call(t, s, "iteration_history", map[string]any{"run_id": id, "iteration": 1}, &hist); msg != "" || hist.Iteration != 1 || hist.Status != "ok" {
		t.Fatalf("iteration_history: %q %+v", msg, hist)
	}
	if len(hist.Files) != 1 || hist.Files[0].Path != "it-1.txt" || hist.Files[0].Added != 1 || !strings.Contains(hist.Diff, "+hi") {
		t.Errorf("iteration 1's diff: files %+v, diff %q, note %q", hist.Files, hist.Diff, hist.DiffNote)
	}
	var types []string
	for _, a := range hist.Actions {
		types = append(types, a.Type)
	}
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "IterationStarted PlanGenerated") || !strings.Contains(got, "CapabilityCall") ||
		!strings.HasSuffix(got, "HookRan IterationCompleted") {
		t.Errorf("iteration 1's actions: %s", got)
	}

	var chain struct {
		Actions []map[string]any
		More    bool
	}
	if msg := call(t, s, "chain_query", map[string]any{"run_id": id, "type": "HookRan", "limit": 1}, &chain); msg != "" || len(chain.Actions) != 1 || !chain.More ||
		chain.Actions[0]["action_type"] != "HookRan" || chain.Actions[0]["run_id"] != id {
		t.Fatalf("chain_query: %q %+v", msg, chain)
	}

	var ver struct {
		OK      bool
		Actions int
	}
	if msg := call(t, s, "verify_chain", nil, &ver); msg != "" || !ver.OK || ver.Actions == 0 {
		t.Fatalf("verify_chain: %q %+v", msg, ver)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"pause_run", prefix, "ralph mcp is read-only; start it with --allow-control to pause, resume, skip or abort runs"},
		{"abort_run", prefix, "ralph mcp is read-only; start it with --allow-control"},
		{"run_state", map[string]any{"run_id": "0000dead"}, "no run 0000dead in store " + store + "; list_runs gives the ids"},
		{"iteration_history", map[string]any{"run_id": id, "iteration": 9}, "run " + id + " has no iteration 9; it has 2"},
		{"chain_query", map[string]any{"type": "Bogus"}, `type "Bogus" is not an action type`},
		{"run_state", map[string]any{}, "run_id"},                    // missing: the schema refuses it
		{"iteration_history", map[string]any{"run_id": 7}, "run_id"}, // a number for a string
		{"no_such_tool", nil, "no_such_tool"},
	} {
		if msg := call(t, s, c.tool, c.args, nil); !strings.Contains(msg, c.want) {
			t.Errorf("%s %v: got %q, want it to contain %q", c.tool, c.args, msg, c.want)
		}
	}
	// The session survives every refusal.
	if msg := call(t, s, "list_runs", nil, &runs); msg != "" || len(runs.Runs) != 1 {
		t.Errorf("list_runs after the refusals: %q", msg)
	}
}})

// With --allow-control the tools steer the running loop through its
// store's socket: pause, resume, skip, abort.
var _ = suite.Add(e2e.Test{Name: "MCPControl", Serial: true, Run: func(t *testing.T, e *e2e.E) {
	dir := writeConfig(t, `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[loop]
delay = "300ms"
[[stop]]
kind = "max_iterations"
max = 1000
`)
	store := filepath.Join(dir, ".ralph")
	// Started before the run made its store: calls say so until it exists.
	s := mcpSession(t, e, "--store", store, "--allow-control")
	if msg := call(t, s, "list_runs", nil, nil); msg != "no store at "+store+"; run a plan first or pass --store DIR" {
		t.Errorf("list_runs before the store exists: %q", msg)
	}
	run := e.Ralph("run", "--no-tui").In(dir).Start()
	var runs struct{ Runs []struct{ ID string } }
	waitUntil(t, "the run is listed", func() bool { return call(t, s, "list_runs", nil, &runs) == "" && len(runs.Runs) == 1 })
	id := map[string]any{"run_id": runs.Runs[0].ID}
	state := func() string {
		var st struct {
			Live bool
			Run  struct{ State string }
		}
		if msg := call(t, s, "run_state", id, &st); msg != "" || !st.Live {
			t.Fatalf("run_state: %q %+v", msg, st)
		}
		return st.Run.State
	}
	var done struct{ Done string }
	if msg := call(t, s, "pause_run", id, &done); msg != "" || done.Done != "pause requested" {
		t.Fatalf("pause_run: %q %+v", msg, done)
	}
	waitUntil(t, "the run is paused", func() bool { return state() == "paused" })
	if msg := call(t, s, "resume_run", id, nil); msg != "" {
		t.Fatalf("resume_run: %q", msg)
	}
	waitUntil(t, "the run runs again", func() bool { return state() == "running" })
	if msg := call(t, s, "skip_iteration", id, nil); msg != "" {
		t.Fatalf("skip_iteration: %q", msg)
	}
	if msg := call(t, s, "abort_run", id, nil); msg != "" {
		t.Fatalf("abort_run: %q", msg)
	}
	err := run.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 {
		t.Fatalf("run ended with %v, want exit 4 (aborted)", err)
	}
	if msg := call(t, s, "pause_run", id, nil); !strings.Contains(msg, "is not running (its state is aborted)") {
		t.Errorf("pause of an ended run: %q", msg)
	}
}})

// With --nats the tools read the fleet: its runs' states, and each run's
// chain as the fleet replicated it.
var _ = suite.Add(e2e.Test{Name: "MCPFleet", Serial: true, Run: func(t *testing.T, e *e2e.E) {
	url := fleettest.Node(t).ClientURL()
	id, state := replicatedRun(t, e, openFleetJobs(t, url), filepath.Join(t.TempDir(), "store"))
	s := mcpSession(t, e, "--nats", url, "--allow-control")
	var runs struct {
		Runs []struct {
			ID, State, Condition string
			Iterations           int
		}
	}
	if msg := call(t, s, "list_runs", nil, &runs); msg != "" || len(runs.Runs) != 1 || runs.Runs[0].ID != id ||
		runs.Runs[0].State != "succeeded" || runs.Runs[0].Iterations != state.Iteration {
		t.Fatalf("list_runs: %q %+v", msg, runs)
	}
	prefix := map[string]any{"run_id": id[:13]}
	var why struct {
		Ended            bool
		State, Condition string
	}
	if msg := call(t, s, "why_stopped", prefix, &why); msg != "" || !why.Ended || why.State != "succeeded" || why.Condition != state.Condition {
		t.Fatalf("why_stopped: %q %+v", msg, why)
	}
	var st struct {
		Live       bool
		Conditions []struct{ Name string }
	}
	if msg := call(t, s, "run_state", prefix, &st); msg != "" || st.Live || len(st.Conditions) == 0 {
		t.Fatalf("run_state: %q %+v", msg, st)
	}
	var hist struct{ Iteration int }
	if msg := call(t, s, "iteration_history", prefix, &hist); msg != "" || hist.Iteration != state.Iteration {
		t.Fatalf("iteration_history: %q %+v", msg, hist)
	}
	var ver struct{ OK bool }
	if msg := call(t, s, "verify_chain", prefix, &ver); msg != "" || !ver.OK {
		t.Fatalf("verify_chain: %q %+v", msg, ver)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"chain_query", nil, "with --nats, name the run with run_id"},
		{"run_state", map[string]any{"run_id": "0000dead"}, "the fleet at " + url + " has no run 0000dead"},
		{"pause_run", prefix, "run " + id + " is not running (its state in the fleet is succeeded)"},
	} {
		if msg := call(t, s, c.tool, c.args, nil); !strings.Contains(msg, c.want) {
			t.Errorf("%s: got %q, want %q", c.tool, msg, c.want)
		}
	}
}})
