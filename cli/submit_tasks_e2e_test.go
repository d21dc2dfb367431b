package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/e2e"
)

// fleetOnDone names the task's done file from the task's prompt, which a
// fleet worker writes beside the run's workspace (its branch there is
// ralph/<run-id>, not the task's).
const fleetOnDone = `FAKE_AGENT_ON_DONE=id=$(sed -n 's/^## Task \([^:]*\):.*/\1/p' ../task-prompt.md); echo ok > "done-$id.txt"`

// ralph submit --tasks, on a NATS node with its users (the submitter and
// the worker sign in with their own credentials): each task's run is a
// job a worker runs (the stand-in agent on the worker), and the
// submitter's merge queue lands each green task on the prd's branch, one
// commit per story with passes: true, the user's checkout untouched; the
// fleet's runs carry the task, and the local chain the batch.
var _ = suite.Add(e2e.Test{Name: "SubmitTasksRunsABacklogOnTheFleet", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	b := newBacklog(t, e)
	f.worker("w1", 2, append(b.env, fleetOnDone)...)
	before := b.checkout(t)
	out, errOut, code := b.ralph("submit", "ralph.toml", "--tasks", "prd.json", "--parallel", "3",
		"--nats", f.url, "--creds", fleetCreds(t, f.url, fleet.RoleSubmitter)).Run()
	if code != 0 {
		t.Fatalf("submit --tasks: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"3 tasks from prd:", "onto ralph/greetings, 3 at a time", "US-002 started: Greet in French",
		"US-001 it 1 ok", "US-003 merged as ", "done: 3 of 3 merged"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if after := b.checkout(t); after != before {
		t.Fatalf("the batch changed the user's checkout:\n%s\n---\n%s", before, after)
	}
	b.landed(t)
	states, err := fleet.ListStates(context.Background(), f.h.Runs)
	if err != nil {
		t.Fatal(err)
	}
	chain, _, _ := b.ralph("chain", "show", "--json").Run()
	for _, s := range states {
		if s.State != fleet.StateSucceeded || s.Worker != "w1" || !strings.Contains(chain, s.RunID) {
			t.Errorf("fleet run %+v: not a succeeded task run of the batch", s)
		}
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(chain), "\n") {
		var a struct {
			ActionType string `json:"action_type"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		counts[a.ActionType]++
	}
	if len(states) != 3 || counts["BatchStarted"] != 1 || counts["TaskStarted"] != 3 || counts["TaskMerged"] != 3 || counts["RunStarted"] != 0 {
		t.Fatalf("%d fleet runs; the local chain: %v", len(states), counts)
	}
	if out, errOut, code := b.ralph("chain", "verify").Run(); code != 0 {
		t.Fatalf("chain verify: exit %d\n%s\n%s", code, out, errOut)
	}
}})
