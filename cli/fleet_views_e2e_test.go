package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/ledger"
)

// replicatedRun runs the quickstart into a local store with the real
// binary, then replicates that store's chain to the fleet at url as a
// worker does (one segment, then the end line) and records the run's final
// state: the fleet then holds a run whose local copy the test can compare
// with.
func replicatedRun(t *testing.T, e *e2e.E, fj fleetJobs, store string) (string, fleet.RunState) {
	t.Helper()
	id := quickstartRun(t, e, store)
	st, err := ledger.Open(ledger.Options{Dir: store, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := fleet.Replicate(ctx, fj.js, st, id, 1, 0, fj.certified(ctx, st))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	out, _, _ := e.Ralph("runs", "--json", "--store", store).Run()
	var rec struct {
		State, Class, Condition, Reason string
		Iterations                      int
		CostUSD                         float64 `json:"cost_usd"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &rec); err != nil {
		t.Fatalf("runs --json: %q %v", out, err)
	}
	now := time.Now().UTC()
	s := fleet.RunState{RunID: id, State: fleet.StateSucceeded, Worker: "w1", Goal: "count", Class: rec.Class,
		Condition: rec.Condition, Reason: rec.Reason, Iteration: rec.Iterations, CostUSD: rec.CostUSD,
		Deliveries: 1, Submitted: now, Started: now, Updated: now}
	if err := fleet.PutState(ctx, fj.h.Runs, s); err != nil {
		t.Fatal(err)
	}
	return id, s
}

// Every reading command given --nats reads the run's chain as the fleet
// replicated it, through the same code as a local store: the same bytes.
var _ = suite.Add(e2e.Test{Name: "FleetViewsMatchLocal", Run: func(t *testing.T, e *e2e.E) {
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	id, state := replicatedRun(t, e, fj, store)
	prefix := id[:13]

	same := []struct {
		name        string
		local, nats []string
	}{
		{"chain show", []string{"chain", "show", "--run", id, "--store", store}, []string{"chain", "show", "--run", prefix, "--nats", url}},
		{"chain show --json", []string{"chain", "show", "--run", id, "--json", "--store", store}, []string{"chain", "show", "--run", id, "--json", "--nats", url}},
		{"chain show --tree", []string{"chain", "show", "--run", id, "--tree", "--store", store}, []string{"chain", "show", "--run", id, "--tree", "--nats", url}},
		{"chain export", []string{"chain", "export", "--run", id, "--store", store}, []string{"chain", "export", "--run", id, "--nats", url}},
		{"history", []string{"history", id, "--store", store}, []string{"history", prefix, "--nats", url}},
		{"history --json -v", []string{"history", id, "--json", "-v", "--store", store}, []string{"history", id, "--json", "-v", "--nats", url}},
		{"predicate", []string{"predicate", id, `(>= (audit.count "Count" :succeeded) 3)`, "--store", store},
			[]string{"predicate", id, `(>= (audit.count "Count" :succeeded) 3)`, "--nats", url}},
	}
	// The rebuilt copy signs its own checkpoints as it imports (a bundle
	// import always does), so the JSON field naming the checkpoint that
	// covers an action is the one thing that may differ.
	cpSeq := regexp.MustCompile(`"checkpoint_seq":\d+`)
	for _, tc := range same {
		local, lerr, lcode := e.Ralph(tc.local...).Run()
		remote, rerr, rcode := e.Ralph(tc.nats...).Run()
		local, remote = cpSeq.ReplaceAllString(local, `"checkpoint_seq":N`), cpSeq.ReplaceAllString(remote, `"checkpoint_seq":N`)
		if lcode != 0 || rcode != 0 || local == "" || local != remote || lerr != rerr {
			t.Errorf("%s: local exit %d, fleet exit %d, stderr %q and %q; %s", tc.name, lcode, rcode, lerr, rerr, firstDiff(local, remote))
		}
	}

	// chain verify: the replicated chain, with every check a bundle gets;
	// --key pins the key, and a wrong pin fails.
	out, stderr, code := e.Ralph("chain", "verify", "--nats", url, "--run", prefix).Run()
	if code != 0 || !strings.Contains(out, "verified the chain of run "+id) || !strings.Contains(out, "pass --key to pin it") {
		t.Errorf("chain verify --nats: exit %d, %q %q", code, out, stderr)
	}
	vkey, _, _ := e.Ralph("chain", "key", "--store", store).Run()
	vkey = strings.TrimSpace(vkey)
	out, stderr, code = e.Ralph("chain", "verify", "--nats", url, "--run", id, "--key", vkey).Run()
	if code != 0 || !strings.Contains(out, "trusted key "+vkey+" (pinned with --key)") {
		t.Errorf("chain verify --nats --key: exit %d, %q %q", code, out, stderr)
	}
	other := filepath.Join(dir, "other")
	quickstartRun(t, e, other)
	otherKey, _, _ := e.Ralph("chain", "key", "--store", other).Run()
	_, stderr, code = e.Ralph("chain", "verify", "--nats", url, "--run", id, "--key", strings.TrimSpace(otherKey)).Run()
	if code != 1 || stderr == "" {
		t.Errorf("chain verify --nats with another key pinned: exit %d, %q; want 1", code, stderr)
	}

	// chain export --bundle: the run's bundle as replicated, which verifies
	// with no store.
	bundle, _, code := e.Ralph("chain", "export", "--bundle", "--nats", url, "--run", id).Run()
	if code != 0 || !strings.HasPrefix(bundle, "ralph-bundle 1\n") {
		t.Fatalf("chain export --bundle --nats: exit %d, %.80q", code, bundle)
	}
	bf := filepath.Join(dir, "run.bundle")
	writeFile(t, bf, bundle)
	out, stderr, code = e.Ralph("chain", "verify", "--bundle", bf, "--key", vkey).Run()
	if code != 0 || !strings.Contains(out, "verified bundle") {
		t.Errorf("chain verify --bundle of the fleet's export: exit %d, %q %q", code, out, stderr)
	}

	// runs --nats: the run with its worker, state, iteration and cost.
	out, stderr, code = e.Ralph("runs", "--nats", url).Run()
	if code != 0 || !strings.HasPrefix(out, "RUN") || !strings.Contains(out, id) || !strings.Contains(out, "succeeded") || !strings.Contains(out, "w1") {
		t.Errorf("runs --nats: exit %d, %q %q", code, out, stderr)
	}
	out, _, code = e.Ralph("runs", "--nats", url, "--json").Run()
	var got fleet.RunState
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.RunID != id || got.Worker != "w1" || got.Iteration != state.Iteration || got.Condition != state.Condition {
		t.Errorf("runs --nats --json: exit %d, %q (%v)", code, out, err)
	}
}})

var _ = suite.Add(e2e.Test{Name: "FleetViewsRefused", Run: func(t *testing.T, e *e2e.E) {
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	queued := "01a20000-0000-7000-8000-000000000001"
	if err := submitJob(t, url, fleet.Job{RunID: queued, Config: "[model]\n"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no NATS server", []string{"runs", "--nats", "nats://127.0.0.1:1"}, 2, "no NATS server answers at nats://127.0.0.1:1"},
		{"an unknown run", []string{"history", "0000", "--nats", url}, 2, "has no run 0000; `ralph runs --nats"},
		{"a run that has recorded nothing", []string{"history", queued, "--nats", url}, 2, "is queued and has recorded nothing yet"},
		{"chain show without --run", []string{"chain", "show", "--nats", url}, 2, "name the run to read with --run ID"},
		{"chain verify without --run", []string{"chain", "verify", "--nats", url}, 2, "with --run ID"},
		{"--store and --nats", []string{"runs", "--nats", url, "--store", t.TempDir()}, 2, "pass one"},
		{"chain verify --run without --nats", []string{"chain", "verify", "--run", queued}, 2, "a store is verified whole"},
		{"chain verify --nats --since", []string{"chain", "verify", "--nats", url, "--run", queued, "--since", "cp"}, 2, "pin the keys with --key"},
	}
	for _, tc := range tests {
		_, stderr, code := e.Ralph(tc.args...).Run()
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, code, stderr, tc.code, tc.want)
		}
	}
	// A running run whose worker no longer heartbeats (its entry in the
	// workers bucket is gone) says so.
	now := time.Now().UTC()
	lost := fleet.RunState{RunID: "01a20000-0000-7000-8000-000000000002", State: fleet.StateRunning, Worker: "gone-worker",
		Iteration: 2, Deliveries: 1, Submitted: now, Started: now}
	if err := fleet.PutState(context.Background(), fj.h.Runs, lost); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := e.Ralph("runs", "--nats", url).Run()
	if code != 0 || !regexp.MustCompile(lost.RunID+`\s+running\s+gone-worker\s+2\s`).MatchString(out) || !strings.Contains(out, "its worker stopped heartbeating") {
		t.Errorf("runs --nats with a run whose worker is gone: exit %d, %q\n%s", code, stderr, out)
	}

	// RALPH_NATS does not turn a reading command to the fleet.
	cmdDir := t.TempDir()
	_, stderr, code = e.Ralph("runs").In(cmdDir).With("RALPH_NATS=" + url).Run()
	if code != 2 || !strings.Contains(stderr, "no store at") {
		t.Errorf("runs with RALPH_NATS and no store: exit %d, %q; want the local store's error", code, stderr)
	}
}})

// ralph view --nats in a real terminal: the replicated run, read-only.
var _ = suite.Add(e2e.Test{Name: "FleetViewInTerminal", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	dir := t.TempDir()
	id, _ := replicatedRun(t, e, fj, filepath.Join(dir, "store"))
	tm := e.Ralph("view", id[:13], "--nats", url, "--creds", fleetCreds(t, url, fleet.RoleViewer)).Term()
	screen := tm.WaitIdle(e2e.UntilEnd)
	for _, want := range []string{"Done by counted-to-three (success)", "Causal chain", "Iteration 3", "read-only"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	tm.Send("q")
	if code := tm.Exit(); code != 0 {
		t.Errorf("ralph view --nats exited %d, want 0", code)
	}
	// attach --nats to a run no worker runs: one sentence saying where it is.
	tm2 := e.Ralph("attach", "--nats", url, "--creds", fleetCreds(t, url, fleet.RoleSubmitter), id).Term()
	code := tm2.Exit()
	if s := tm2.Screen(); !strings.Contains(s, "has ended (succeeded)") {
		t.Fatalf("ralph attach --nats to an ended run does not say it has ended:\n%s", s)
	}
	if code != 2 {
		t.Errorf("ralph attach --nats to an ended run exited %d, want 2", code)
	}
}})

// firstDiff names the first line where local and fleet output differ.
func firstDiff(local, fleet string) string {
	l, f := strings.Split(local, "\n"), strings.Split(fleet, "\n")
	for i := 0; i < len(l) || i < len(f); i++ {
		var a, b string
		if i < len(l) {
			a = l[i]
		}
		if i < len(f) {
			b = f[i]
		}
		if a != b {
			at := 0
			for at < len(a) && at < len(b) && a[at] == b[at] {
				at++
			}
			from := max(0, at-60)
			return fmt.Sprintf("line %d differs at byte %d:\nlocal …%q\nfleet …%q", i+1, at, a[from:min(len(a), at+60)], b[from:min(len(b), at+60)])
		}
	}
	if local == "" {
		return "no output"
	}
	return "same output"
}
